"""Webhooks from Python: the client's calls against the real built memd, and verify_webhook on a
signature the official standardwebhooks library made and on a real delivery."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from memd import MemdError
from memd.testing import start_memd
from memd.webhooks import WebhookVerificationError, verify_webhook

# Made with the official npm package: new Webhook(SECRET).sign("msg_1_wh_test", new Date(1_700_000_000_000), BODY)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = '{"type":"memory.add","data":{"seq":1}}'
OFFICIAL = "v1,j3cUE00Yi7sNyjPLuzRn7Ouu05JuvYNDzNNoHsrfX/Q="
HEADERS = {"webhook-id": "msg_1_wh_test", "webhook-timestamp": "1700000000", "webhook-signature": OFFICIAL}


def test_verify_webhook_matches_the_official_library():
    assert verify_webhook(SECRET, HEADERS, BODY, now=1_700_000_010) == {"type": "memory.add", "data": {"seq": 1}}
    assert verify_webhook(SECRET, {k.title(): v for k, v in HEADERS.items()}, BODY.encode(), now=1_700_000_000)
    two = {**HEADERS, "webhook-signature": f"v1,AAAA {OFFICIAL}"}
    assert verify_webhook(SECRET, two, BODY, now=1_700_000_000)["data"]["seq"] == 1
    for headers, body, now in [
        (HEADERS, BODY.replace("add", "delete"), 1_700_000_000),
        ({**HEADERS, "webhook-id": "msg_2_wh_test"}, BODY, 1_700_000_000),
        (HEADERS, BODY, 1_700_000_000 + 301),
        ({"webhook-id": "msg_1_wh_test"}, BODY, 1_700_000_000),
    ]:
        with pytest.raises(WebhookVerificationError):
            verify_webhook(SECRET, headers, body, now=now)


class _Receiver(http.server.BaseHTTPRequestHandler):
    got: list[tuple[dict, str]] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"])).decode()
        _Receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_subscribe_receive_verify_manage():
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with start_memd(args=["--webhook-allow-private", "--webhook-retry-base-ms", "20"]) as s:
            c = s.client
            made = c.webhooks.create(url=f"http://127.0.0.1:{receiver.server_port}/", namespaces="py")
            assert made["secret"].startswith("whsec_")
            assert made["id"] in [w["id"] for w in c.webhooks.list()]
            assert c.webhooks.update(made["id"], description="from python")["description"] == "from python"
            c.store(namespace="py", entity="e", content="hello from python", infer=False)
            deadline = time.time() + 15
            while not _Receiver.got and time.time() < deadline:
                time.sleep(0.02)
            headers, body = _Receiver.got[0]
            event = verify_webhook(made["secret"], headers, body)
            assert event["type"] == "memory.add"
            assert event["data"]["newContent"] == "hello from python"
            assert json.loads(body) == event
            # The attempt is logged with the cursor's move, just after the receiver's answer.
            log = c.webhooks.deliveries(made["id"], limit=5)
            while not log and time.time() < deadline:
                time.sleep(0.02)
                log = c.webhooks.deliveries(made["id"], limit=5)
            assert log[0]["ok"] is True and log[0]["seq"] == event["data"]["seq"]
            assert c.webhooks.replay(made["id"], event["data"]["seq"])["cursor"] == event["data"]["seq"] - 1
            rotated = c.webhooks.rotate_secret(made["id"])
            assert rotated["secret"] != made["secret"]
            assert c.webhooks.delete(made["id"]) == {"id": made["id"], "deleted": True}
            with pytest.raises(MemdError) as e:
                c.webhooks.get(made["id"])
            assert e.value.status == 404
    finally:
        receiver.shutdown()


def test_async_client_manages_webhooks():
    import asyncio

    from memd import AsyncMemd

    with start_memd(args=["--webhook-allow-private"]) as s:

        async def run():
            async with AsyncMemd(s.url, s.key) as c:
                made = await c.webhooks.create({"url": "http://127.0.0.1:9/hook", "namespaces": ["a", "b/*"]})
                assert made["namespaces"] == ["a", "b/*"]
                paused = await c.webhooks.update(made["id"], state="paused")
                assert paused["state"] == "paused"
                assert [w["id"] for w in await c.webhooks.list()] == [made["id"]]
                assert (await c.webhooks.get(made["id"]))["state"] == "paused"
                assert await c.webhooks.deliveries(made["id"]) == []
                assert (await c.webhooks.rotate_secret(made["id"]))["secret"] != made["secret"]
                assert (await c.webhooks.replay(made["id"], 1))["cursor"] == 0
                assert await c.webhooks.delete(made["id"]) == {"id": made["id"], "deleted": True}

        asyncio.run(run())
