# clients/python/examples/test_agent_tools.py
# Memory as tools in an agent loop of plain HTTP calls to an OpenAI-compatible chat API. Here the
# model is the test kit's fake one, scripted to call the tools; in production it is your model
# (the OpenAI SDK's client.chat.completions.create takes the same tools and messages).
import httpx

from memd.testing import start_fake_model
from memd.tools import memory_tools


def agent(model_url, tools, prompt):
    messages = [{"role": "user", "content": prompt}]
    while True:
        answer = httpx.post(
            f"{model_url}/chat/completions",
            json={"model": "any", "messages": messages, "tools": tools.definitions},
        ).json()["choices"][0]["message"]
        messages.append(answer)
        if not answer.get("tool_calls"):
            return answer["content"]
        for call in answer["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": tools.run(call)})


def test_the_agent_keeps_what_it_learns(memd_client):
    script = [
        {"tool_calls": [{"name": "remember", "arguments": {"content": "Works night shifts"}}]},
        {"tool_calls": [{"name": "recall", "arguments": {"query": "shifts"}}]},
        "Noted: you work night shifts.",
    ]
    with start_fake_model(script) as model:
        tools = memory_tools(memd_client, namespace="demo", entity="user-7", infer=False)
        reply = agent(model.url, tools, "I work night shifts, remember that.")

        assert reply == "Noted: you work night shifts."
        # The model got each result as a tool message: here, what recall found.
        recalled = model.requests[2]["messages"][-1]
        assert recalled["role"] == "tool" and "Works night shifts" in recalled["content"]
    memories = memd_client.list(namespace="demo", entity="user-7")["memories"]
    assert [m["content"] for m in memories] == ["Works night shifts"]
