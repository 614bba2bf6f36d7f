"""A Discord source over real loopback HTTP, on SQLite and PostgreSQL: the PING answered 204 and not
stored; an event signed with PyNaCl accepted, sent again (a new signature, the same event) a
duplicate; another key's signature 401 and nothing stored. No signing secret is configured: the
public key is a configuration value."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from nacl.signing import SigningKey
from sqlalchemy import Engine, select

from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import make_settings

SEED = bytes([7]) * 32
PUBLIC = SigningKey(SEED).verify_key.encode().hex()


@pytest.fixture
def discord(db_url: str, engine: Engine, serve: Any) -> str:
    settings = make_settings(
        db_url, sources=[{"name": "bot", "kind": "discord", "public_key": PUBLIC}]
    )
    return f"{serve(create_app(settings, engine)).url}/webhooks/bot"


def post(url: str, document: dict[str, Any], seed: bytes = SEED) -> httpx.Response:
    body = json.dumps(document).encode()
    stamp = str(int(time.time()))
    signature = SigningKey(seed).sign(stamp.encode() + body).signature.hex()
    headers = {
        "Content-Type": "application/json",
        "X-Signature-Ed25519": signature,
        "X-Signature-Timestamp": stamp,
    }
    return httpx.post(url, content=body, headers=headers)


def rows(engine: Engine) -> tuple[list[str], list[tuple[str, int]]]:
    with engine.connect() as conn:
        events = conn.execute(select(INBOX_EVENTS.c.event_type)).scalars().all()
        deliveries = conn.execute(
            select(DELIVERIES.c.outcome, DELIVERIES.c.status_code).order_by(DELIVERIES.c.id)
        ).all()
    return [str(e) for e in events], [(str(o), c) for o, c in deliveries]


EVENT = {
    "version": 1,
    "application_id": "1234560123453231555",
    "type": 1,
    "event": {
        "type": "APPLICATION_AUTHORIZED",
        "timestamp": "2026-12-05T10:00:00.000000",
        "data": {
            "integration_type": 0,
            "user": {"id": "53908232506183680"},
            "scopes": ["applications.commands"],
        },
    },
}


def test_ping_event_resend_and_forgery(discord: str, engine: Engine) -> None:
    ping = post(discord, {"version": 1, "application_id": "1234560123453231555", "type": 0})
    assert ping.status_code == 204 and ping.content == b""
    first = post(discord, EVENT)
    assert first.status_code == 200 and first.json()["status"] == "accepted"
    assert post(discord, EVENT).json()["status"] == "duplicate"  # signed afresh, same event
    forged = post(discord, EVENT, seed=bytes([8]) * 32)
    assert forged.status_code == 401
    events, deliveries = rows(engine)
    assert events == ["APPLICATION_AUTHORIZED"]
    assert deliveries == [
        ("handshake", 204),
        ("accepted", 200),
        ("duplicate", 200),
        ("rejected", 401),
    ]
