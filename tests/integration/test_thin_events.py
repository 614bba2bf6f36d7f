"""Thin notifications (Stripe's v2 events): over real loopback HTTP, on SQLite and PostgreSQL, a
signed thin event is stored as it came; before its handler runs, the worker fetches the object it
names from the provider's API (the sandbox) and hands it over as ``event.current``. The object gone
(404) is a permanent failure with a clear reason; the provider unreachable a transient one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, Engine, select

from connectors.providers.stripe.signature import stripe_sign
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import World
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.storage.models import INBOX_EVENTS
from tests.conftest import SECRETS, RunningServer, make_settings, start_server

INVOICE = {"id": "in_thin_1", "object": "invoice", "status": "paid", "amount_paid": 4200}


@pytest.fixture
def provider_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    monkeypatch.setenv("T_SBX_KEY", "sk_test_sandbox")
    box = Sandbox(World(now=datetime.now(UTC)))
    box.world.stripe_objects[("invoice", INVOICE["id"])] = dict(INVOICE)
    server = start_server(box.app)
    yield server
    server.stop()


def settings_for(db_url: str, base_url: str) -> Any:
    return make_settings(
        db_url,
        sources=[
            {
                "name": "stripe",
                "kind": "stripe",
                "signing_secret_env": "T_STRIPE_SECRET",
                "api_key_env": "T_SBX_KEY",
                "base_url": base_url,
            }
        ],
        worker={"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.02, "max_attempts": 3},
    )


def thin(event_id: str, object_id: str) -> dict[str, Any]:
    """A v2 thin event as Stripe sends it to an event destination: a reference, no snapshot."""
    return {
        "id": event_id,
        "object": "v2.core.event",
        "type": "v1.invoice.paid",
        "livemode": False,
        "created": "2026-12-05T10:00:00.000Z",
        "related_object": {
            "id": object_id,
            "type": "invoice",
            "url": f"/v1/invoices/{object_id}",
        },
    }


def deliver(receiver: str, document: dict[str, Any]) -> httpx.Response:
    body = json.dumps(document).encode()
    signature = stripe_sign(body, SECRETS["stripe"], int(time.time()))
    return httpx.post(
        f"{receiver}/webhooks/stripe",
        content=body,
        headers={"Content-Type": "application/json", "Stripe-Signature": signature},
    )


def run_worker(engine: Engine, settings: Any) -> list[tuple[Any, Any]]:
    seen: list[tuple[Any, Any]] = []

    def paid(event: Event, conn: Connection) -> None:
        seen.append((event.payload["object"], event.current))

    registry = HandlerRegistry()
    registry.register("stripe", "*", paid)
    worker = Worker(engine, settings, registry)
    try:
        for _ in range(5):  # retries are due within milliseconds
            worker.drain()
            time.sleep(0.05)
    finally:
        worker.close()
    return seen


def status(engine: Engine, event_id: str) -> tuple[str, str | None]:
    with engine.connect() as conn:
        row = conn.execute(
            select(INBOX_EVENTS.c.status, INBOX_EVENTS.c.last_error).where(
                INBOX_EVENTS.c.event_id == event_id
            )
        ).one()
    return str(row.status), row.last_error


def test_the_handler_gets_the_object_fetched_and_the_notification_as_it_came(
    db_url: str, engine: Engine, serve: Any, provider_api: RunningServer
) -> None:
    settings = settings_for(db_url, provider_api.url)
    receiver = serve(create_app(settings, engine)).url
    answer = deliver(receiver, thin("evt_test_thin_1", INVOICE["id"]))
    assert answer.json() == {"status": "accepted", "event_id": "evt_test_thin_1"}
    with engine.connect() as conn:
        row = conn.execute(select(INBOX_EVENTS.c.object_type, INBOX_EVENTS.c.object_id)).one()
    assert tuple(row) == ("invoice", "in_thin_1")  # from related_object
    seen = run_worker(engine, settings)
    assert seen == [("v2.core.event", INVOICE)]
    assert status(engine, "evt_test_thin_1")[0] == "processed"


def test_an_object_gone_at_the_provider_is_a_permanent_failure_saying_so(
    db_url: str, engine: Engine, serve: Any, provider_api: RunningServer
) -> None:
    settings = settings_for(db_url, provider_api.url)
    receiver = serve(create_app(settings, engine)).url
    deliver(receiver, thin("evt_test_thin_2", "in_does_not_exist"))
    assert run_worker(engine, settings) == []  # the handler never ran on a guess
    state, error = status(engine, "evt_test_thin_2")
    assert state == "dead" and error is not None
    assert "the notification's object is gone at the provider" in error and "404" in error


def test_the_provider_unreachable_is_retried_then_applied(
    db_url: str, engine: Engine, serve: Any, provider_api: RunningServer
) -> None:
    down = settings_for(db_url, "http://127.0.0.1:9")  # nothing listens there
    receiver = serve(create_app(down, engine)).url
    deliver(receiver, thin("evt_test_thin_3", INVOICE["id"]))
    registry = HandlerRegistry()
    registry.register("stripe", "*", lambda event, conn: None)
    worker = Worker(engine, down, registry)
    # one attempt: drain() would retry it (due again within 20 ms) up to dead on a slow machine
    assert worker.run_once() == 1
    worker.close()
    state, error = status(engine, "evt_test_thin_3")
    assert state == "failed" and "fetching the notification's object failed" in (error or "")
    # the provider back: the retry fetches it and the handler runs
    seen = run_worker(engine, settings_for(db_url, provider_api.url))
    assert seen == [("v2.core.event", INVOICE)]
