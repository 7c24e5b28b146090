"""As-of reads from the Python clients (sync and async) against the real built memd: `get(as_of=)`,
and `as_of` on list, search and context, which travel as `asOf` (docs/time.md)."""

from __future__ import annotations

import asyncio
import time

import pytest

from memd import AsyncMemd, MemdError
from memd.testing import start_memd


@pytest.fixture(scope="module")
def server():
    with start_memd() as s:
        yield s


def history(c, entity: str) -> tuple[str, str, str]:
    """A memory stored, then corrected: its id, an instant between the two, and one before both."""
    before = c.list(namespace="t", entity=entity)  # nothing yet
    assert before["memories"] == []
    mid = c.store(namespace="t", entity=entity, content="Prefers green tea", infer=False)["memories"][0]["id"]
    stored_at = c.get(mid)["createdAt"]
    time.sleep(0.02)  # the correction lands at a later millisecond than the store
    c.update(mid, content="Prefers black coffee")
    return mid, stored_at, "2001-01-01T00:00:00.000Z"


def test_sync_client_reads_as_of_a_moment(server):
    c = server.client
    mid, then, early = history(c, "sync")
    assert c.get(mid)["content"] == "Prefers black coffee"
    assert c.get(mid, as_of=then)["content"] == "Prefers green tea"
    with pytest.raises(MemdError) as absent:
        c.get(mid, as_of=early)
    assert absent.value.status == 404
    with pytest.raises(MemdError) as future:
        c.get(mid, as_of="2999-01-01T00:00:00Z")
    assert future.value.status == 400

    listed = c.list(namespace="t", entity="sync", as_of=then)["memories"]
    assert [(m["id"], m["content"]) for m in listed] == [(mid, "Prefers green tea")]
    assert c.list({"namespace": "t", "entity": "sync", "asOf": early})["memories"] == []

    found = c.search(namespace="t", entity="sync", query="tea", mode="keyword", as_of=then)["results"]
    assert [r["content"] for r in found] == ["Prefers green tea"]
    assert c.search(namespace="t", entity="sync", query="tea", mode="keyword")["results"] == []

    ctx = c.context(namespace="t", entity="sync", as_of=then)
    assert [m["content"] for m in ctx["memories"]] == ["Prefers green tea"]
    assert "green tea" in ctx["context"]
    assert c.context(namespace="t", entity="sync", as_of=early)["memories"] == []

    # observedAfter / observedBefore travel too: nothing of this entity was observed before 2001.
    assert c.list(namespace="t", entity="sync", observed_before=early)["memories"] == []
    assert len(c.list(namespace="t", entity="sync", observed_after=early)["memories"]) == 1


def test_async_client_reads_as_of_a_moment(server):
    mid, then, early = history(server.client, "async")

    async def run():
        async with AsyncMemd(server.url, server.key) as c:
            assert (await c.get(mid, as_of=then))["content"] == "Prefers green tea"
            with pytest.raises(MemdError) as absent:
                await c.get(mid, as_of=early)
            assert absent.value.status == 404
            listed = (await c.list(namespace="t", entity="async", as_of=then))["memories"]
            assert [m["content"] for m in listed] == ["Prefers green tea"]
            found = await c.search(namespace="t", entity="async", query="tea", mode="keyword", as_of=then)
            assert [r["content"] for r in found["results"]] == ["Prefers green tea"]
            ctx = await c.context(namespace="t", entity="async", as_of=then)
            assert [m["content"] for m in ctx["memories"]] == ["Prefers green tea"]

    asyncio.run(run())
