"""Memory as tools an agent calls itself, in OpenAI's function-calling format.

    from memd import Memd
    from memd.tools import memory_tools

    tools = memory_tools(Memd(url, key), namespace="acme", entity="user-1")
    response = openai.chat.completions.create(model=..., messages=messages, tools=tools.definitions)
    for call in response.choices[0].message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": tools.run(call)})

The tools are ``remember``, ``recall``, ``forget``, ``what_changed`` and ``get_context``, scoped to
the namespace and entity given: the model never names (or reaches) another one. ``run`` answers
the tool message's content, JSON text; memd's refusals (a read-only key's ``remember``, bad
arguments) come back as ``{"error": {"code": ..., "message": ...}}`` for the model to read. A name
that is not one of these tools raises ``ValueError`` (check ``handles(name)`` when the agent has
other tools). The same definitions are in the TypeScript client (``memoryTools``).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Mapping, overload

from ._async import AsyncMemd
from ._client import Memd
from ._common import MemdError


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


#: The tools in OpenAI's format, for a chat-completions request's ``tools``.
TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Save something worth remembering about the user for later conversations: a fact, a preference, a plan. One short statement per call.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": _string("What to remember, in one or two sentences", minLength=1),
                    "category": _string("Optional kind of memory, e.g. preference, fact, plan"),
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional labels"},
                },
                "required": ["content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "recall",
            "description": "Search what is remembered about the user. Returns the best matching memories first, each with its id, content, category and date.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": _string("What to look for, in words", minLength=1),
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 50,
                        "description": "How many memories at most (default 5)",
                    },
                    "category": _string("Only memories of this category"),
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "forget",
            "description": "Delete one memory that is wrong or that the user asked to forget, by the id that recall gave.",
            "parameters": {
                "type": "object",
                "properties": {"memoryId": _string("The memory's id, from recall")},
                "required": ["memoryId"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "what_changed",
            "description": "What was learned, corrected or forgotten about the user since a time: new, updated, replaced and deleted memories.",
            "parameters": {
                "type": "object",
                "properties": {
                    "since": _string("ISO 8601 time, e.g. 2026-01-31T12:00:00Z; absent: from the beginning"),
                },
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_context",
            "description": "Everything relevant that is remembered about the user, as text ready to read: call it before answering a question that may depend on the user's history.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": _string("What the conversation is about now (optional)"),
                    "maxTokens": {
                        "type": "integer",
                        "minimum": 50,
                        "maximum": 20000,
                        "description": "Budget in tokens (default 1000)",
                    },
                },
                "additionalProperties": False,
            },
        },
    },
]

TOOL_NAMES = tuple(t["function"]["name"] for t in TOOL_DEFINITIONS)


def _pick(args: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: args[k] for k in keys if args.get(k) is not None}


def _failure(e: MemdError) -> dict[str, Any]:
    return {"error": {"code": e.code, "message": e.message}}


def _call_parts(call: Any) -> tuple[str, Any]:
    """Name and arguments of a tool call: an OpenAI ``tool_calls`` item (a dict, or the OpenAI
    SDK's object), or ``{"name": ..., "arguments": ...}``."""
    fn = call.get("function", call) if isinstance(call, Mapping) else getattr(call, "function", call)
    if isinstance(fn, Mapping):
        return str(fn.get("name")), fn.get("arguments")
    return str(getattr(fn, "name")), getattr(fn, "arguments", None)


def _arguments(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return dict(raw) if isinstance(raw, Mapping) else None


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


def _memory_id(args: Mapping[str, Any]) -> str:
    """forget's memoryId: a blank one is the model's mistake; memd's ids are UUIDs, so anything
    else names no memory (and never reaches another route)."""
    raw = args.get("memoryId")
    memory_id = raw.strip() if isinstance(raw, str) else ""
    if not memory_id:
        raise MemdError(400, "invalid_arguments", "memoryId: the id of a memory, from recall, is required")
    if not _UUID.match(memory_id):
        raise MemdError(404, "not_found", "no memory with that id")
    return memory_id


_BAD_ARGUMENTS = {"error": {"code": "invalid_arguments", "message": "arguments are not a JSON object"}}


class _Scope:
    def __init__(self, namespace: str, entity: str, infer: bool | None) -> None:
        self.namespace = namespace
        self.entity = entity
        self.infer = infer
        #: The tools in OpenAI's format (a copy: change it freely).
        self.definitions: list[dict[str, Any]] = copy.deepcopy(TOOL_DEFINITIONS)

    def handles(self, name: str) -> bool:
        """Whether ``name`` is one of these tools (an agent may have others)."""
        return name in TOOL_NAMES

    def _request(self, name: str, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The client method and request of a tool call."""
        ns = {"namespace": self.namespace, "entity": self.entity}
        if name == "remember":
            req = {**ns, "content": str(args.get("content") or ""), **_pick(args, "tags")}
            if self.infer is not None:
                req["infer"] = self.infer
            if self.infer is False:
                # A category is the model's only for a raw store; a smart store's model picks its own.
                req.update(_pick(args, "category"))
            return "store", req
        if name == "recall":
            limit = args.get("limit") if isinstance(args.get("limit"), int) else 5
            return "search", {**ns, "query": str(args.get("query") or ""), "limit": limit, **_pick(args, "category")}
        if name == "what_changed":
            return "diff", {**ns, **_pick(args, "since")}
        if name == "get_context":
            return "context", {**ns, **_pick(args, "query", "maxTokens")}
        raise ValueError(f"memd tools: no tool named {name}")

    @staticmethod
    def _result(name: str, res: Any) -> dict[str, Any]:
        if name == "remember":
            stored = [{k: m.get(k) for k in ("id", "content", "category", "event")} for m in res["memories"]]
            return {"stored": stored, "skipped": res["skipped"]}
        if name == "recall":
            keys = ("id", "content", "category", "score", "createdAt")
            return {"memories": [{k: m.get(k) for k in keys} for m in res["results"]]}
        if name == "what_changed":
            keys = ("summary", "created", "updated", "replaced", "deleted", "hasMore", "nextSince")
            return {k: res[k] for k in keys}
        return {k: res[k] for k in ("context", "tokens", "truncated")}

    def _foreign(self, memory: Mapping[str, Any]) -> bool:
        return memory.get("namespace") != self.namespace or memory.get("entity") != self.entity


class MemoryTools(_Scope):
    """The memory tools of a ``Memd`` client, for one namespace and entity (see ``memory_tools``)."""

    def __init__(self, client: Memd, namespace: str, entity: str, infer: bool | None = None) -> None:
        super().__init__(namespace, entity, infer)
        self.client = client

    def execute(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Runs tool ``name`` with parsed arguments; answers the result as a dict."""
        if not self.handles(name):
            raise ValueError(f"memd tools: no tool named {name}")
        try:
            if name == "forget":
                memory_id = _memory_id(arguments)
                # Only this entity's memories: another's id is as unknown as one that never was.
                memory = self.client.get(memory_id)
                if self._foreign(memory):
                    raise MemdError(404, "not_found", "no memory with that id")
                self.client.delete(memory_id)
                return {"forgotten": {"id": memory_id, "content": memory["content"]}}
            method, request = self._request(name, arguments)
            return self._result(name, getattr(self.client, method)(request))
        except MemdError as e:
            return _failure(e)

    def run(self, call: Any) -> str:
        """Runs a tool call and answers the ``tool`` message's content (JSON text)."""
        name, raw = _call_parts(call)
        if not self.handles(name):
            raise ValueError(f"memd tools: no tool named {name}")
        args = _arguments(raw)
        return json.dumps(_BAD_ARGUMENTS if args is None else self.execute(name, args), ensure_ascii=False)


class AsyncMemoryTools(_Scope):
    """The memory tools of an ``AsyncMemd`` client: ``await tools.run(call)``."""

    def __init__(self, client: AsyncMemd, namespace: str, entity: str, infer: bool | None = None) -> None:
        super().__init__(namespace, entity, infer)
        self.client = client

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Runs tool ``name`` with parsed arguments; answers the result as a dict."""
        if not self.handles(name):
            raise ValueError(f"memd tools: no tool named {name}")
        try:
            if name == "forget":
                memory_id = _memory_id(arguments)
                memory = await self.client.get(memory_id)
                if self._foreign(memory):
                    raise MemdError(404, "not_found", "no memory with that id")
                await self.client.delete(memory_id)
                return {"forgotten": {"id": memory_id, "content": memory["content"]}}
            method, request = self._request(name, arguments)
            return self._result(name, await getattr(self.client, method)(request))
        except MemdError as e:
            return _failure(e)

    async def run(self, call: Any) -> str:
        """Runs a tool call and answers the ``tool`` message's content (JSON text)."""
        name, raw = _call_parts(call)
        if not self.handles(name):
            raise ValueError(f"memd tools: no tool named {name}")
        args = _arguments(raw)
        return json.dumps(_BAD_ARGUMENTS if args is None else await self.execute(name, args), ensure_ascii=False)


@overload
def memory_tools(client: Memd, *, namespace: str, entity: str, infer: bool | None = None) -> MemoryTools: ...
@overload
def memory_tools(client: AsyncMemd, *, namespace: str, entity: str, infer: bool | None = None) -> AsyncMemoryTools: ...
def memory_tools(
    client: Memd | AsyncMemd, *, namespace: str, entity: str, infer: bool | None = None
) -> MemoryTools | AsyncMemoryTools:
    """Memory tools scoped to ``namespace`` and ``entity``: a ``MemoryTools`` for a ``Memd``, an
    ``AsyncMemoryTools`` for an ``AsyncMemd``. ``infer=False`` makes ``remember`` store verbatim;
    by default it stores smartly (the server's model extracts and reconciles facts)."""
    if isinstance(client, AsyncMemd):
        return AsyncMemoryTools(client, namespace, entity, infer)
    return MemoryTools(client, namespace, entity, infer)
