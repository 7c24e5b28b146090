"""The asyncio client, ``AsyncMemd``: the same methods as ``Memd``, awaited."""

from __future__ import annotations

import json
import os
import asyncio
from typing import Any, AsyncIterator, Mapping

import httpx

from . import _api
from ._client import _settings, _transport_error, _transport_wait, fields_of
from ._common import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_WAIT,
    DEFAULT_STREAM_IDLE_TIMEOUT,
    DEFAULT_TIMEOUT,
    MemdError,
    Request,
    RetryPolicy,
    SseParser,
    StreamEvent,
    StreamState,
    error_of,
    keyed,
    parse_lines,
    permanent,
    retry_after,
    user_agent,
)
from .types import (
    ApiKey,
    AuditEvent,
    ContextRequest,
    ContextResponse,
    CreatedKey,
    CreatedWebhook,
    CreateKeyRequest,
    CreateWebhook,
    Delivery,
    DiffRequest,
    DiffResponse,
    EntitiesResponse,
    EraseRequest,
    Erasure,
    ListResponse,
    Memory,
    NamespacesResponse,
    PatchRequest,
    ConsolidateRequest,
    ConsolidateResponse,
    RestoreRequest,
    RestoreResponse,
    RevertRequest,
    RevertResponse,
    PatchWebhook,
    SearchRequest,
    SearchResponse,
    StoreRequest,
    StoreResponse,
    Webhook,
)

Fields = Mapping[str, Any]


class AsyncMemd:
    """An asyncio client of memd's HTTP API: the methods of ``Memd``, awaited; ``export()`` and
    ``stream()`` are async iterators. Every method raises ``MemdError`` on an error answer.

    Methods take the same names and arguments as the TypeScript client (``createClient``), in
    snake_case: a request either as a dict with the API's field names
    (``store({"namespace": "acme", "entity": "u1", "content": "..."})``), or as keyword arguments
    in snake_case (``store(namespace="acme", entity="u1", content="...")``), or both (keyword
    arguments win). Answers are the API's JSON as dicts, typed by the TypedDicts of ``memd.types``.

    - ``url``, ``key``: the server and an API key (default: ``MEMD_URL`` and ``MEMD_API_KEY``).
    - ``timeout``: seconds per request (default 60; a smart store waits for the model).
    - ``max_retries``: retries after 429 ``rate_limited`` and 503 (default 2), waiting the server's
      ``Retry-After`` (at most ``max_retry_wait`` seconds, else the error is raised at once), or
      0.5 s doubling. A 503 is retried only where repeating is safe: reads, and writes carrying an
      ``Idempotency-Key``.
    - ``idempotency_keys``: every store, update, delete and delete_entity carries an
      ``Idempotency-Key`` (the caller's ``idempotency_key=``, else a fresh one per call), so a
      retry writes once (default True; a raw store with a key stays on the server's fastest path).
      False sends one only when given: such writes are then retried after a 429 only.
    - ``headers``: extra headers on every request; ``http_client``: an ``httpx.AsyncClient`` of your own
      (proxies, transports); it is not closed by ``close()``.
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
        idempotency_keys: bool = True,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url, self.key = _settings(url, key)
        self._headers = {"user-agent": user_agent(), **(headers or {}), "authorization": f"Bearer {self.key}"}
        self._timeout = timeout
        self._policy = RetryPolicy(max_retries, max_retry_wait)
        self._auto_keys = idempotency_keys
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self.keys = _Keys(self)
        self.webhooks = _Webhooks(self)

    # -- plumbing --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the connections (not those of an ``http_client`` given to the constructor)."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemd:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, req: Request) -> Any:
        req = keyed(req, self._auto_keys)
        attempt = 0
        while True:
            try:
                res = await self._http.request(
                    req.method,
                    self.url + req.path,
                    params=req.params,
                    content=req.content(),
                    headers=self._request_headers(req),
                    timeout=self._timeout,
                )
            except httpx.TransportError as e:
                wait = _transport_wait(self._policy, attempt, e, req.safe)
                if wait is None:
                    raise _transport_error(e, self.url) from e
            else:
                if res.is_success:
                    return res.json() if res.content else None
                wait = self._policy.wait(attempt, res.status_code, res.headers, req.safe)
                if wait is None:
                    raise error_of(res.status_code, res.text, res.headers)
            await asyncio.sleep(wait)
            attempt += 1

    def _request_headers(self, req: Request) -> dict[str, str]:
        h = {**self._headers, **req.headers}
        if req.has_body:
            h["content-type"] = "application/json"
        return h

    # -- the API ---------------------------------------------------------------------------

    async def store(
        self, request: StoreRequest | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> StoreResponse:
        """Stores a memory: ``infer=False`` verbatim, otherwise (the default) extracted by the server's model.

        Fields: ``namespace``, ``entity``, ``content``, ``infer``, ``tags``, ``metadata``, ``source``,
        ``ttl``, ``category``, ``importance``, ``key`` (a keyed fact: updates the memory holding the
        key in place; ``unchanged: 1`` when it already held exactly this).
        """
        return await self._call(_api.store(request, fields, idempotency_key))

    async def diff(self, request: DiffRequest | None = None, /, **fields: Any) -> DiffResponse:
        """What changed since a time, folded per memory: ``namespace``, ``entity``, ``since``, ``limit``."""
        return await self._call(_api.diff(request, fields))

    async def events(self, request: Fields | None = None, /, **fields: Any) -> list[AuditEvent]:
        """Audit events, newest first: ``namespace``, ``entity``, ``memory_id`` (``memoryId``), ``limit``."""
        return await self._call(_api.events(request, fields))

    async def search(self, request: SearchRequest | None = None, /, **fields: Any) -> SearchResponse:
        """Ranked search over current memories: ``namespace``, ``query``, ``entity``,
        ``entity_prefix`` (``entityPrefix``: only entities whose name starts with it), ``limit``,
        ``mode`` (keyword, semantic, hybrid), ``category``, ``tags``; ``as_of`` (``asOf``, ISO 8601:
        the memories current at that instant; keyword only, with ``entity``), ``observed_after``,
        ``observed_before``."""
        return await self._call(_api.search(request, fields))

    async def context(self, request: ContextRequest | None = None, /, **fields: Any) -> ContextResponse:
        """The text block an agent puts in its prompt before it answers: ``namespace``, ``entity``,
        ``query``, ``max_tokens`` (``maxTokens``), ``categories``, ``as_of`` (``asOf``),
        ``observed_after``, ``observed_before``. Answers ``context``, ``memories``, ``tokens``,
        ``truncated``."""
        return await self._call(_api.context(request, fields))

    async def list(self, request: Fields | None = None, /, **fields: Any) -> ListResponse:
        """Current memories of a namespace or entity, newest first, a page at a time:
        ``namespace``, ``entity``, ``entity_prefix`` (``entityPrefix``), ``category``, ``tags`` (all
        must match), ``limit``, ``cursor``
        (the previous page's ``nextCursor``), ``as_of`` (``asOf``, ISO 8601: the memories current at
        that instant, replayed from the audit trail), ``observed_after``, ``observed_before``."""
        return await self._call(_api.list_(request, fields))

    async def get(self, memory_id: str, *, as_of: str | None = None) -> Memory:
        """One current memory, or with ``as_of`` (ISO 8601) the memory as it was current at that instant,
        replayed from the audit trail; ``MemdError`` 404 when unknown, gone (then) or outside the key's
        namespaces, 400 when ``as_of`` is in the future."""
        return await self._call(_api.get(memory_id, as_of))

    async def get_by_key(self, namespace: str, entity: str, key: str, *, as_of: str | None = None) -> Memory | None:
        """The current memory holding a keyed fact's ``key`` (with ``as_of``: as it was then), or ``None``."""
        page = await self._call(_api.list_(None, {"namespace": namespace, "entity": entity, "key": key, "asOf": as_of}))
        return page["memories"][0] if page["memories"] else None

    async def update(
        self,
        memory_id: str,
        patch: PatchRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Memory:
        """Corrects a memory in place (event UPDATE): ``content``, ``category``, ``importance``,
        ``tags``, ``metadata``; ``None`` (JSON null) removes the tags or the metadata."""
        return await self._call(_api.update(memory_id, patch, fields, idempotency_key))

    async def revert(
        self,
        memory_id: str,
        request: RevertRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> RevertResponse:
        """Reverts a memory to its state right after one of its events: ``to_event`` (``toEvent``, an
        event id as ``events`` gives it), ``dry_run`` (``dryRun``: what would change, nothing written).
        ``MemdError`` 410 ``erased`` when an erasure took the content, 409 ``conflict`` when another
        memory holds its key."""
        return await self._call(_api.revert(memory_id, request, fields, idempotency_key))

    async def restore(
        self, request: RestoreRequest | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> RestoreResponse:
        """Restores every memory of an entity to what it was at ``as_of`` (``asOf``), in one write:
        ``namespace``, ``entity``, ``as_of``, ``dry_run``. The answer lists each memory and what was
        done to it."""
        return await self._call(_api.restore(request, fields, idempotency_key))

    async def consolidate(
        self, request: ConsolidateRequest | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> ConsolidateResponse:
        """Merges an entity's near-duplicate memories, losing nothing: ``namespace``, ``entity``,
        ``dry_run`` (``dryRun``). Answers ``groups``, ``memoriesMerged``, ``tookMs``, ``events``."""
        return await self._call(_api.consolidate(request, fields, idempotency_key))

    async def delete(self, memory_id: str, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Deletes one memory (event DELETE): ``{"deleted": True}``."""
        return await self._call(_api.delete(memory_id, idempotency_key))

    async def delete_entity(
        self, request: Fields | None = None, /, *, idempotency_key: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Deletes every current memory of an entity (``namespace``, ``entity``): ``{"deleted": n}``."""
        return await self._call(_api.delete_entity(request, fields, idempotency_key))

    #: The TypeScript client's name for :meth:`delete_entity`.
    deleteEntity = delete_entity

    async def erase(self, request: EraseRequest | None = None, /, **fields: Any) -> Erasure:
        """Erases every memory of an entity and their content in the audit trail (admin)."""
        return await self._call(_api.erase(request, fields))

    async def erasures(self, request: Fields | None = None, /, **fields: Any) -> list[Erasure]:
        """The erasures of a namespace or entity, oldest first (admin)."""
        return await self._call(_api.erasures(request, fields))

    async def me(self) -> ApiKey:
        """The calling key (never its secret)."""
        return await self._call(_api.me())

    async def namespaces(self, request: Fields | None = None, /, **fields: Any) -> NamespacesResponse:
        """Namespaces the key covers that hold data, in name order: ``limit``, ``cursor``."""
        return await self._call(_api.namespaces(request, fields))

    async def entities(self, request: Fields | None = None, /, **fields: Any) -> EntitiesResponse:
        """Entities of a namespace with their memory counts: ``namespace``, ``prefix`` (only names
        starting with it), ``limit``, ``cursor``."""
        return await self._call(_api.entities(request, fields))

    async def export(self, request: Fields | None = None, /, **fields: Any) -> AsyncIterator[dict[str, Any]]:
        """An export as JSON Lines, parsed a line at a time (admin): the header, then every memory,
        event and erasure of the ``namespaces`` given (all, for a key covering ``*``). The request
        is sent on the first ``anext()``."""
        req = _api.export(request, fields)
        try:
            async with self._http.stream(
                "GET", self.url + req.path, params=req.params, headers=self._request_headers(req), timeout=self._timeout
            ) as res:
                if not res.is_success:
                    raise error_of(res.status_code, (await res.aread()).decode("utf-8", "replace"), res.headers)
                rest = b""
                async for chunk in res.aiter_bytes():
                    lines, rest = parse_lines(rest + chunk)
                    for line in lines:
                        yield line
                if rest.strip():
                    yield json.loads(rest)
        except httpx.TransportError as e:
            raise _transport_error(e, self.url) from e

    def stream(
        self,
        request: Fields | None = None,
        /,
        *,
        retry: float = 0.5,
        idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT,
        **fields: Any,
    ) -> AsyncEventStream:
        """The live change stream, oldest first: a replay from ``after``/``since``, then every new
        event, as ``StreamEvent(cursor, event)``. Fields: ``namespace``, ``entity``, ``after`` (a
        cursor), ``since`` (ISO 8601); with neither, only new events.

        A dropped connection, a server restart, a stream silent for ``idle_timeout`` seconds, or an
        ``overflow`` (this reader fell too far behind) is resumed by itself from the last cursor
        (sent as ``Last-Event-ID``), so nothing is lost or repeated. It waits ``retry`` seconds
        before reconnecting, doubling up to 10 s while failing, and at least the server's
        ``Retry-After``. Errors a retry cannot fix (400, 401, 403, 404) are raised. End it with
        ``break`` and ``aclose()``, or use it with ``async with``.
        """
        f = fields_of(request, fields)
        state = StreamState(f["namespace"], f.get("entity"), f.get("after"), f.get("since"), retry)
        return AsyncEventStream(self, state, idle_timeout)

    async def _stream_events(self, state: StreamState, idle_timeout: float) -> AsyncIterator[StreamEvent]:
        timeout = httpx.Timeout(self._timeout, read=idle_timeout)
        while True:
            asked: float | None = None
            try:
                async with self._http.stream(
                    "GET",
                    self.url + "/v1/memory/events/stream",
                    params=state.params,
                    headers={**self._headers, **state.headers()},
                    timeout=timeout,
                ) as res:
                    if res.status_code != 200:
                        text = (await res.aread()).decode("utf-8", "replace")
                        if permanent(res.status_code):
                            raise error_of(res.status_code, text, res.headers)
                        asked = retry_after(res.headers)
                    else:
                        parser = SseParser()
                        async for chunk in res.aiter_bytes():
                            for event in state.take(parser.feed(chunk)):
                                yield event
            except httpx.TransportError:
                pass  # a dropped or silent connection: resume below
            await asyncio.sleep(state.next_wait(asked))


class AsyncEventStream:
    """The async iterator ``AsyncMemd.stream()`` returns: ``async for cursor, event in stream``;
    ``await aclose()`` (or ``async with``) ends it and its connection.

    ``cursor`` is the last cursor seen: keep it to resume later with ``after=``.
    """

    def __init__(self, client: AsyncMemd, state: StreamState, idle_timeout: float) -> None:
        self._state = state
        self._events = client._stream_events(state, idle_timeout)

    @property
    def cursor(self) -> str | None:
        return self._state.cursor

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Ends the stream and its connection."""
        await self._events.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Keys:
    """API keys (admin): ``memd.keys.create/list/get/revoke``."""

    def __init__(self, client: AsyncMemd) -> None:
        self._c = client

    async def create(self, request: CreateKeyRequest | None = None, /, **fields: Any) -> CreatedKey:
        """Creates a key: ``name``, ``permission`` (read, read_write, admin), ``namespaces``,
        ``expires_at`` (``expiresAt``). The secret is in this answer only."""
        return await self._c._call(_api.keys_create(request, fields))

    async def list(self) -> list[ApiKey]:
        return await self._c._call(_api.keys_list())

    async def get(self, key_id: str) -> ApiKey:
        return await self._c._call(_api.keys_get(key_id))

    async def revoke(self, key_id: str) -> dict[str, Any]:
        """Revokes a key: ``{"id": ..., "revoked": True}``."""
        return await self._c._call(_api.keys_revoke(key_id))


class _Webhooks:
    """Webhook subscriptions (docs/webhooks.md): ``memd.webhooks.create/list/get/update/delete/
    rotate_secret/deliveries/replay``. Check deliveries with ``memd.webhooks.verify_webhook``."""

    def __init__(self, client: AsyncMemd) -> None:
        self._c = client

    async def create(self, request: CreateWebhook | None = None, /, **fields: Any) -> CreatedWebhook:
        """Subscribes ``url`` to ``namespaces`` (a pattern or a list), optionally ``events`` (kinds)
        and ``description``. The signing secret is in this answer only."""
        return await self._c._call(_api.webhooks_create(request, fields))

    async def list(self) -> list[Webhook]:
        return await self._c._call(_api.webhooks_list())

    async def get(self, webhook_id: str) -> Webhook:
        return await self._c._call(_api.webhooks_get(webhook_id))

    async def update(self, webhook_id: str, patch: PatchWebhook | None = None, /, **fields: Any) -> Webhook:
        """Changes ``url``, ``namespaces``, ``events``, ``description``; ``state="paused"`` or ``"active"``."""
        return await self._c._call(_api.webhooks_update(webhook_id, patch, fields))

    async def delete(self, webhook_id: str) -> dict[str, Any]:
        return await self._c._call(_api.webhooks_delete(webhook_id))

    async def rotate_secret(self, webhook_id: str) -> CreatedWebhook:
        """A new secret, in this answer only; the old one keeps signing for 24 hours."""
        return await self._c._call(_api.webhooks_rotate_secret(webhook_id))

    async def deliveries(self, webhook_id: str, *, limit: int | None = None) -> list[Delivery]:
        """Recent delivery attempts, newest first."""
        return await self._c._call(_api.webhooks_deliveries(webhook_id, limit))

    async def replay(self, webhook_id: str, from_seq: int) -> Webhook:
        """Sends every matching event from ``from_seq`` on again, with the same webhook-ids."""
        return await self._c._call(_api.webhooks_replay(webhook_id, from_seq))
