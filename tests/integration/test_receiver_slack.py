"""A Slack source over real loopback HTTP, on SQLite and PostgreSQL: signed by Slack's own SDK →
accepted; Slack's retry → duplicate; another key, a stale time or a changed body → 401 and nothing
stored; the URL-verification handshake answered with its challenge, logged, never an event."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import Engine, select

from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import make_settings

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def slack(db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("T_SLACK_SECRET", SECRET)
    settings = make_settings(
        db_url,
        sources=[{"name": "team", "kind": "slack", "signing_secret_env": "T_SLACK_SECRET"}],
    )
    return f"{serve(create_app(settings, engine)).url}/webhooks/team"


def signed(
    document: dict[str, Any], secret: str = SECRET, at: float | None = None
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(document).encode()
    stamp = str(int(time.time() if at is None else at))
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return (
        {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
        },
        body,
    )


def rows(engine: Engine) -> tuple[list[tuple[str, str | None]], list[tuple[str, int, str | None]]]:
    with engine.connect() as conn:
        events = conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.event_type)).all()
        deliveries = conn.execute(
            select(DELIVERIES.c.outcome, DELIVERIES.c.status_code, DELIVERIES.c.reason).order_by(
                DELIVERIES.c.id
            )
        ).all()
    return [tuple(e) for e in events], [(str(o), c, r) for o, c, r in deliveries]


EVENT = {
    "token": "XXYYZZ",
    "team_id": "T123ABC456",
    "api_app_id": "A123ABC456",
    "event": {"type": "app_mention", "channel": "C123ABC456", "text": "<@U0LAN0Z89> hi"},
    "type": "event_callback",
    "event_id": "Ev123ABC456",
    "event_time": 1764547200,
}


def test_an_event_is_stored_once_and_slacks_retry_is_a_duplicate(
    slack: str, engine: Engine
) -> None:
    headers, body = signed(EVENT)
    first = httpx.post(slack, content=body, headers=headers)
    assert first.status_code == 200 and first.json() == {
        "status": "accepted",
        "event_id": "Ev123ABC456",
    }
    # Slack retries with the same event_id (and says so); signed afresh
    retry_headers, _ = signed(EVENT)
    retry = httpx.post(
        slack,
        content=body,
        headers={**retry_headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert retry.json()["status"] == "duplicate"
    events, deliveries = rows(engine)
    assert events == [("Ev123ABC456", "app_mention")]
    assert [d[0] for d in deliveries] == ["accepted", "duplicate"]
    with engine.connect() as conn:
        stored = conn.execute(select(INBOX_EVENTS.c.headers)).scalar_one()
    assert stored["x-slack-signature"] == "<masked>"  # a signature is never kept in clear
    assert stored["x-slack-request-timestamp"] == headers["X-Slack-Request-Timestamp"]


@pytest.mark.parametrize("how", ["other key", "stale", "changed body", "unsigned"])
def test_a_request_slack_did_not_sign_is_401_and_stores_nothing(
    slack: str, engine: Engine, how: str
) -> None:
    headers, body = signed(
        EVENT,
        secret="not-the-secret" if how == "other key" else SECRET,
        at=time.time() - 600 if how == "stale" else None,
    )
    if how == "changed body":
        body = body.replace(b"hi", b"hello")
    if how == "unsigned":
        headers.pop("X-Slack-Signature")
    answer = httpx.post(slack, content=body, headers=headers)
    assert answer.status_code == 401 and answer.json()["status"] == "rejected"
    events, deliveries = rows(engine)
    assert events == [] and [(d[0], d[1]) for d in deliveries] == [("rejected", 401)]


def test_the_url_verification_handshake_is_answered_logged_and_not_stored(
    slack: str, engine: Engine
) -> None:
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    headers, body = signed({"token": "x", "challenge": challenge, "type": "url_verification"})
    answer = httpx.post(slack, content=body, headers=headers)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"challenge": challenge}
    events, deliveries = rows(engine)
    assert events == [] and deliveries == [("handshake", 200, "url_verification")]
    # an unsigned one is not answered: the challenge proves the endpoint checks signatures
    forged = httpx.post(slack, content=body, headers={"Content-Type": "application/json"})
    assert forged.status_code == 401 and challenge not in forged.text


def test_a_slash_command_is_acknowledged_empty_and_its_handler_gets_the_fields(
    slack: str, engine: Engine, db_url: str
) -> None:
    from urllib.parse import urlencode

    from sqlalchemy import Connection

    from reconciler.inbox.handlers import Event, HandlerRegistry
    from reconciler.inbox.worker import Worker

    fields = {
        "command": "/deploy",
        "text": "api production",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "channel_id": "C2147483705",
    }
    body = urlencode(fields).encode()
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    answer = httpx.post(
        slack,
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
        },
    )
    assert answer.status_code == 200 and answer.content == b""  # nothing shown in the channel
    seen: list[Any] = []

    def on_command(event: Event, conn: Connection) -> None:
        seen.append((event.event_type, event.payload))

    registry = HandlerRegistry()
    registry.register("team", "*", on_command)
    settings = make_settings(
        db_url,
        sources=[{"name": "team", "kind": "slack", "signing_secret_env": "T_SLACK_SECRET"}],
    )
    worker = Worker(engine, settings, registry)
    worker.drain()
    worker.close()
    assert seen == [("slash_command./deploy", fields)]
