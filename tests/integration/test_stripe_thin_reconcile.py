"""Stripe v2 thin events reconciled (``payload_style = "thin"``): listed at ``/v2/core/events`` through
the sandbox over loopback HTTP (which the ``stripe`` package's own v2 client pages too), a dropped
thin event found missing, and a business row judged by the object's current state, read from the
API, since a thin event carries none."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import stripe as stripe_sdk
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Engine, MetaData, String, Table, insert, select

from connectors.base import ScanOptions
from connectors.providers.stripe.sandbox_v2 import thin_of
from connectors.providers.stripe.signature import stripe_sign
from connectors.providers.stripe.thin import thin_record
from connectors.sandbox.app import Sandbox
from connectors.sandbox.sender import DeliveryFaults, Webhook, plan, send
from connectors.sandbox.world import World, build_world
from reconciler.config import parse_settings
from reconciler.inbox.receiver import create_app
from reconciler.reconcile.run import Reconciler
from reconciler.sources import build_connector
from reconciler.storage.models import DISCREPANCIES
from tests.conftest import SECRETS, RunningServer, start_server

NOW = datetime.now(UTC).replace(microsecond=0)
KEY = "sk_test_sandbox"


def _world(n: int = 60, seed: int = 3) -> World:
    return build_world(
        seed,
        now=NOW - timedelta(minutes=20),
        stripe_events=n,
        github_deliveries=0,
        shopify_orders=0,
    )


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Sandbox, RunningServer]]:
    monkeypatch.setenv("T_SBX_KEY", KEY)
    sandbox = Sandbox(_world())
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def _source(url: str, db_url: str = "sqlite://", **extra: Any) -> Any:
    entry = {
        "name": "stripe",
        "kind": "stripe",
        "base_url": url,
        "api_key_env": "T_SBX_KEY",
        "signing_secret_env": "T_STRIPE_SECRET",
        "payload_style": "thin",
        "initial_lookback_hours": 48,
        **extra,
    }
    return parse_settings({"database": {"url": db_url}, "sources": [entry]}, "<test>")


def test_thin_events_page_to_the_end_as_stripes_own_v2_client_pages_them(
    box: tuple[Sandbox, RunningServer],
) -> None:
    sandbox, server = box
    expected = {thin_of(e)["id"] for e in sandbox.world.stripe_events}
    connector = build_connector(_source(server.url, page_size=7).sources[0])
    try:
        records, cursor, pages = [], None, 0
        for page in connector.pages(
            None, ScanOptions(now=NOW, initial_lookback=timedelta(hours=48))
        ):
            records.extend(page.records)
            cursor, pages = page.cursor, pages + 1
        assert {r.event_id for r in records} == expected
        assert pages == -(-len(expected) // 7)
        one = records[0]
        assert one.object_type == one.payload["related_object"]["type"]
        assert connector.fetch_event(one.event_id or "").event_id == one.event_id
        assert connector.fetch_object(one.object_type or "", one.object_id or "")["id"]
        assert datetime.fromisoformat(cursor["since"].replace("Z", "+00:00")) == max(
            r.occurred_at for r in records if r.occurred_at
        )
    finally:
        connector.close()
    client = stripe_sdk.StripeClient(KEY, base_addresses={"api": server.url})
    since = (NOW - timedelta(hours=48)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    theirs = client.v2.core.events.list({"created": {"gte": since}, "limit": 9})
    assert {e.id for e in theirs.auto_paging_iter()} == expected


def test_a_dropped_thin_event_is_missing_and_a_row_is_judged_by_the_current_object(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T_SBX_KEY", KEY)
    world = _world(80, seed=12)
    sandbox = start_server(Sandbox(world).app)
    table = Table(
        "thin_invoices",
        MetaData(),
        Column("invoice_id", String(64), primary_key=True),
        Column("status", String(32)),
    )
    try:
        settings = _source(
            sandbox.url,
            db_url,
            page_size=20,
            checks=[
                {
                    "object_type": "invoice",
                    "table": "thin_invoices",
                    "key": "invoice_id",
                    "fields": {"status": "status"},
                }
            ],
        )
        receiver = serve(create_app(settings, engine))
        hooks = []
        for event in world.stripe_events:
            body = json.dumps(thin_of(event)).encode()
            headers = {
                "Content-Type": "application/json",
                "Stripe-Signature": stripe_sign(body, SECRETS["stripe"], int(time.time())),
            }
            hooks.append(Webhook(thin_of(event)["id"], headers, body))
        ordered, report = plan(hooks, DeliveryFaults(drop=0.1), seed=5)
        with httpx.Client() as client:
            send(client, f"{receiver.url}/webhooks/stripe", ordered, report)
        assert report.dropped
        # the business table holds every invoice at the state Stripe shows now, but one
        invoices = sorted(
            (obj for (kind, _), obj in world.stripe_objects.items() if kind == "invoice"),
            key=lambda o: o["id"],
        )
        wrong = invoices[0]["id"]
        table.create(engine)
        with engine.begin() as conn:
            conn.execute(
                insert(table),
                [
                    {
                        "invoice_id": o["id"],
                        "status": "uncollectible" if o["id"] == wrong else o["status"],
                    }
                    for o in invoices
                ],
            )
        Reconciler(engine, settings).run("stripe")
        with engine.connect() as conn:
            rows = conn.execute(select(DISCREPANCIES)).all()
    finally:
        sandbox.stop()
        table.drop(engine, checkfirst=True)
    assert {r.event_id for r in rows if r.kind == "missing"} == set(report.dropped)
    diverged = [r for r in rows if r.kind == "diverged"]
    # judged by the object's current state (the thin event has none): only the edited row
    assert [(r.object_id, r.field) for r in diverged] == [(wrong, "status")]
    now_status = world.stripe_objects[("invoice", wrong)]["status"]
    assert diverged[0].source_value.strip('"') == now_status
    assert not [r for r in rows if r.kind not in ("missing", "diverged")]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(related=_json, created=_json, kind=_json)
@settings(max_examples=200)
def test_a_listed_thin_event_of_any_shape_is_a_record_with_what_it_holds(
    related: Any, created: Any, kind: Any
) -> None:
    """Hostile list items (the connector checks the id first): a record whose object, type and
    time are None where the item does not hold them as Stripe documents them, never an error."""
    record = thin_record(
        {"id": "evt_1", "related_object": related, "created": created, "type": kind}
    )
    assert record.event_id == "evt_1"
    assert record.object_type is None or isinstance(record.object_type, str)
    assert record.object_id is None or isinstance(record.object_id, str)
    assert record.occurred_at is None or record.occurred_at.tzinfo is not None
