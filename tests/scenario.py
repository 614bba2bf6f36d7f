"""The reconciliation scenario shared by the integration and end-to-end tests: the sandbox world of
150 Stripe events delivered with faults to a real receiver, business tables with planted problems,
and what a careful person would list (``Scenario.expected``). The ``scenario`` fixture is registered
in tests/conftest.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    insert,
    select,
    update,
)

from connectors.providers.stripe.signature import parse_stripe
from connectors.sandbox.app import Sandbox
from connectors.sandbox.sender import DeliveryFaults, plan, send, stripe_webhooks
from connectors.sandbox.world import World, build_world
from reconciler.config import Settings, parse_settings
from reconciler.inbox.handlers import Event, HandlerRegistry, upsert_if_newer
from reconciler.inbox.receiver import create_app
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.reconcile.run import Reconciler
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS
from tests.conftest import RunningServer, start_server

SECRET = "whsec_test_secret"


STEP = {"invoice.created": 0, "invoice.finalized": 1, "invoice.paid": 2, "invoice.voided": 2}


biz = MetaData()


invoices = Table(
    "t_invoices",
    biz,
    Column("stripe_invoice_id", String(64), primary_key=True),
    Column("status", String(32)),
    Column("amount_paid", Integer),
    Column("version", BigInteger, nullable=False),
)


ledger = Table(
    "t_ledger",
    biz,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stripe_invoice_id", String(64), nullable=False),
    Column("amount", Integer, nullable=False),
)


def apply(event: Event, conn: Connection) -> None:
    """Idempotent demo handlers: invoice state only if newer; one ledger credit per paid invoice."""
    obj = event.payload["data"]["object"]
    if obj.get("object") != "invoice":
        return
    version = event.payload["created"] * 10 + STEP[event.event_type or ""]
    upsert_if_newer(
        conn,
        invoices,
        {
            "stripe_invoice_id": obj["id"],
            "status": obj["status"],
            "amount_paid": obj["amount_paid"],
            "version": version,
        },
        key=["stripe_invoice_id"],
        version="version",
    )
    if (
        event.event_type == "invoice.paid"
        and conn.execute(select(ledger.c.id).where(ledger.c.stripe_invoice_id == obj["id"])).first()
        is None
    ):
        conn.execute(insert(ledger).values(stripe_invoice_id=obj["id"], amount=obj["amount_paid"]))


def registry() -> HandlerRegistry:
    r = HandlerRegistry()
    r.register("stripe", "*", apply)
    return r


def settings_for(db_url: str, sandbox_url: str, page_size: int = 25) -> Settings:
    return parse_settings(
        {
            "database": {"url": db_url},
            "reconcile": {"grace_seconds": 300, "stuck_after_seconds": 3600},
            "worker": {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.02},
            "sources": [
                {
                    "name": "stripe",
                    "kind": "stripe",
                    "base_url": sandbox_url,
                    "api_key_env": "T_SBX_KEY",
                    "signing_secret_env": "T_STRIPE_SECRET",
                    "page_size": page_size,
                    "initial_lookback_hours": 48,
                    # no client-side pacing: the sandbox has no rate limit here, and the budget's
                    # own behaviour is tested where it is the point (test_budget, the 429 tests)
                    "max_requests_per_second": 0,
                    "checks": [
                        {
                            "object_type": "invoice",
                            "table": "t_invoices",
                            "key": "stripe_invoice_id",
                            "fields": {"status": "status", "amount_paid": "amount_paid"},
                            "amount": "amount_due",
                            "currency": "currency",
                        },
                        {
                            "event_types": ["invoice.paid"],
                            "table": "t_ledger",
                            "key": "stripe_invoice_id",
                            "unique_by": "stripe_invoice_id",
                        },
                    ],
                }
            ],
        },
        "<test>",
    )


@dataclass
class Scenario:
    world: World
    sandbox: Sandbox
    server: RunningServer
    settings: Settings
    engine: Engine
    expected: set[tuple[str, str, str]]
    dropped: list[str]
    planted: dict[str, list[str]]

    def reconciler(self, **kwargs: Any) -> Reconciler:
        return Reconciler(self.engine, self.settings, **kwargs)

    def found(self, status: str = "open") -> set[tuple[str, str, str]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    DISCREPANCIES.c.kind, DISCREPANCIES.c.record_key, DISCREPANCIES.c.field
                ).where(DISCREPANCIES.c.status == status)
            )
            return {(str(k), r, f) for k, r, f in rows}


@pytest.fixture
def scenario(db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("T_SBX_KEY", "sk_test_sandbox")
    now = datetime.now(UTC).replace(microsecond=0)
    world = build_world(
        seed=8,
        now=now - timedelta(minutes=15),
        stripe_events=150,
        github_deliveries=0,
        shopify_orders=0,
    )
    sandbox = Sandbox(world)
    server = start_server(sandbox.app)
    settings = settings_for(db_url, server.url)
    biz.drop_all(engine)
    biz.create_all(engine)
    receiver = serve(create_app(settings, engine))
    hooks = stripe_webhooks(world.stripe_events, SECRET)
    ordered, report = plan(
        hooks, DeliveryFaults(drop=0.1, duplicate=0.05, reorder=0.1, delay=0.05), seed=4
    )
    with httpx.Client() as client:
        send(client, f"{receiver.url}/webhooks/stripe", ordered, report)
    assert report.dropped and report.responses == {"200": len(ordered)}
    # forged inbox events the source never sent (orphaned), processed like the rest
    forged = []
    for i in range(2):
        body = json.dumps(
            {
                "id": f"evt_forged_{i}",
                "object": "event",
                "type": "charge.succeeded",
                "created": int((now - timedelta(hours=2)).timestamp()),
                "data": {"object": {"id": f"ch_forged_{i}", "object": "charge"}},
            }
        ).encode()
        with engine.begin() as conn:
            store_items(
                conn,
                [
                    IncomingEvent(
                        "stripe", parse_stripe({}, body), body, {}, now - timedelta(minutes=30)
                    )
                ],
            )
        forged.append(f"evt_forged_{i}")
    Worker(engine, settings, registry()).drain()

    dropped = set(report.dropped)
    received_invoices = sorted(
        {
            e["data"]["object"]["id"]
            for e in world.stripe_events
            if e["type"].startswith("invoice.") and e["id"] not in dropped
        }
    )
    complete = [
        i
        for i in received_invoices
        if all(
            e["id"] not in dropped for e in world.stripe_events if e["data"]["object"]["id"] == i
        )
    ]
    paid_complete = [
        i for i in complete if world.stripe_objects[("invoice", i)]["status"] == "paid"
    ]
    dup, others = paid_complete[:2], [i for i in complete if i not in paid_complete[:2]]
    changed, absent = others[:2], others[2:4]
    charges = [
        e["id"]
        for e in world.stripe_events
        if e["type"] == "charge.succeeded" and e["id"] not in dropped
    ][:2]
    with engine.begin() as conn:
        for i in dup:
            conn.execute(insert(ledger).values(stripe_invoice_id=i, amount=1))
        for i in changed:
            conn.execute(
                update(invoices)
                .where(invoices.c.stripe_invoice_id == i)
                .values(status="uncollectible")
            )
        for i in absent:
            conn.execute(delete(invoices).where(invoices.c.stripe_invoice_id == i))
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id.in_(charges))
            .values(
                status="pending",
                received_at=now - timedelta(hours=2),
                queued_at=now - timedelta(hours=2),
            )
        )

    # what a careful person would list, from the ground truth
    expected = {("missing", e, "") for e in dropped}
    expected |= {("duplicate", f"t_ledger:{i}", "") for i in dup}
    expected |= {("unapplied", f"t_invoices:{i}", "") for i in absent}
    expected |= {("orphaned", e, "") for e in forged}
    expected |= {("stuck", e, "") for e in charges}
    with engine.connect() as conn:
        for row in conn.execute(select(invoices)):
            truth = world.stripe_objects[("invoice", row.stripe_invoice_id)]
            for column in ("status", "amount_paid"):
                if row._mapping[column] != truth[column]:
                    expected.add(("diverged", f"t_invoices:{row.stripe_invoice_id}", column))
    assert {k for k, _, _ in expected} == {
        "missing",
        "duplicate",
        "unapplied",
        "orphaned",
        "stuck",
        "diverged",
    }
    yield Scenario(
        world,
        sandbox,
        server,
        settings,
        engine,
        expected,
        sorted(dropped),
        {"dup": dup, "changed": changed, "absent": absent, "forged": forged, "stuck": charges},
    )
    server.stop()
    biz.drop_all(engine)


def stopping(scenario: Scenario, pages: int) -> Reconciler:
    """A reconciler whose source fails after ``pages`` pages (a run that dies mid-scan)."""
    from connectors.testing import StopsAfter
    from reconciler.sources import build_connector

    return scenario.reconciler(connector_factory=lambda s: StopsAfter(build_connector(s), pages))


def write_config(path: Any, scenario: Scenario, db_url: str) -> str:
    path.write_text(
        f"""
[database]
url = "{db_url}"
[reconcile]
grace_seconds = 300
stuck_after_seconds = 3600
schedule = "0 2 * * *"
snapshot_interval_seconds = 5
[[sources]]
name = "stripe"
kind = "stripe"
base_url = "{scenario.server.url}"
api_key_env = "T_SBX_KEY"
signing_secret_env = "T_STRIPE_SECRET"
page_size = 25
initial_lookback_hours = 48
max_requests_per_second = 0
[[sources.checks]]
object_type = "invoice"
table = "t_invoices"
key = "stripe_invoice_id"
fields = {{ status = "status", amount_paid = "amount_paid" }}
amount = "amount_due"
currency = "currency"
[[sources.checks]]
event_types = ["invoice.paid"]
table = "t_ledger"
key = "stripe_invoice_id"
unique_by = "stripe_invoice_id"
"""
    )
    return str(path)


def orphan_passes(scenario: Scenario, run: Any) -> list[bool]:
    """What each orphan pass of ``run()`` decided: True where it ran the anti-join, False where the
    scan's tally settled the window (PostgreSQL) without it."""
    from reconciler.reconcile.store.passes import Passes

    decisions: list[bool] = []
    real = Passes.orphans

    def orphans(self: Passes, start: Any, seen_rows: int, grace: Any, scope: Any) -> int:
        decisions.append(not self.sql.settled_by_tally(start, seen_rows, scope))
        return real(self, start, seen_rows, grace, scope)

    Passes.orphans = orphans  # type: ignore[method-assign]
    try:
        run()
    finally:
        Passes.orphans = real  # type: ignore[method-assign]
    return decisions


def anti_join_ran(passes: list[bool]) -> bool:
    return any(passes)


def resolution_updates(scenario: Scenario, run: Any) -> int:
    """How many resolution UPDATEs the store issued while ``run()`` ran."""
    from reconciler.reconcile.store.passes import Passes

    calls = 0
    real = Passes._resolve_where

    def counted(self: Passes, *args: Any) -> int:
        nonlocal calls
        calls += 1
        return real(self, *args)

    Passes._resolve_where = counted  # type: ignore[method-assign]
    try:
        run()
    finally:
        Passes._resolve_where = real  # type: ignore[method-assign]
    return calls


def unforge(scenario: Scenario, keep: int = 0) -> None:
    """Take the planted orphans out of the inbox, but ``keep`` of them."""
    gone = scenario.planted["forged"][keep:]
    with scenario.engine.begin() as conn:
        conn.execute(delete(INBOX_EVENTS).where(INBOX_EVENTS.c.event_id.in_(gone)))
    scenario.expected -= {("orphaned", e, "") for e in gone}


def forged_event(event_id: str) -> tuple[str, bytes]:
    created = int((datetime.now(UTC) - timedelta(hours=2)).timestamp())
    return event_id, json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": "charge.succeeded",
            "created": created,
            "data": {"object": {"id": f"ch_{event_id}", "object": "charge"}},
        }
    ).encode()


def forge(engine: Engine, event_id: str, event_type: str, received_at: datetime) -> None:
    body = json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": event_type,
            "created": int((received_at - timedelta(hours=2)).timestamp()),
            "data": {"object": {"id": f"obj_{event_id}", "object": event_type.split(".")[0]}},
        }
    ).encode()
    with engine.begin() as conn:
        store_items(conn, [IncomingEvent("stripe", parse_stripe({}, body), body, {}, received_at)])
