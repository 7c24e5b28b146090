"""stream(): replay, live events, and resuming by itself after a cut connection (Last-Event-ID),
with nothing lost or repeated; sync and async, against the real binary through a cutting proxy."""

from __future__ import annotations

import asyncio

import pytest

from memd import AsyncMemd, Memd, MemdError
from memd.testing import start_memd

from .proxy import CuttingProxy


@pytest.fixture(scope="module")
def server():
    with start_memd() as s:
        yield s


def store(server, namespace: str, *contents: str) -> list[str]:
    return [
        server.client.store(namespace=namespace, entity="u", content=c, infer=False)["memories"][0]["id"]
        for c in contents
    ]


def test_stream_resumes_after_a_cut_connection_without_loss_or_duplicates(server):
    ids = store(server, "s1", "one", "two", "three")
    proxy = CuttingProxy(server.url)
    seen: list[tuple[str, str]] = []
    try:
        with Memd(proxy.url, server.key) as c:
            with c.stream(namespace="s1", since="2000-01-01T00:00:00Z", retry=0.05) as events:
                for cursor, event in events:
                    seen.append((cursor, event["memoryId"]))
                    if len(seen) == 3:
                        # Mid-stream: the connection drops, and more is written meanwhile.
                        proxy.cut()
                        ids += store(server, "s1", "four", "five")
                    if len(seen) == 4:
                        ids += store(server, "s1", "six")  # live, after the resume
                    if len(seen) == 6:
                        break
                assert events.cursor == seen[-1][0]
    finally:
        proxy.close()
    assert [m for _, m in seen] == ids
    assert len({cursor for cursor, _ in seen}) == 6
    assert len(proxy.heads) >= 2
    first, resumed = proxy.heads[0], proxy.heads[1]
    assert proxy.header(first, "last-event-id") is None
    assert proxy.header(resumed, "last-event-id") == seen[2][0]


def test_stream_from_a_cursor_and_permanent_errors(server):
    ids = store(server, "s2", "a", "b", "c")
    with server.client.stream(namespace="s2", since="2000-01-01T00:00:00Z") as events:
        first = next(events)
    assert first.event["memoryId"] == ids[0]
    with server.client.stream(namespace="s2", after=first.cursor) as events:
        rest = [next(events).event["memoryId"] for _ in range(2)]
    assert rest == ids[1:]
    key = server.client.keys.create(name="r", permission="read", namespaces=["s2"])
    with Memd(server.url, key["secret"]) as reader:
        with pytest.raises(MemdError) as e:
            next(reader.stream(namespace="elsewhere"))
    assert (e.value.status, e.value.code) == (403, "forbidden")
    with pytest.raises(MemdError) as e:
        next(server.client.stream(namespace="s2", after="not a cursor"))
    assert e.value.status == 400


def test_async_stream_resumes_after_a_cut_connection(server):
    async def run() -> tuple[list[tuple[str, str]], list[str], CuttingProxy]:
        ids = store(server, "s3", "one", "two")
        proxy = CuttingProxy(server.url)
        seen: list[tuple[str, str]] = []
        try:
            async with AsyncMemd(proxy.url, server.key) as c:
                async with c.stream(namespace="s3", since="2000-01-01T00:00:00Z", retry=0.05) as events:
                    async for cursor, event in events:
                        seen.append((cursor, event["memoryId"]))
                        if len(seen) == 2:
                            proxy.cut()
                            ids += await asyncio.to_thread(store, server, "s3", "three", "four")
                        if len(seen) == 4:
                            break
        finally:
            proxy.close()
        return seen, ids, proxy

    seen, ids, proxy = asyncio.run(run())
    assert [m for _, m in seen] == ids
    assert proxy.header(proxy.heads[1], "last-event-id") == seen[1][0]


def test_a_key_revoked_while_streaming_ends_the_stream_with_401(server):
    store(server, "s4", "before")
    key = server.client.keys.create(name="short-lived", permission="read", namespaces=["s4"])
    with Memd(server.url, key["secret"]) as reader:
        with reader.stream(namespace="s4", since="2000-01-01T00:00:00Z", retry=0.05) as events:
            first = next(events)
            assert first.event["newContent"] == "before"
            server.client.keys.revoke(key["id"])
            with pytest.raises(MemdError) as e:
                next(events)
    assert (e.value.status, e.value.code) == (401, "unauthorized")


def test_the_sse_reading_takes_split_chunks_comments_and_an_overflow():
    from memd._common import SseParser, StreamState

    state = StreamState("ns", None, None, None, retry=0.5)
    wire = (
        b": memd event stream\n\nid: c0\n\n"
        b'id: c1\nevent: memory\ndata: {"memoryId": "m1"}\n\n'
        b": keepalive\n\n"
        b'id: c2\r\nevent: memory\r\ndata: {"memoryId":\r\ndata: "m2"}\r\n\r\n'
        b'id: c2\nevent: overflow\ndata: {"cursor": "c2", "message": "consumer too slow"}\n\n'
    )
    parser = SseParser()
    events = []
    for i in range(0, len(wire), 7):  # any split of the bytes reads the same
        events += state.take(parser.feed(wire[i : i + 7]))
    assert [(e.cursor, e.event["memoryId"]) for e in events] == [("c1", "m1"), ("c2", "m2")]
    # After an overflow the stream resumes at once, from the cursor it gave, sent as Last-Event-ID.
    assert state.cursor == "c2" and state.headers()["last-event-id"] == "c2"
    assert state.next_wait(None) == 0.0
    assert state.next_wait(3.0) == 3.0  # at least the server's Retry-After
