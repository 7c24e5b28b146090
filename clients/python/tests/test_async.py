"""AsyncMemd against the real built memd: the same methods, awaited."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from memd import AsyncMemd, MemdError
from memd.testing import start_memd


@pytest.fixture(scope="module")
def server():
    # Keyword search (no embedder), as the sync client's test.
    with start_memd(
        model=[{"operations": [{"fact": "User is vegetarian", "decision": "ADD", "category": "diet"}]}],
        env={"MEMD_EMBEDDER": "none"},
    ) as s:
        yield s


def test_async_client_covers_the_api(server):
    async def run() -> None:
        async with server.async_client() as c:
            smart = await c.store(namespace="a", entity="u", content="I don't eat meat")
            assert [m["content"] for m in smart["memories"]] == ["User is vegetarian"]
            raw = await c.store({"namespace": "a", "entity": "u", "content": "likes jazz", "infer": False})
            mid = raw["memories"][0]["id"]
            assert (await c.get(mid))["content"] == "likes jazz"
            assert len((await c.list(namespace="a", entity="u"))["memories"]) == 2
            assert (await c.update(mid, content="likes free jazz"))["content"] == "likes free jazz"
            assert [e["event"] for e in await c.events(memory_id=mid)] == ["UPDATE", "ADD"]
            assert (await c.diff(namespace="a", entity="u"))["summary"].startswith("2 new")
            found = await c.search(namespace="a", query="jazz")
            assert [r["id"] for r in found["results"]] == [mid]
            context = await c.context(namespace="a", entity="u", query="jazz", max_tokens=100)
            assert "likes free jazz" in context["context"] and context["tokens"] <= 100
            assert (await c.me())["id"] == "root"
            assert [n["namespace"] for n in (await c.namespaces())["namespaces"]] == ["a"]
            assert [e["entity"] for e in (await c.entities(namespace="a"))["entities"]] == ["u"]
            lines = [line async for line in c.export(namespaces=["a"])]
            assert lines[0]["type"] == "header" and sum(line["type"] == "memory" for line in lines) == 2
            key = await c.keys.create(name="k", permission="read", namespaces=["a"])
            assert (await c.keys.get(key["id"]))["permission"] == "read"
            assert key["id"] in [k["id"] for k in await c.keys.list()]
            assert (await c.keys.revoke(key["id"]))["revoked"] is True
            assert await c.delete(mid) == {"deleted": True}
            with pytest.raises(MemdError) as e:
                await c.get(mid)
            assert (e.value.status, e.value.code) == (404, "not_found")
            await c.store(namespace="a", entity="v", content="x", infer=False)
            assert await c.delete_entity(namespace="a", entity="v") == {"deleted": 1}
            assert c.deleteEntity == c.delete_entity
            await c.store(namespace="a", entity="w", content="x", infer=False)
            assert (await c.erase(namespace="a", entity="w"))["memories"] == 1
            assert [x["entity"] for x in await c.erasures(namespace="a")] == ["w"]
            with pytest.raises(MemdError) as e:
                await c.search(namespace="a", query="")
            assert e.value.details and e.value.details[0]["field"] == "query"

            # Concurrent calls share one client.
            stored = await asyncio.gather(
                *(c.store(namespace="a", entity="many", content=f"fact {i}", infer=False) for i in range(8))
            )
            assert len({s["memories"][0]["id"] for s in stored}) == 8

    asyncio.run(run())


class Flaky(httpx.AsyncBaseTransport):
    def __init__(self, fail: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.fail = fail
        self.keys: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        res = await self.inner.handle_async_request(request)
        if len(self.keys) <= self.fail:
            await res.aread()
            await res.aclose()
            return httpx.Response(503, headers={"retry-after": "0"}, content=b'{"error":{"code":"storage_unavailable","message":"x"}}')
        return res


def test_async_retries_a_keyed_write_once(server):
    async def run() -> None:
        flaky = Flaky(fail=1)
        async with AsyncMemd(server.url, server.key, http_client=httpx.AsyncClient(transport=flaky)) as c:
            await c.store(namespace="ar", entity="u", content="once", infer=False)
        assert len(flaky.keys) == 2 and flaky.keys[0] and flaky.keys[0] == flaky.keys[1]
        assert len(server.client.list(namespace="ar")["memories"]) == 1

    asyncio.run(run())
