"""Keyed facts, revert and restore from the Python clients (sync and async) against the real built
memd (docs/keyed-facts.md, docs/undo.md)."""

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


def test_sync_keyed_revert_restore(server):
    c = server.client
    first = c.store(namespace="u", entity="s", content="Colour is blue", key="colour")["memories"][0]
    second = c.store(namespace="u", entity="s", content="Colour is green", key="colour")
    assert second["memories"][0]["id"] == first["id"] and second["memories"][0]["event"] == "UPDATE"
    same = c.store(namespace="u", entity="s", content="Colour is green", key="colour")
    assert same["unchanged"] == 1
    assert c.get_by_key("u", "s", "colour")["content"] == "Colour is green"
    assert c.get_by_key("u", "s", "nothing") is None

    add = c.events(memory_id=first["id"])[-1]
    assert add["event"] == "ADD"
    dry = c.revert(first["id"], to_event=add["id"], dry_run=True)
    assert dry["action"] == "update" and dry["after"]["content"] == "Colour is blue" and dry["event"] is None
    done = c.revert(first["id"], {"toEvent": add["id"]})
    assert done["event"]["revertOf"] == add["id"]
    assert c.get(first["id"])["content"] == "Colour is blue"

    c.delete(first["id"])
    with pytest.raises(MemdError) as unknown:
        c.revert(first["id"], to_event="999999999")
    assert unknown.value.status == 404
    back = c.restore(namespace="u", entity="s", as_of=done["after"]["updatedAt"])
    assert back["changed"] == 1 and back["memories"][0]["action"] == "add"
    assert c.get(first["id"])["content"] == "Colour is blue"


def test_async_keyed_revert_restore(server):
    async def run():
        async with AsyncMemd(server.url, server.key) as c:
            m = (await c.store(namespace="u", entity="a", content="Owns a bike", key="vehicle"))["memories"][0]
            assert (await c.get_by_key("u", "a", "vehicle"))["id"] == m["id"]
            time.sleep(0.01)
            before = (await c.get(m["id"]))["createdAt"]
            await c.store(namespace="u", entity="a", content="Owns a car", key="vehicle")
            dry = await c.restore(namespace="u", entity="a", as_of=before, dry_run=True)
            assert dry["changed"] == 1 and dry["events"] == []
            done = await c.restore(namespace="u", entity="a", as_of=before)
            assert [e["event"] for e in done["events"]] == ["UPDATE"]
            assert (await c.get(m["id"]))["content"] == "Owns a bike"
            events = await c.events(memory_id=m["id"])
            revert = await c.revert(m["id"], to_event=events[1]["id"])
            assert revert["after"]["content"] == "Owns a car"

    asyncio.run(run())


def test_consolidate(server):
    c = server.client
    for text in ["Likes hiking", "likes hiking.", "Hiking: likes it"]:
        c.store(namespace="u", entity="tidy", content=text, infer=False)
    dry = c.consolidate(namespace="u", entity="tidy", dry_run=True)
    assert dry["memoriesMerged"] == 2 and dry["events"] == []
    done = c.consolidate({"namespace": "u", "entity": "tidy"})
    assert [e["event"] for e in done["events"]] == ["MERGE", "DELETE", "DELETE"]
    assert len(c.list(namespace="u", entity="tidy")["memories"]) == 1
