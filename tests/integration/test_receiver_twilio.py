"""A Twilio source over real loopback HTTP, on SQLite and PostgreSQL: Twilio signs the URL it called,
so behind a proxy the receiver checks ``[receiver] public_url`` + path + query; a status callback is
stored once per resource and status, its retry a duplicate; the handler gets the form's fields."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import Connection, Engine, select
from twilio.request_validator import RequestValidator

from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import make_settings

TOKEN = "twilio_auth_token_for_tests"
PUBLIC = "https://hooks.example.com"
CALLBACK = {
    "AccountSid": "AC0123456789abcdef0123456789abcdef",
    "MessageSid": "SM0123456789abcdef0123456789abcdef",
    "MessageStatus": "delivered",
    "To": "+15005550006",
    "From": "+15005550001",
}


def settings_for(db_url: str, public_url: str | None) -> Any:
    return make_settings(
        db_url,
        receiver={"public_url": public_url} if public_url else {},
        sources=[{"name": "sms", "kind": "twilio", "signing_secret_env": "T_TWILIO_TOKEN"}],
    )


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_TWILIO_TOKEN", TOKEN)


def post(local: str, fields: dict[str, str], signed_url: str) -> httpx.Response:
    """As Twilio posts: the form, signed over the URL Twilio called (its public one)."""
    return httpx.post(
        local,
        content=urlencode(fields).encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(signed_url, fields),
            "I-Twilio-Idempotency-Token": "idem-1",
        },
    )


def test_behind_a_proxy_the_public_url_is_what_twilio_signed(
    db_url: str, engine: Engine, serve: Any
) -> None:
    local = serve(create_app(settings_for(db_url, PUBLIC), engine)).url
    path = "/webhooks/sms?tenant=7"
    first = post(f"{local}{path}", CALLBACK, f"{PUBLIC}{path}")
    assert (first.status_code, first.content) == (200, b""), first.text  # a status callback
    again = post(f"{local}{path}", CALLBACK, f"{PUBLIC}{path}")
    assert (again.status_code, again.content) == (200, b"")  # its retry is answered alike
    # the next status of the same message is its own event
    later = post(f"{local}{path}", {**CALLBACK, "MessageStatus": "read"}, f"{PUBLIC}{path}")
    assert later.status_code == 200
    # signed for another query (another Twilio number's callback URL): refused
    assert post(f"{local}{path}", CALLBACK, f"{PUBLIC}/webhooks/sms?tenant=8").status_code == 401
    with engine.connect() as conn:
        events = conn.execute(
            select(INBOX_EVENTS.c.event_type, INBOX_EVENTS.c.object_id).order_by(INBOX_EVENTS.c.id)
        ).all()
        outcomes = conn.execute(select(DELIVERIES.c.outcome).order_by(DELIVERIES.c.id)).scalars()
        assert [str(o) for o in outcomes] == ["accepted", "duplicate", "accepted", "rejected"]
    assert [tuple(e) for e in events] == [  # (stored as SM…:delivered and SM…:read)
        ("message.delivered", CALLBACK["MessageSid"]),
        ("message.read", CALLBACK["MessageSid"]),
    ]

    seen: list[Any] = []

    def on_status(event: Event, conn: Connection) -> None:
        seen.append(event.payload)

    registry = HandlerRegistry()
    registry.register("sms", "*", on_status)
    worker = Worker(engine, settings_for(db_url, PUBLIC), registry)
    worker.drain()
    worker.close()
    assert seen[0] == CALLBACK  # the handler gets the form's fields, not bytes that fail json
    assert seen[1]["MessageStatus"] == "read"


def test_without_public_url_a_proxied_request_cannot_be_verified_and_says_why(
    db_url: str, engine: Engine, serve: Any
) -> None:
    local = serve(create_app(settings_for(db_url, None), engine)).url
    answer = post(f"{local}/webhooks/sms", CALLBACK, f"{PUBLIC}/webhooks/sms")
    assert answer.status_code == 401
    assert "public_url" in answer.json()["reason"]
    # the receiver's own URL, as a test client calls it directly, verifies without it
    direct = post(f"{local}/webhooks/sms", CALLBACK, f"{local}/webhooks/sms")
    assert direct.status_code == 200


INCOMING_SMS = {  # https://www.twilio.com/docs/messaging/guides/webhook-request
    "AccountSid": CALLBACK["AccountSid"],
    "MessageSid": "SM9876543210fedcba9876543210fedcba",
    "SmsSid": "SM9876543210fedcba9876543210fedcba",
    "SmsMessageSid": "SM9876543210fedcba9876543210fedcba",
    "SmsStatus": "received",
    "Body": "hello",
    "NumMedia": "0",
    "From": "+15005550001",
    "To": "+15005550006",
    "ApiVersion": "2010-04-01",
}
INCOMING_CALL = {  # https://www.twilio.com/docs/usage/webhooks/voice-webhooks
    "AccountSid": CALLBACK["AccountSid"],
    "CallSid": "CA0123456789abcdef0123456789abcdef",
    "CallStatus": "ringing",
    "Direction": "inbound",
    "From": "+15005550001",
    "To": "+15005550006",
    "ApiVersion": "2010-04-01",
}
CALL_STATUS = {  # the call's statusCallback: call-progress-events
    **INCOMING_CALL,
    "CallStatus": "completed",
    "CallDuration": "12",
    "CallbackSource": "call-progress-events",
    "SequenceNumber": "3",
    "Timestamp": "Sun, 06 Dec 2026 05:00:00 +0000",
}
RECORDING_STATUS = {
    "AccountSid": CALLBACK["AccountSid"],
    "CallSid": INCOMING_CALL["CallSid"],
    "RecordingSid": "RE0123456789abcdef0123456789abcdef",
    "RecordingStatus": "completed",
    "RecordingUrl": "https://api.twilio.com/2010-04-01/Accounts/AC/Recordings/RE",
}
TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response/>'


@pytest.mark.parametrize(
    ("fields", "content_type", "body"),
    [
        (INCOMING_SMS, "text/xml", TWIML),
        (INCOMING_CALL, "text/xml", TWIML),
        (CALL_STATUS, None, b""),
        (RECORDING_STATUS, None, b""),
    ],
    ids=["incoming message", "incoming call", "call status", "recording status"],
)
def test_an_incoming_message_or_call_gets_twiml_a_status_callback_an_empty_200(
    db_url: str,
    engine: Engine,
    serve: Any,
    fields: dict[str, str],
    content_type: str | None,
    body: bytes,
) -> None:
    """JSON to an incoming message or call is Twilio's error 12300; its retry is answered alike."""
    local = serve(create_app(settings_for(db_url, None), engine)).url
    url = f"{local}/webhooks/sms"
    answers = [post(url, fields, url) for _ in range(2)]
    for got in answers:
        assert (got.status_code, got.content) == (200, body), got.text
        if content_type is not None:
            assert got.headers["content-type"].split(";")[0] == content_type
    with engine.connect() as conn:
        outcomes = conn.execute(select(DELIVERIES.c.outcome).order_by(DELIVERIES.c.id)).scalars()
        assert [str(o) for o in outcomes] == ["accepted", "duplicate"]
        assert len(conn.execute(select(INBOX_EVENTS.c.id)).all()) == 1


def _json_post(local: str, document: dict[str, Any]) -> httpx.Response:
    """As Twilio posts a JSON body: its SHA-256 in the URL (bodySHA256), the URL alone signed."""
    body = json.dumps(document).encode()
    url = f"{local}/webhooks/sms?bodySHA256={hashlib.sha256(body).hexdigest()}"
    validator = RequestValidator(TOKEN)
    signature = validator.compute_signature(url, {})
    assert validator.validate(url, body.decode(), signature)  # as Twilio's own library checks it
    return httpx.post(
        url,
        content=body,
        headers={"Content-Type": "application/json", "X-Twilio-Signature": signature},
    )


def test_a_json_body_is_named_by_the_resource_sid_it_carries(
    db_url: str, engine: Engine, serve: Any
) -> None:
    local = serve(create_app(settings_for(db_url, None), engine)).url
    document = {"AccountSid": CALLBACK["AccountSid"], "CallSid": INCOMING_CALL["CallSid"]}
    first, second = _json_post(local, document), _json_post(local, document)
    assert (first.status_code, first.content) == (200, b""), first.text
    assert (second.status_code, second.content) == (200, b"")
    refused = _json_post(local, {"AccountSid": CALLBACK["AccountSid"], "Body": "no id"})
    assert refused.status_code == 400 and "MessageSid" in refused.json()["reason"]
    with engine.connect() as conn:
        ids = conn.execute(select(INBOX_EVENTS.c.event_id)).scalars().all()
        outcomes = conn.execute(select(DELIVERIES.c.outcome).order_by(DELIVERIES.c.id)).scalars()
        assert [str(o) for o in outcomes] == ["accepted", "duplicate", "rejected"]
    assert ids == [INCOMING_CALL["CallSid"]]
