"""Memory as tools: an agent loop of plain httpx calls to the fake OpenAI-compatible model,
scripted to call the tools; the memory in the real memd changes, and the model receives the
results. Sync and async."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import httpx
import pytest

from memd import Memd
from memd.testing import start_fake_model, start_memd
from memd.tools import TOOL_NAMES, AsyncMemoryTools, MemoryTools, memory_tools


@pytest.fixture(scope="module")
def server():
    # Keyword search (no embedder): a query finds only memories sharing a word with it.
    with start_memd(env={"MEMD_EMBEDDER": "none"}) as s:
        yield s


def agent_loop(model_url: str, tools: MemoryTools, prompt: str, steps: int = 6) -> list[dict]:
    """The loop an application writes: ask the model, run the tool calls it makes, send the results back."""
    messages: list[dict] = [{"role": "user", "content": prompt}]
    for _ in range(steps):
        res = httpx.post(
            f"{model_url}/chat/completions", json={"model": "agent", "messages": messages, "tools": tools.definitions}
        )
        message = res.json()["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": tools.run(call)})
    return messages


def tool_results(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def test_an_agent_remembers_recalls_and_forgets(server):
    c = server.client
    other = c.store(namespace="agents", entity="eve", content="Eve's secret", infer=False)["memories"][0]
    with start_fake_model(
        [
            {"tool_calls": [{"name": "remember", "arguments": {"content": "Favourite colour is teal", "category": "preference"}}]},
            {"tool_calls": [{"name": "recall", "arguments": {"query": "colour"}}, {"name": "get_context", "arguments": {}}]},
            lambda request: {
                "tool_calls": [
                    {"name": "forget", "arguments": {"memoryId": tool_results(request)[0]["stored"][0]["id"]}},
                    {"name": "forget", "arguments": {"memoryId": other["id"]}},
                    {"name": "what_changed", "arguments": {"since": "2000-01-01T00:00:00Z"}},
                ]
            },
            "Forgotten.",
        ]
    ) as model:
        tools = memory_tools(c, namespace="agents", entity="ada", infer=False)
        assert isinstance(tools, MemoryTools)
        messages = agent_loop(model.url, tools, "My favourite colour is teal. Actually, forget it.")

        assert messages[-1] == {"role": "assistant", "content": "Forgotten."}
        assert model.calls == 4
        assert sorted(t["function"]["name"] for t in model.requests[0]["tools"]) == sorted(TOOL_NAMES)
        # The model received every result.
        remembered = tool_results(model.requests[1])[0]
        assert remembered["stored"][0]["content"] == "Favourite colour is teal"
        memory_id = remembered["stored"][0]["id"]
        recalled, context = tool_results(model.requests[2])[1:]
        assert [m["id"] for m in recalled["memories"]] == [memory_id]
        assert "Favourite colour is teal" in context["context"] and context["tokens"] > 0
        forgot, foreign, changed = tool_results(model.requests[3])[3:]
        assert forgot == {"forgotten": {"id": memory_id, "content": "Favourite colour is teal"}}
        assert foreign == {"error": {"code": "not_found", "message": "no memory with that id"}}
        assert changed["summary"] == "0 new, 0 updated, 0 replaced"  # created and deleted in the window

    # The memory really changed, in the scope given; Eve's is untouched.
    events = c.events(namespace="agents", entity="ada")
    assert [(e["event"], e["oldContent"] or e["newContent"]) for e in events] == [
        ("DELETE", "Favourite colour is teal"),
        ("ADD", "Favourite colour is teal"),
    ]
    assert c.get(other["id"])["content"] == "Eve's secret"


def test_refusals_and_bad_arguments_reach_the_model_as_errors(server):
    key = server.client.keys.create(name="ro", permission="read", namespaces=["agents"])
    with Memd(server.url, key["secret"]) as reader:
        tools = memory_tools(reader, namespace="agents", entity="cy")
        refused = json.loads(tools.run({"name": "remember", "arguments": {"content": "x"}}))
        assert refused["error"]["code"] == "forbidden"
        assert json.loads(tools.run({"name": "recall", "arguments": "not json"}))["error"]["code"] == "invalid_arguments"
        assert json.loads(tools.run({"name": "recall", "arguments": {"query": " "}}))["error"]["code"] == "invalid_request"
        # The OpenAI SDK's objects (attributes, not keys) are taken too.
        call = SimpleNamespace(id="c1", type="function", function=SimpleNamespace(name="recall", arguments='{"query": "tea"}'))
        assert json.loads(tools.run(call)) == {"memories": []}
        assert tools.handles("recall") and not tools.handles("weather")
        # forget without a memory's id is the model's mistake, never another route's answer.
        for args in ({}, {"memoryId": ""}, {"memoryId": "  "}, {"memoryId": 42}):
            assert json.loads(tools.run({"name": "forget", "arguments": args}))["error"] == {
                "code": "invalid_arguments",
                "message": "memoryId: the id of a memory, from recall, is required",
            }
        for memory_id in ("..", ".", "not-an-id", "../keys"):
            got = json.loads(tools.run({"name": "forget", "arguments": {"memoryId": memory_id}}))
            assert got["error"] == {"code": "not_found", "message": "no memory with that id"}
        with pytest.raises(ValueError):
            tools.run({"name": "weather", "arguments": "{}"})


def test_async_tools_in_an_agent_loop(server):
    async def run() -> tuple[list[dict], list[dict]]:
        with start_fake_model(
            [
                {"tool_calls": [{"name": "remember", "arguments": {"content": "Allergic to peanuts"}}]},
                {"tool_calls": [{"name": "recall", "arguments": {"query": "peanuts", "limit": 3}}]},
                "Noted.",
            ]
        ) as model:
            async with server.async_client() as c, httpx.AsyncClient() as http:
                tools = memory_tools(c, namespace="agents", entity="dan", infer=False)
                assert isinstance(tools, AsyncMemoryTools)
                messages: list[dict] = [{"role": "user", "content": "I am allergic to peanuts."}]
                for _ in range(5):
                    res = await http.post(
                        f"{model.url}/chat/completions",
                        json={"model": "agent", "messages": messages, "tools": tools.definitions},
                    )
                    message = res.json()["choices"][0]["message"]
                    messages.append(message)
                    if not message.get("tool_calls"):
                        break
                    for call in message["tool_calls"]:
                        messages.append({"role": "tool", "tool_call_id": call["id"], "content": await tools.run(call)})
                return messages, list(model.requests)

    messages, requests = asyncio.run(run())
    assert messages[-1]["content"] == "Noted."
    recalled = tool_results(requests[2])[1]
    assert [m["content"] for m in recalled["memories"]] == ["Allergic to peanuts"]
    assert [m["content"] for m in server.client.list(namespace="agents", entity="dan")["memories"]] == ["Allergic to peanuts"]
