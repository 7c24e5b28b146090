"""A real, throwaway memd for your own tests, and a scripted fake model.

    from memd.testing import start_memd

    with start_memd() as server:          # the built binary, a temp data dir, a free port, a root key
        server.client.store(namespace="app", entity="u1", content="likes tea", infer=False)

The binary is ``bin=``, else ``$MEMD_BIN``, else ``dist/memd`` of the memd checkout this package
sits in, else ``memd`` on ``PATH``. ``model=`` starts a fake OpenAI-compatible chat-completions
server that answers memd's smart stores from a script (see ``FakeModel``). For pytest, the
fixture ``memd_server`` of ``memd.pytest_plugin`` does the same around each test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from ._async import AsyncMemd
from ._client import Memd

#: One scripted answer of the fake model:
#:
#: - a dict with ``operations`` (what memd's smart store should apply), sent as the message content;
#: - a str: the message content as is (e.g. not JSON, to test bad output);
#: - ``{"content": "..."}``: a plain assistant message;
#: - ``{"tool_calls": [{"name": ..., "arguments": {...}}], "content": optional}``: the model calls
#:   tools (``finish_reason`` ``tool_calls``; ids ``call_1``, ``call_2``, ... unless given);
#: - ``{"status": 500, "body": optional}``: an HTTP error answer;
#: - a function of the request (the parsed JSON body) returning one of the above.
ScriptedAnswer = Union[str, Mapping[str, Any], Callable[[dict], Any]]

_EMPTY = {"operations": []}


class FakeModel:
    """A tiny OpenAI-compatible ``POST /v1/chat/completions`` server (non-streaming) on 127.0.0.1
    and a free port, answering from a script. ``url`` ends in ``/v1`` (what an OpenAI client and
    memd's ``MEMD_LLM_BASE_URL`` take); ``requests`` holds the parsed bodies it received."""

    def __init__(self, script: Sequence[ScriptedAnswer] | Callable[[dict], Any] | None = None) -> None:
        self.requests: list[dict] = []
        self._queue: list[ScriptedAnswer] = []
        self._fn: Callable[[dict], Any] | None = None
        self._fallback: ScriptedAnswer = _EMPTY
        self._lock = threading.Lock()
        self._calls = 0
        if callable(script):
            self._fn = script
        elif script is not None:
            self._queue.extend(script)
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found"}})
                try:
                    request = json.loads(raw)
                except ValueError:
                    return self._send(400, {"error": {"message": "body is not JSON"}})
                status, body = model._answer(request)
                self._send(status, body)

            def _send(self, status: int, body: Any) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="memd-fake-model", daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        """Number of chat-completions requests received."""
        return self._calls

    def script(self, answers: Iterable[ScriptedAnswer]) -> None:
        """Queues answers; each request takes the next one."""
        with self._lock:
            self._queue.extend(answers)

    def reply(self, answer: ScriptedAnswer) -> None:
        """The answer when the queue is empty (default: ``{"operations": []}``, nothing to store)."""
        self._fallback = answer

    def _answer(self, request: dict) -> tuple[int, Any]:
        with self._lock:
            self._calls += 1
            self.requests.append(request)
            n = self._calls
            if self._fn is not None:
                answer: Any = self._fn(request)
            else:
                answer = self._queue.pop(0) if self._queue else self._fallback
        while callable(answer):
            answer = answer(request)
        if request.get("stream"):
            return 400, {"error": {"message": "the fake model does not stream"}}
        if isinstance(answer, Mapping) and "status" in answer:
            return int(answer["status"]), answer.get("body") or {
                "error": {"message": f"fake error {answer['status']}", "type": "server_error"}
            }
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if isinstance(answer, str):
            message["content"] = answer
        elif isinstance(answer, Mapping) and "tool_calls" in answer:
            message["content"] = answer.get("content")
            message["tool_calls"] = [
                {
                    "id": call.get("id") or f"call_{n}_{i + 1}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call.get("arguments"), str)
                        else json.dumps(call.get("arguments") or {}),
                    },
                }
                for i, call in enumerate(answer["tool_calls"])
            ]
            finish = "tool_calls"
        elif isinstance(answer, Mapping) and "content" in answer and "operations" not in answer:
            message["content"] = answer["content"]
        else:
            message["content"] = json.dumps(answer)
        prompt = sum(len(json.dumps(m.get("content"))) for m in request.get("messages", []))
        usage = {"prompt_tokens": max(1, prompt // 4), "completion_tokens": 1}
        usage["total_tokens"] = usage["prompt_tokens"] + 1
        return 200, {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }

    def stop(self) -> None:
        """Stops the server."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_fake_model(script: Sequence[ScriptedAnswer] | Callable[[dict], Any] | None = None) -> FakeModel:
    """Starts a ``FakeModel`` answering from ``script`` (a list, or a function of the request)."""
    return FakeModel(script)


def find_binary(bin: str | os.PathLike[str] | None = None) -> str:
    """The memd binary: ``bin``, ``$MEMD_BIN``, the checkout's ``dist/memd``, or ``memd`` on PATH."""
    for candidate in (bin, os.environ.get("MEMD_BIN")):
        if candidate:
            path = Path(candidate)
            if not path.is_file():
                raise FileNotFoundError(f"memd binary {path} does not exist")
            return str(path.resolve())
    # This file is <repo>/clients/python/memd/testing.py in a checkout of memd.
    built = Path(__file__).resolve().parents[3] / "dist" / "memd"
    if built.is_file():
        return str(built)
    found = shutil.which("memd")
    if found:
        return found
    raise FileNotFoundError("no memd binary: pass bin=..., set MEMD_BIN, or run make build in the memd checkout")


_STARTED = re.compile(r'"msg":"memd started".*"address":"(http://[^"]+)"')


class MemdServer:
    """A running throwaway memd: ``url``, ``key`` (the root key), ``client`` (a ``Memd`` with that
    key), ``data_dir`` (removed by ``stop()``), ``model`` (the ``FakeModel``, if any)."""

    def __init__(self, proc: subprocess.Popen, url: str, key: str, data_dir: str, model: FakeModel | None, out: list[str]):
        self.proc = proc
        self.url = url
        self.key = key
        self.data_dir = data_dir
        self.model = model
        self._out = out
        self.client = Memd(url, key)
        self._stopped = False

    @property
    def model_requests(self) -> list[dict]:
        """The chat-completions requests memd sent the fake model (empty without ``model``)."""
        return self.model.requests if self.model else []

    def async_client(self, **options: Any) -> AsyncMemd:
        """A new ``AsyncMemd`` with the root key (close it with ``await client.aclose()``)."""
        return AsyncMemd(self.url, self.key, **options)

    def logs(self) -> str:
        """The server's output so far (JSON log lines)."""
        return "".join(self._out)

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL after 10 s) and the fake model; removes the data dir."""
        if self._stopped:
            return
        self._stopped = True
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.model:
            self.model.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> MemdServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_memd(
    *,
    bin: str | os.PathLike[str] | None = None,
    model: Sequence[ScriptedAnswer] | Callable[[dict], Any] | FakeModel | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    start_timeout: float = 60.0,
) -> MemdServer:
    """Starts memd on 127.0.0.1, a free port, a temp data dir and a fresh root key.

    - ``bin``: the binary (see ``find_binary``).
    - ``model``: a script for a fake model that answers smart stores (``infer`` true), in order or
      as a function of the request; when it runs out it answers ``{"operations": []}``. A
      ``FakeModel`` of your own works too. Without it memd uses its built-in extractor.
    - ``args``: extra ``serve`` flags, e.g. ``["--rate-limit", "5"]``; ``env``: extra environment.

    Nothing of the caller's environment reaches the server but ``PATH`` and ``TMPDIR`` (so a
    ``MEMD_*`` setting of your shell cannot change the test).
    """
    binary = find_binary(bin)
    data_dir = tempfile.mkdtemp(prefix="memd-testkit-")
    key = f"memd_testkit_{uuid.uuid4().hex}"
    fake = model if isinstance(model, FakeModel) else start_fake_model(model) if model is not None else None
    server_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MEMD_API_KEY": key, "MEMD_LOG_LEVEL": "info"}
    if os.environ.get("TMPDIR"):
        server_env["TMPDIR"] = os.environ["TMPDIR"]
    if fake:
        server_env.update({"MEMD_LLM_BASE_URL": fake.url, "MEMD_LLM_MODEL": "fake", "MEMD_LLM_API_KEY": "fake"})
    server_env.update(env or {})
    proc = subprocess.Popen(
        [binary, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", data_dir, *args],
        cwd=data_dir,
        env=server_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out: list[str] = []
    started = threading.Event()
    found: list[str] = []

    def drain() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            out.append(line)
            m = _STARTED.search(line)
            if m and not found:
                found.append(m.group(1))
                started.set()
        started.set()

    threading.Thread(target=drain, name="memd-testkit-output", daemon=True).start()
    started.wait(start_timeout)
    if not found:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if fake and not isinstance(model, FakeModel):
            fake.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        raise RuntimeError(f"memd did not start within {start_timeout} s:\n{''.join(out)[-2000:]}")
    return MemdServer(proc, found[0], key, data_dir, fake, out)
