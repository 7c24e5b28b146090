"""The sync client against the real built memd (dist/memd, or MEMD_BIN), started by the test kit."""

from __future__ import annotations

import time

import httpx
import pytest

from memd import Memd, MemdError
from memd.testing import start_memd


def model(request: dict) -> object:
    text = str(request["messages"])
    if "bad answer please" in text:
        return "not json at all"
    if "slow please" in text:
        time.sleep(1.5)
    return {"operations": [{"fact": "User likes green tea", "decision": "ADD", "category": "preference"}]}


@pytest.fixture(scope="module")
def server():
    # Keyword search (no embedder): the answers below are the memories sharing a word with the query.
    with start_memd(model=model, env={"MEMD_EMBEDDER": "none"}) as s:
        yield s


def test_every_method_and_memd_error(server):
    c = server.client
    smart = c.store(namespace="ns", entity="u", content="I like green tea")
    assert smart["memories"][0]["content"] == "User likes green tea"
    assert len(server.model_requests) == 1
    raw = c.store({"namespace": "ns", "entity": "u", "content": "raw fact", "infer": False}, tags=["t"])
    mid = raw["memories"][0]["id"]
    assert c.get(mid)["tags"] == ["t"]
    page = c.list(namespace="ns", entity="u", limit=1)
    assert [m["id"] for m in page["memories"]] == [mid]
    rest = c.list({"namespace": "ns", "entity": "u", "limit": 1, "cursor": page["nextCursor"]})
    assert [m["content"] for m in rest["memories"]] == ["User likes green tea"]
    assert [m["id"] for m in c.list(namespace="ns", tags=["t"])["memories"]] == [mid]
    edited = c.update(mid, {"content": "raw fact, edited"}, tags=None)
    assert (edited["content"], edited.get("tags")) == ("raw fact, edited", None)
    assert c.events(memory_id=mid, limit=1)[0]["event"] == "UPDATE"
    assert c.events({"namespace": "ns", "limit": 1})[0]["memoryId"] == mid
    assert [e["event"] for e in c.events(memory_id=mid)] == ["UPDATE", "ADD"]
    assert len(c.diff(namespace="ns")["created"]) == 2
    assert c.delete(mid) == {"deleted": True}

    with pytest.raises(MemdError) as gone:
        c.get(mid)
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    assert gone.value.request_id
    with pytest.raises(MemdError) as bad:
        c.store(namespace="ns", entity="u", content="bad answer please")
    assert (bad.value.status, bad.value.code) == (502, "llm_bad_output")

    key = c.keys.create(name="reader", permission="read", namespaces=["ns"])
    assert len(key["secret"]) > 10
    assert c.keys.get(key["id"])["name"] == "reader"
    assert key["id"] in [k["id"] for k in c.keys.list()]
    with Memd(server.url, key["secret"]) as reader:
        assert len(reader.list(namespace="ns")["memories"]) == 1
        with pytest.raises(MemdError) as forbidden:
            reader.list(namespace="other")
        assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
        with pytest.raises(MemdError) as cannot:
            reader.store(namespace="ns", entity="u", content="x", infer=False)
        assert cannot.value.code == "forbidden"
        assert c.keys.revoke(key["id"]) == {"id": key["id"], "revoked": True}
        with pytest.raises(MemdError) as revoked:
            reader.list(namespace="ns")
        assert revoked.value.status == 401

    c.store(namespace="ns", entity="gone", content="one", infer=False)
    c.store(namespace="ns", entity="gone", content="two", infer=False)
    assert c.delete_entity(namespace="ns", entity="gone") == {"deleted": 2}
    assert c.deleteEntity == c.delete_entity  # the TypeScript name works too
    c.store(namespace="ns", entity="forget-me", content="secret", infer=False)
    erased = c.erase(namespace="ns", entity="forget-me")
    assert (erased["entity"], erased["memories"]) == ("forget-me", 1)
    assert [e["entity"] for e in c.erasures(namespace="ns")] == ["forget-me"]

    me = c.me()
    assert (me["permission"], me["namespaces"]) == ("admin", ["*"])
    c.store(namespace="ns2", entity="x", content="other namespace", infer=False)
    first = c.namespaces(limit=1)
    assert len(first["namespaces"]) == 1
    more = c.namespaces(cursor=first["nextCursor"])
    assert {n["namespace"] for n in first["namespaces"] + more["namespaces"]} == {"ns", "ns2"}
    assert {"u", "gone", "forget-me"} <= {e["entity"] for e in c.entities(namespace="ns")["entities"]}
    lines = list(c.export(namespaces=["ns"]))
    assert lines[0]["type"] == "header"
    assert len([line for line in lines if line["type"] == "memory"]) > 2
    assert all(line["type"] == "header" or line["namespace"] == "ns" for line in lines)
    writer = c.keys.create({"name": "w", "permission": "read_write", "namespaces": ["ns"]})
    with Memd(server.url, writer["secret"]) as not_admin:
        with pytest.raises(MemdError) as refused:
            next(not_admin.export())
        assert (refused.value.status, refused.value.code) == (403, "forbidden")

    with pytest.raises(MemdError) as invalid:
        c.diff(namespace="ns", since="yesterday")
    assert [d["field"] for d in invalid.value.details] == ["since"]
    found = c.search(namespace="ns", query="green tea")
    assert found["mode"] == "keyword"
    assert [m["content"] for m in found["results"]] == ["User likes green tea"]
    assert found["results"][0]["score"] > 0
    with pytest.raises(MemdError) as blank:
        c.search(namespace="ns", query="  ")
    assert (blank.value.status, blank.value.code) == (400, "invalid_request")
    with pytest.raises(MemdError) as down:
        Memd("http://127.0.0.1:9", "k", max_retries=0).list(namespace="ns")
    assert (down.value.status, down.value.code) == (0, "network_error")


class Flaky(httpx.BaseTransport):
    """Sends every request to the real server, and answers the first `fail` of them with `status`
    instead of the server's answer (the write did run: a 503 after the commit, as a slow database
    can give). Records the headers of every request."""

    def __init__(self, fail: int, status: int = 503, retry_after: str | None = "0") -> None:
        self.inner = httpx.HTTPTransport()
        self.fail = fail
        self.status = status
        self.retry_after = retry_after
        self.seen: list[httpx.Headers] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.headers)
        res = self.inner.handle_request(request)
        if len(self.seen) <= self.fail:
            res.read()
            res.close()
            headers = {"retry-after": self.retry_after} if self.retry_after is not None else {}
            body = b'{"error":{"code":"storage_unavailable","message":"try again"}}'
            return httpx.Response(self.status, headers=headers, content=body)
        return res


def test_a_write_retried_after_503_carries_one_idempotency_key_and_writes_once(server, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda s: waits.append(s))
    flaky = Flaky(fail=2)
    with Memd(server.url, server.key, http_client=httpx.Client(transport=flaky)) as c:
        stored = c.store(namespace="retry", entity="u", content="once only", infer=False)
    keys = [h.get("idempotency-key") for h in flaky.seen]
    assert len(keys) == 3 and keys[0] and len(set(keys)) == 1
    assert waits == [0.0, 0.0]  # the server's Retry-After: 0
    memories = server.client.list(namespace="retry")["memories"]
    assert [m["id"] for m in memories] == [stored["memories"][0]["id"]]

    # Each call its own key; the caller's key when given.
    flaky = Flaky(fail=0)
    with Memd(server.url, server.key, http_client=httpx.Client(transport=flaky)) as c:
        c.store(namespace="retry", entity="u", content="second", infer=False)
        c.store(namespace="retry", entity="u", content="third", infer=False, idempotency_key="mine-1")
        c.update(memories[0]["id"], content="edited")
    keys = [h.get("idempotency-key") for h in flaky.seen]
    assert keys[1] == "mine-1" and keys[0] and keys[2] and len(set(keys)) == 3


def test_retries_are_bounded_and_only_where_repeating_is_safe(server, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda s: waits.append(s))
    flaky = Flaky(fail=10, retry_after=None)
    with Memd(server.url, server.key, max_retries=2, http_client=httpx.Client(transport=flaky)) as c:
        with pytest.raises(MemdError) as e:
            c.list(namespace="retry")
    assert (e.value.status, e.value.code, len(flaky.seen)) == (503, "storage_unavailable", 3)
    assert waits == [0.5, 1.0]  # no Retry-After: 0.5 s doubling

    # An erase cannot be repeated safely: a 503 is raised at once; without automatic keys, a store too.
    for make in (
        lambda c: c.erase(namespace="retry", entity="nobody"),
        lambda c: c.store(namespace="retry", entity="u", content="unkeyed", infer=False),
    ):
        flaky = Flaky(fail=10)
        with Memd(server.url, server.key, idempotency_keys=False, http_client=httpx.Client(transport=flaky)) as c:
            with pytest.raises(MemdError):
                make(c)
        assert len(flaky.seen) == 1
        assert flaky.seen[0].get("idempotency-key") is None

    # A Retry-After longer than max_retry_wait is not waited for.
    waits.clear()
    flaky = Flaky(fail=10, status=429, retry_after="120")
    with Memd(server.url, server.key, http_client=httpx.Client(transport=flaky)) as c:
        with pytest.raises(MemdError) as e:
            c.me()
    assert (e.value.status, e.value.retry_after, len(flaky.seen), waits) == (429, 120.0, 1, [])


def test_429_from_the_rate_limiter_waits_retry_after_then_succeeds(monkeypatch):
    # One request a second, a burst of one: back-to-back calls meet the real limiter.
    with start_memd(args=["--rate-limit", "1:1"]) as s:
        with Memd(s.url, s.key, max_retries=0) as c:
            with pytest.raises(MemdError) as limited:
                for _ in range(5):
                    c.me()
            assert (limited.value.status, limited.value.code) == (429, "rate_limited")
            assert limited.value.retry_after is not None and limited.value.retry_after >= 1

        waits: list[float] = []
        real = time.sleep

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            real(seconds)

        monkeypatch.setattr(time, "sleep", sleep)
        with Memd(s.url, s.key, max_retries=3) as c:
            for _ in range(5):
                assert c.me()["id"] == "root"
                if waits:
                    break
        assert waits and all(w >= 1 for w in waits)


def test_timeout_is_a_memd_error_and_not_retried(server):
    # The model takes 1.5 s; the client gives up after 0.3 s. A read timeout may leave the store
    # running, so it is not sent again.
    seen = Flaky(fail=0)
    http = httpx.Client(transport=seen, timeout=0.3)
    with Memd(server.url, server.key, timeout=0.3, http_client=http) as c:
        with pytest.raises(MemdError) as e:
            c.store(namespace="t", entity="u", content="slow please")
    assert (e.value.status, e.value.code, len(seen.seen)) == (0, "timeout", 1)


def test_context_for_a_prompt(server):
    c = server.client
    c.store(namespace="ctx", entity="u", content="Prefers green tea over coffee", infer=False, category="preference")
    c.store(namespace="ctx", entity="u", content="Lives in Lisbon", infer=False, category="place", importance=0.9)
    found = c.context(namespace="ctx", entity="u", query="green tea", max_tokens=300)
    assert "Prefers green tea over coffee" in found["context"]
    assert [m["content"] for m in found["memories"]] == ["Prefers green tea over coffee"]
    assert 0 < found["tokens"] <= 300 and found["truncated"] is False
    everything = c.context({"namespace": "ctx", "entity": "u", "categories": ["place"]})
    assert (everything["mode"], [m["content"] for m in everything["memories"]]) == ("importance", ["Lives in Lisbon"])
    assert everything["context"].startswith("## place")
    with pytest.raises(MemdError) as e:
        c.context(namespace="ctx", entity="u", max_tokens=10)
    assert e.value.status == 400 and [d["field"] for d in e.value.details] == ["maxTokens"]


def test_entity_prefix_on_list_search_and_entities(server):
    c = server.client
    for entity in ("acme.alice", "acme.bob", "acmecorp.carol"):
        c.store(namespace="prefixes", entity=entity, content="likes sailing", infer=False)
    listed = c.list(namespace="prefixes", entity_prefix="acme.")
    assert sorted(m["entity"] for m in listed["memories"]) == ["acme.alice", "acme.bob"]
    found = c.search(namespace="prefixes", query="sailing", entity_prefix="acme.")
    assert sorted(r["entity"] for r in found["results"]) == ["acme.alice", "acme.bob"]
    names = c.entities(namespace="prefixes", prefix="acme")
    assert [e["entity"] for e in names["entities"]] == ["acme.alice", "acme.bob", "acmecorp.carol"]
