"""A Twilio source over real loopback HTTP, on SQLite and PostgreSQL: Twilio signs the URL it called,
so behind a proxy the receiver checks ``[receiver] public_url`` + path + query; a status callback is
stored once per resource and status, its retry a duplicate; the handler gets the form's fields."""

from __future__ import annotations

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
    assert first.status_code == 200, first.text
    assert first.json() == {
        "status": "accepted",
        "event_id": "SM0123456789abcdef0123456789abcdef:delivered",
    }
    assert post(f"{local}{path}", CALLBACK, f"{PUBLIC}{path}").json()["status"] == "duplicate"
    # the next status of the same message is its own event
    later = post(f"{local}{path}", {**CALLBACK, "MessageStatus": "read"}, f"{PUBLIC}{path}")
    assert later.json()["status"] == "accepted"
    # signed for another query (another Twilio number's callback URL): refused
    assert post(f"{local}{path}", CALLBACK, f"{PUBLIC}/webhooks/sms?tenant=8").status_code == 401
    with engine.connect() as conn:
        events = conn.execute(
            select(INBOX_EVENTS.c.event_type, INBOX_EVENTS.c.object_id).order_by(INBOX_EVENTS.c.id)
        ).all()
        outcomes = conn.execute(select(DELIVERIES.c.outcome).order_by(DELIVERIES.c.id)).scalars()
        assert [str(o) for o in outcomes] == ["accepted", "duplicate", "accepted", "rejected"]
    assert [tuple(e) for e in events] == [
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
