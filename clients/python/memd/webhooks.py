"""Verifying a memd webhook delivery the Standard Webhooks way, without a dependency.

    from memd.webhooks import verify_webhook, WebhookVerificationError

    event = verify_webhook(secret, request.headers, request.body.decode())

The official ``standardwebhooks`` package (``Webhook(secret).verify(body, headers)``) does the
same check: HMAC-SHA256 of ``"<webhook-id>.<webhook-timestamp>.<body>"`` keyed with the secret's
bytes (the base64 after ``whsec_``), compared with each ``v1,`` signature of the header, and the
timestamp within ``tolerance`` seconds of now.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Mapping

__all__ = ["verify_webhook", "WebhookVerificationError"]


class WebhookVerificationError(Exception):
    """A delivery that does not verify: missing headers, a timestamp too far off, or no matching signature."""


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name:
            return v[0] if isinstance(v, (list, tuple)) else str(v)
    return None


def verify_webhook(
    secret: str,
    headers: Mapping[str, Any],
    body: str | bytes,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> dict[str, Any]:
    """Checks a delivery (its headers, and its body exactly as received) against the subscription's
    secret (``whsec_...``); returns the parsed body, or raises ``WebhookVerificationError``."""
    text = body.decode() if isinstance(body, bytes) else body
    msg_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not msg_id or not timestamp or not signatures:
        raise WebhookVerificationError("missing webhook-id, -timestamp or -signature")
    try:
        ts = int(timestamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a whole number") from None
    if abs((time.time() if now is None else now) - ts) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is too far from now")
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.{text}".encode(), hashlib.sha256).digest()
    expected = base64.b64encode(mac).decode()
    for sig in signatures.split(" "):
        if sig.startswith("v1,") and hmac.compare_digest(sig[3:], expected):
            return json.loads(text)
    raise WebhookVerificationError("no signature matches")
