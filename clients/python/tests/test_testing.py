"""The test kit itself: start_memd, the fake model, the pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from memd.testing import find_binary, start_fake_model, start_memd


def test_start_memd_runs_the_binary_on_a_temp_dir_and_removes_it():
    with start_memd(model=[{"operations": [{"fact": "User likes tea", "decision": "ADD", "category": "drink"}]}]) as s:
        data_dir = s.data_dir
        assert Path(data_dir, "data.mdb").exists()
        assert s.url.startswith("http://127.0.0.1:")
        stored = s.client.store(namespace="t", entity="u", content="I like tea")
        assert stored["memories"][0]["content"] == "User likes tea"
        assert len(s.model_requests) == 1 and s.model_requests[0]["model"] == "fake"
        assert '"msg":"memd started"' in s.logs()
        pid = s.proc.pid
    assert not Path(data_dir).exists()
    assert s.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_find_binary_honours_memd_bin(monkeypatch, tmp_path):
    built = find_binary()
    monkeypatch.setenv("MEMD_BIN", built)
    assert find_binary() == str(Path(built).resolve())
    monkeypatch.setenv("MEMD_BIN", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        find_binary()


def test_fake_model_scripts_content_tool_calls_and_errors():
    with start_fake_model([
        "plain text",
        {"tool_calls": [{"name": "recall", "arguments": {"query": "tea"}}]},
        {"status": 500},
    ]) as fake:
        def ask() -> httpx.Response:
            return httpx.post(f"{fake.url}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})

        first = ask().json()["choices"][0]
        assert (first["message"]["content"], first["finish_reason"]) == ("plain text", "stop")
        second = ask().json()["choices"][0]
        assert second["finish_reason"] == "tool_calls"
        call = second["message"]["tool_calls"][0]
        assert (call["type"], call["function"]["name"], call["function"]["arguments"]) == ("function", "recall", '{"query": "tea"}')
        assert ask().status_code == 500
        assert ask().json()["choices"][0]["message"]["content"] == '{"operations": []}'
        assert fake.calls == 4 and fake.requests[0]["messages"][0]["content"] == "hi"


def test_the_fixture_gives_a_server_per_test(memd_server, memd_client):
    assert memd_client is memd_server.client
    assert memd_client.list(namespace="fresh")["memories"] == []


@pytest.mark.memd(args=["--rate-limit", "100"], model=[{"operations": [{"fact": "User plays chess", "decision": "ADD"}]}])
def test_the_marker_passes_options_to_start_memd(memd_server):
    memd_server.client.store(namespace="m", entity="u", content="I play chess")
    assert [m["content"] for m in memd_server.client.list(namespace="m")["memories"]] == ["User plays chess"]
