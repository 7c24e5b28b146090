"""What the sync and the async client share: requests as data, errors, retries, SSE parsing."""

from __future__ import annotations

import email.utils
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, NamedTuple
from urllib.parse import quote

from .types import AuditEvent, ErrorDetail

#: Default timeout of a request, in seconds (a smart store waits for the model).
DEFAULT_TIMEOUT = 60.0
#: Default number of retries after a 429 or 503 (so at most 3 attempts).
DEFAULT_MAX_RETRIES = 2
#: A Retry-After longer than this many seconds is not waited for: the error is raised.
DEFAULT_MAX_RETRY_WAIT = 30.0
#: A live stream with no byte for this long (the server sends a keepalive every 15 s) is resumed.
DEFAULT_STREAM_IDLE_TIMEOUT = 45.0


class MemdError(Exception):
    """An error answer of memd (``{"error": {code, message, details?}}``), or no answer at all.

    ``status`` is the HTTP status, 0 when no answer arrived (``code`` is then ``network_error``
    or ``timeout``); ``code`` is memd's error code (``invalid_request``, ``forbidden``,
    ``not_found``, ``rate_limited``, ...); ``details`` lists the field problems of a 400 as
    ``{"field": ..., "message": ...}``.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[ErrorDetail] | None = None,
        *,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details: list[ErrorDetail] = list(details or [])
        #: The answer's ``x-request-id``: the same id is in the server's log line of the request.
        self.request_id = request_id
        #: The answer's ``Retry-After``, in seconds (429, 503).
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" [{self.status}]" if self.status else ""
        return f"{self.code}{where}: {self.message}"

    def __repr__(self) -> str:
        return f"MemdError(status={self.status!r}, code={self.code!r}, message={self.message!r}, details={self.details!r})"


class StreamEvent(NamedTuple):
    """One message of the live change stream: ``for cursor, event in memd.stream(...)``."""

    #: Resume from here: pass as ``after``, or it is sent as Last-Event-ID on reconnection.
    cursor: str
    #: The audit record, exactly as ``events()`` gives it.
    event: AuditEvent


@dataclass
class Request:
    """One API call as data, so the sync and async clients send the same thing."""

    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    has_body: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    #: May a 503 (or a connection cut after sending) be retried? Reads, and writes carrying an
    #: Idempotency-Key, whose repeat the server answers without writing again.
    safe: bool = True
    #: Does the endpoint take an Idempotency-Key (store, update, delete, delete entity)?
    idempotent: bool = False

    def content(self) -> bytes | None:
        return json.dumps(self.body, ensure_ascii=False).encode() if self.has_body else None


def camel(name: str) -> str:
    """``memory_id`` -> ``memoryId``: keyword arguments are snake_case, the API's fields camelCase."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def fields(request: Mapping[str, Any] | None, kwargs: Mapping[str, Any], *, keep_none: bool = False) -> dict[str, Any]:
    """A request body or query from a dict (API names) and/or keyword arguments (snake_case).

    ``None`` means "not given" and is left out, except where ``keep_none`` (an update, where
    ``None`` is sent as JSON null: remove the tags or the metadata).
    """
    out: dict[str, Any] = dict(request or {})
    for k, v in kwargs.items():
        out[camel(k)] = v
    return out if keep_none else {k: v for k, v in out.items() if v is not None}


def query(q: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query parameters; a list repeats its parameter (``tag=a&tag=b``); booleans as true/false."""
    out: list[tuple[str, str]] = []
    for k, v in q.items():
        if v is None:
            continue
        for item in v if isinstance(v, (list, tuple)) else [v]:
            out.append((k, "true" if item is True else "false" if item is False else str(item)))
    return out


def seg(value: str) -> str:
    """A path segment (an id), escaped."""
    return quote(str(value), safe="")


def new_idempotency_key() -> str:
    return f"memd-py-{uuid.uuid4().hex}"


def write(
    method: str,
    path: str,
    body: Any = None,
    *,
    has_body: bool,
    idempotency_key: str | None,
    params: list[tuple[str, str]] | None = None,
) -> Request:
    """A write that the server makes safe to repeat with an Idempotency-Key. The client sends the
    caller's key, or a fresh one per call (unless the client was made with ``idempotency_keys=False``),
    so a retry after a 503 or a cut connection writes once. A write without a key is retried after
    a 429 only (refused before it ran)."""
    headers = {} if idempotency_key is None else {"idempotency-key": idempotency_key}
    return Request(
        method, path, params=params or [], body=body, has_body=has_body, headers=headers, safe=False, idempotent=True
    )


def keyed(req: Request, auto: bool) -> Request:
    """The request as sent: a write that takes an Idempotency-Key gets a fresh one when the caller
    gave none and ``auto`` is on; such a write is then safe to retry."""
    if req.idempotent:
        if "idempotency-key" not in req.headers and auto:
            req.headers["idempotency-key"] = new_idempotency_key()
        req.safe = "idempotency-key" in req.headers
    return req


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds: a number of seconds or an HTTP date."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_of(status: int, text: str, headers: Mapping[str, str]) -> MemdError:
    """The MemdError of an error answer; a body that is not memd's error shape becomes ``http_<status>``."""
    request_id = headers.get("x-request-id")
    wait = retry_after(headers)
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    e = body.get("error") if isinstance(body, dict) else None
    if isinstance(e, dict) and isinstance(e.get("code"), str):
        details = e.get("details") if isinstance(e.get("details"), list) else []
        return MemdError(
            status, e["code"], str(e.get("message") or e["code"]), details, request_id=request_id, retry_after=wait
        )
    return MemdError(status, f"http_{status}", text[:200] or f"HTTP {status}", request_id=request_id, retry_after=wait)


class RetryPolicy:
    """Bounded retries of 429 (always: the request was refused before it ran) and of 503 (only
    for safe requests), waiting the server's Retry-After, else 0.5 s doubling."""

    def __init__(self, max_retries: int, max_wait: float) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait

    def wait(self, attempt: int, status: int, headers: Mapping[str, str], safe: bool) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None: do not retry."""
        if attempt >= self.max_retries:
            return None
        if status != 429 and not (status == 503 and safe):
            return None
        asked = retry_after(headers)
        wait = asked if asked is not None else 0.5 * (2**attempt)
        return None if wait > self.max_wait else wait

    def wait_transport(self, attempt: int, connect: bool, safe: bool) -> float | None:
        """A transport failure: a refused connection never reached the server; anything else did maybe."""
        if attempt >= self.max_retries or not (connect or safe):
            return None
        return 0.5 * (2**attempt)


def permanent(status: int) -> bool:
    """A stream answer that a reconnection cannot fix (400, 401, 403, 404, ...)."""
    return 400 <= status < 500 and status not in (408, 429)


@dataclass
class SseMessage:
    id: str | None = None
    event: str | None = None
    data: str | None = None


class SseParser:
    """Server-Sent Events: fields per line, a blank line ends a message, comments skipped."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> Iterator[SseMessage]:
        self.buf += chunk.replace(b"\r\n", b"\n")
        while True:
            end = self.buf.find(b"\n\n")
            if end == -1:
                return
            block, self.buf = self.buf[:end].decode("utf-8", "replace"), self.buf[end + 2 :]
            m = SseMessage()
            for line in block.split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    m.id = value
                elif name == "event":
                    m.event = value
                elif name == "data":
                    m.data = value if m.data is None else f"{m.data}\n{value}"
            if m.id is not None or m.event is not None or m.data is not None:
                yield m


class StreamState:
    """Where a stream is: the last cursor, and how long to wait before reconnecting."""

    def __init__(self, namespace: str, entity: str | None, after: str | None, since: str | None, retry: float):
        # The URL stays the caller's; where to resume goes in Last-Event-ID, which the server prefers.
        self.params = query({"namespace": namespace, "entity": entity, "after": after, "since": since})
        self.cursor = after
        self.first_retry = retry
        self.retry = retry

    def headers(self) -> dict[str, str]:
        h = {"accept": "text/event-stream"}
        if self.cursor is not None:
            h["last-event-id"] = self.cursor
        return h

    def take(self, messages: Iterable[SseMessage]) -> Iterator[StreamEvent]:
        for m in messages:
            # The first message (and overflow) carry a cursor without an event: keep it all the same.
            if m.id is not None:
                self.cursor = m.id
            if m.event == "memory" and m.data is not None and m.id is not None:
                self.retry = self.first_retry
                yield StreamEvent(m.id, json.loads(m.data))
            elif m.event == "overflow" and m.data is not None:
                # This reader fell behind: resume at once from the cursor given.
                self.cursor = json.loads(m.data)["cursor"]
                self.retry = 0.0

    def next_wait(self, asked: float | None) -> float:
        wait = max(self.retry, asked or 0.0)
        self.retry = min(10.0, max(self.first_retry, self.retry * 2))
        return wait


def parse_lines(buf: bytes) -> tuple[list[Any], bytes]:
    """Complete JSON Lines of ``buf``, parsed, and the incomplete rest."""
    *lines, rest = buf.split(b"\n")
    return [json.loads(line) for line in lines if line.strip()], rest


def user_agent() -> str:
    from . import __version__

    return f"memd-python/{__version__}"
