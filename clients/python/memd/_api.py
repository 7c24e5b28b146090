"""Every endpoint as a Request: the one place where paths, bodies and query strings are made."""

from __future__ import annotations

from typing import Any, Mapping

from ._common import Request, fields, query, seg, write

Fields = Mapping[str, Any]


def store(request: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    return write("POST", "/v1/memory", fields(request, kw), has_body=True, idempotency_key=idempotency_key)


def diff(request: Fields | None, kw: Fields) -> Request:
    return Request("POST", "/v1/memory/diff", body=fields(request, kw), has_body=True)


def events(request: Fields | None, kw: Fields) -> Request:
    return Request("GET", "/v1/memory/events", params=query(fields(request, kw)))


def search(request: Fields | None, kw: Fields) -> Request:
    return Request("POST", "/v1/memory/search", body=fields(request, kw), has_body=True)


def context(request: Fields | None, kw: Fields) -> Request:
    return Request("POST", "/v1/memory/context", body=fields(request, kw), has_body=True)


def list_(request: Fields | None, kw: Fields) -> Request:
    q = fields(request, kw)
    # `tags` as in the TypeScript client; the query string repeats `tag`.
    if "tags" in q:
        q["tag"] = q.pop("tags")
    return Request("GET", "/v1/memory", params=query(q))


def get(memory_id: str, as_of: str | None = None) -> Request:
    return Request("GET", f"/v1/memory/{seg(memory_id)}", params=query({"asOf": as_of}))


def update(memory_id: str, patch: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    body = fields(patch, kw, keep_none=True)
    return write("PATCH", f"/v1/memory/{seg(memory_id)}", body, has_body=True, idempotency_key=idempotency_key)


def revert(memory_id: str, request: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    path = f"/v1/memory/{seg(memory_id)}/revert"
    return write("POST", path, fields(request, kw), has_body=True, idempotency_key=idempotency_key)


def restore(request: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    return write("POST", "/v1/memory/restore", fields(request, kw), has_body=True, idempotency_key=idempotency_key)


def consolidate(request: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    return write("POST", "/v1/memory/consolidate", fields(request, kw), has_body=True, idempotency_key=idempotency_key)


def delete(memory_id: str, idempotency_key: str | None) -> Request:
    return write("DELETE", f"/v1/memory/{seg(memory_id)}", has_body=False, idempotency_key=idempotency_key)


def delete_entity(request: Fields | None, kw: Fields, idempotency_key: str | None) -> Request:
    params = query(fields(request, kw))
    return write("DELETE", "/v1/memory", has_body=False, idempotency_key=idempotency_key, params=params)


def erase(request: Fields | None, kw: Fields) -> Request:
    # Not repeatable with an Idempotency-Key: retried after a 429 only (refused before it ran).
    return Request("POST", "/v1/memory/erase", body=fields(request, kw), has_body=True, safe=False)


def erasures(request: Fields | None, kw: Fields) -> Request:
    return Request("GET", "/v1/memory/erasures", params=query(fields(request, kw)))


def me() -> Request:
    return Request("GET", "/v1/me")


def namespaces(request: Fields | None, kw: Fields) -> Request:
    return Request("GET", "/v1/namespaces", params=query(fields(request, kw)))


def entities(request: Fields | None, kw: Fields) -> Request:
    return Request("GET", "/v1/entities", params=query(fields(request, kw)))


def export(request: Fields | None, kw: Fields) -> Request:
    q = fields(request, kw)
    return Request("GET", "/v1/export", params=query({"namespace": q.get("namespaces")}))


def keys_create(request: Fields | None, kw: Fields) -> Request:
    return Request("POST", "/v1/keys", body=fields(request, kw), has_body=True, safe=False)


def keys_list() -> Request:
    return Request("GET", "/v1/keys")


def keys_get(key_id: str) -> Request:
    return Request("GET", f"/v1/keys/{seg(key_id)}")


def keys_revoke(key_id: str) -> Request:
    return Request("DELETE", f"/v1/keys/{seg(key_id)}", safe=False)


def webhooks_create(request: Fields | None, kw: Fields) -> Request:
    return Request("POST", "/v1/webhooks", body=fields(request, kw), has_body=True, safe=False)


def webhooks_list() -> Request:
    return Request("GET", "/v1/webhooks")


def webhooks_get(webhook_id: str) -> Request:
    return Request("GET", f"/v1/webhooks/{seg(webhook_id)}")


def webhooks_update(webhook_id: str, patch: Fields | None, kw: Fields) -> Request:
    return Request("PATCH", f"/v1/webhooks/{seg(webhook_id)}", body=fields(patch, kw, keep_none=True), has_body=True)


def webhooks_delete(webhook_id: str) -> Request:
    return Request("DELETE", f"/v1/webhooks/{seg(webhook_id)}", safe=False)


def webhooks_rotate_secret(webhook_id: str) -> Request:
    return Request("POST", f"/v1/webhooks/{seg(webhook_id)}/rotate-secret", safe=False)


def webhooks_deliveries(webhook_id: str, limit: int | None = None) -> Request:
    return Request("GET", f"/v1/webhooks/{seg(webhook_id)}/deliveries", params=query({"limit": limit}))


def webhooks_replay(webhook_id: str, from_seq: int) -> Request:
    return Request("POST", f"/v1/webhooks/{seg(webhook_id)}/replay", body={"fromSeq": from_seq}, has_body=True)
