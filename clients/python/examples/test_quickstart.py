# clients/python/examples/test_quickstart.py
# An agent's own tests, each with a real throwaway memd: copy this file to start. With the package
# installed, pytest finds the fixtures memd_server and memd_client by itself.
import pytest

from memd import MemdError


def test_the_agent_remembers(memd_client):
    memd_client.store(namespace="demo", entity="user-1", content="Prefers green tea", infer=False)
    found = memd_client.search(namespace="demo", entity="user-1", query="tea")
    assert [m["content"] for m in found["results"]] == ["Prefers green tea"]


# The marker's options go to memd.testing.start_memd: here a fake model that answers the smart
# store (infer true) the way a real model would decide what to remember.
@pytest.mark.memd(model=[{"operations": [{"fact": "User is vegetarian", "decision": "ADD", "category": "diet"}]}])
def test_a_smart_store_asks_the_model(memd_server):
    stored = memd_server.client.store(namespace="demo", entity="user-1", content="I don't eat meat.")
    assert [m["content"] for m in stored["memories"]] == ["User is vegetarian"]
    assert len(memd_server.model_requests) == 1


def test_errors_say_what_went_wrong(memd_client):
    with pytest.raises(MemdError) as refused:
        memd_client.search(namespace="demo", query=" ")
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    assert refused.value.details[0]["field"] == "query"
