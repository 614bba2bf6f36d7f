"""The reconciler on SQLite and PostgreSQL, against the sandbox over loopback, with planted problems.

Ground truth comes from the sender's report and the sandbox world, and is compared independently of
the reconciler's own rules: exactly the planted discrepancies are found, and no others.
"""

from __future__ import annotations

import json
import statistics
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)

from connectors.sandbox.app import Faults, Sandbox
from connectors.sandbox.sender import DeliveryFaults, plan, send, stripe_webhooks
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.reconcile.lease import acquire
from reconciler.reconcile.run import Reconciler
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    RECON_LEASES,
    RECON_RUNS,
    RECON_SEEN,
)
from tests.conftest import start_server
from tests.scenario import (
    SECRET,
    Scenario,
    biz,
    invoices,
    ledger,
    registry,
    resolution_updates,
    stopping,
)


def test_planted_problems_are_found_exactly_and_reruns_add_nothing(scenario: Scenario) -> None:
    summary = scenario.reconciler().run("stripe")
    assert summary.status == "succeeded" and summary.records_scanned == 150
    assert scenario.found() == scenario.expected
    with scenario.engine.connect() as conn:
        missing = conn.execute(select(DISCREPANCIES).where(DISCREPANCIES.c.kind == "missing")).all()
        run = conn.execute(select(RECON_RUNS)).one()
    for row in missing:
        event = scenario.world.stripe_event(row.event_id)
        assert event is not None and row.cause == "not_received"
        assert row.recover_by == datetime.fromtimestamp(event["created"], UTC) + timedelta(days=30)
        assert row.detection_delay_seconds is not None and row.detection_delay_seconds >= 15 * 60
    assert run.status == "succeeded" and run.records_scanned == 150 and run.counts == summary.found
    with scenario.engine.connect() as conn:
        delays = [
            d
            for d in conn.execute(
                select(DISCREPANCIES.c.detection_delay_seconds).where(
                    DISCREPANCIES.c.first_run_id == run.run_id
                )
            ).scalars()
            if d is not None
        ]
    assert len(delays) > 1
    assert run.detail["detection_delay_median_seconds"] == pytest.approx(statistics.median(delays))
    assert run.detail["detection_delay_max_seconds"] == pytest.approx(max(delays))
    amounts = [r.amount for r in missing if r.object_type == "invoice"]
    assert amounts and all(isinstance(a, int) and a > 0 for a in amounts)

    with scenario.engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one()
    second = scenario.reconciler().run("stripe")
    assert second.records_scanned == 0  # caught up from the checkpoint
    full = scenario.reconciler().run("stripe", full=True)
    assert full.records_scanned == 150
    with scenario.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one() == before
    assert scenario.found() == scenario.expected


def test_fixing_a_problem_resolves_it_on_the_next_run(scenario: Scenario, serve: Any) -> None:
    recon = scenario.reconciler()
    recon.run("stripe")
    p, engine = scenario.planted, scenario.engine
    late = scenario.dropped[0]
    event = scenario.world.stripe_event(late)
    assert event is not None
    receiver = serve(create_app(scenario.settings, engine))
    [hook] = stripe_webhooks([event], SECRET)
    assert (
        httpx.post(
            f"{receiver.url}/webhooks/stripe", content=hook.body, headers=hook.headers
        ).json()["status"]
        == "accepted"
    )
    with engine.begin() as conn:
        conn.execute(
            delete(ledger).where(ledger.c.stripe_invoice_id == p["dup"][0], ledger.c.amount == 1)
        )
        truth = scenario.world.stripe_objects[("invoice", p["changed"][0])]
        conn.execute(
            update(invoices)
            .where(invoices.c.stripe_invoice_id == p["changed"][0])
            .values(status=truth["status"])
        )
        absent = scenario.world.stripe_objects[("invoice", p["absent"][0])]
        conn.execute(
            insert(invoices).values(
                stripe_invoice_id=absent["id"],
                status=absent["status"],
                amount_paid=absent["amount_paid"],
                version=0,
            )
        )
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id == p["stuck"][0])
            .values(status="processed")
        )
    summary = recon.run("stripe")
    fixed = {
        ("missing", late, ""),
        ("duplicate", f"t_ledger:{p['dup'][0]}", ""),
        ("diverged", f"t_invoices:{p['changed'][0]}", "status"),
        ("unapplied", f"t_invoices:{p['absent'][0]}", ""),
        ("stuck", p["stuck"][0], ""),
    }
    assert fixed <= scenario.found("resolved")
    assert not fixed & scenario.found("open")
    assert summary.resolved >= len(fixed)


@pytest.mark.parametrize("stop_after", [1, 3])
def test_a_run_interrupted_after_page_p_then_resumed_equals_one_run(
    scenario: Scenario, stop_after: int
) -> None:
    from reconciler.errors import HookledgerError

    with pytest.raises(HookledgerError, match="stopped after"):
        stopping(scenario, stop_after).run("stripe")
    with scenario.engine.connect() as conn:
        runs = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.records_scanned)).all()
        seen = sum(
            len(json.loads(ids)) for ids in conn.execute(select(RECON_SEEN.c.event_ids)).scalars()
        )
    [(status, scanned)] = runs  # (a sliced scan's pages hold up to 25 records each)
    assert str(status) == "failed" and stop_after <= scanned <= stop_after * 25
    assert seen == scanned  # what the interrupted scan saw is kept for the orphan anti-join
    resumed = scenario.reconciler().run("stripe")
    assert resumed.records_scanned == 150 - scanned  # each slice resumed: nothing twice
    assert scenario.found() == scenario.expected
    scenario.reconciler().run("stripe")  # and a next run changes nothing
    assert scenario.found() == scenario.expected


def test_dry_run_writes_nothing(scenario: Scenario) -> None:
    summary = scenario.reconciler().run("stripe", dry_run=True)
    assert sum(summary.found.values()) >= len(scenario.expected)
    with scenario.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(RECON_RUNS)).scalar_one() == 0


def test_a_run_killed_mid_scan_is_recorded_with_the_records_it_stored(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 mid-scan: no closing write ever runs, so the run's row must already count what its
    committed pages stored (issue 34: such a run was recorded with records_scanned 0)."""
    from reconciler.errors import HookledgerError
    from reconciler.reconcile.run import Reconciler

    killed = stopping(scenario, 3)
    with monkeypatch.context() as gone, pytest.raises(HookledgerError, match="stopped after"):
        gone.setattr(Reconciler, "_finish", lambda self, summary: None)  # the process is gone
        killed.run("stripe")
    with scenario.engine.connect() as conn:
        [(status, scanned)] = conn.execute(
            select(RECON_RUNS.c.status, RECON_RUNS.c.records_scanned)
        ).all()
        seen = sum(
            len(json.loads(ids)) for ids in conn.execute(select(RECON_SEEN.c.event_ids)).scalars()
        )
    assert str(status) == "running" and scanned > 0
    # the pages whose cursor was committed; on PostgreSQL the last page's write travels with the
    # next page's statement, so it may count one page fewer than the ids seen
    assert seen - 25 <= scanned <= seen
    with scenario.engine.begin() as conn:  # its lease runs out; the next run finds it abandoned
        conn.execute(delete(RECON_LEASES))
    scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        abandoned = conn.execute(
            select(RECON_RUNS.c.records_scanned, RECON_RUNS.c.error).where(
                RECON_RUNS.c.status == "failed"
            )
        ).one()
    assert abandoned == (scanned, "abandoned: its process stopped before the run finished")


def test_a_dry_run_says_what_is_open_now(scenario: Scenario) -> None:
    """Issue 34: ``reconcile --dry-run`` said "open now: none" while discrepancies were open."""
    real = scenario.reconciler().run("stripe")
    assert real.open_after  # the planted discrepancies are open
    dry = scenario.reconciler().run("stripe", dry_run=True)
    assert dry.open_after == real.open_after


def test_two_concurrent_runs_one_runs_one_skips(scenario: Scenario) -> None:
    scenario.sandbox.faults = Faults(slow_ms=60)
    results: list[str] = []

    def go() -> None:
        results.append(scenario.reconciler().run("stripe").status)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["skipped", "succeeded"]
    with scenario.engine.begin() as conn:  # the lease is free again afterwards
        assert acquire(conn, "stripe", "someone", datetime.now(UTC), timedelta(minutes=1))


def test_backfill_then_the_late_real_delivery_is_one_event_one_effect(
    scenario: Scenario, serve: Any
) -> None:
    from reconciler.reconcile.repair import backfill
    from reconciler.sources import build_connector

    engine = scenario.engine
    paid = next(
        e
        for e in scenario.world.stripe_events
        if e["id"] in scenario.dropped
        and e["type"] == "invoice.paid"
        and not any(
            x["type"] == "invoice.paid"
            and x["id"] not in scenario.dropped
            and x["data"]["object"]["id"] == e["data"]["object"]["id"]
            for x in scenario.world.stripe_events
        )
    )
    invoice_id = paid["data"]["object"]["id"]
    source = scenario.settings.source("stripe")
    assert source is not None
    connector = build_connector(source)
    try:
        result = backfill(
            engine, source, connector, paid["id"], actor="ops", reason="missing in report"
        )
    finally:
        connector.close()
    assert result.outcome == "accepted"
    receiver = serve(create_app(scenario.settings, engine))
    [hook] = stripe_webhooks([paid], SECRET)
    assert (
        httpx.post(
            f"{receiver.url}/webhooks/stripe", content=hook.body, headers=hook.headers
        ).json()["status"]
        == "duplicate"
    )
    Worker(engine, scenario.settings, registry()).drain()
    with engine.connect() as conn:
        row = conn.execute(
            select(INBOX_EVENTS.c.origin, INBOX_EVENTS.c.status).where(
                INBOX_EVENTS.c.event_id == paid["id"]
            )
        ).one()
        credits = conn.execute(
            select(func.count()).select_from(ledger).where(ledger.c.stripe_invoice_id == invoice_id)
        ).scalar_one()
    assert (str(row.origin), str(row.status)) == ("backfill", "processed")
    assert credits == 1


def test_a_backfill_resolves_the_missing_discrepancy_it_answers(scenario: Scenario) -> None:
    """After a run finds an event missing, backfilling it closes that discrepancy in the same
    transaction (it no longer waits for the next run), and says so."""
    from reconciler.reconcile.repair import backfill
    from reconciler.sources import build_connector

    scenario.reconciler().run("stripe")
    engine = scenario.engine
    with engine.connect() as conn:
        event_id = conn.execute(
            select(DISCREPANCIES.c.event_id)
            .where(DISCREPANCIES.c.kind == "missing", DISCREPANCIES.c.status == "open")
            .order_by(DISCREPANCIES.c.id)
            .limit(1)
        ).scalar_one()
    source = scenario.settings.source("stripe")
    assert source is not None
    connector = build_connector(source)
    try:
        result = backfill(engine, source, connector, event_id, actor="ops", reason="lost")
    finally:
        connector.close()
    assert (result.outcome, result.missing_resolved) == ("accepted", 1)
    with engine.connect() as conn:
        row = conn.execute(
            select(DISCREPANCIES.c.status, DISCREPANCIES.c.resolution).where(
                DISCREPANCIES.c.event_id == event_id, DISCREPANCIES.c.kind == "missing"
            )
        ).one()
    assert (str(row.status), row.resolution) == ("resolved", "backfilled by ops")
    again = scenario.reconciler().run("stripe")  # the next run agrees: nothing reopens
    with engine.connect() as conn:
        status = conn.execute(
            select(DISCREPANCIES.c.status).where(
                DISCREPANCIES.c.event_id == event_id, DISCREPANCIES.c.kind == "missing"
            )
        ).scalar_one()
    assert str(status) == "resolved" and again.status == "succeeded"


def test_github_missing_deliveries_say_whose_fault_it_was(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropped deliveries that GitHub logged as failed are provider_failed; one that GitHub logged as OK
    but never reached the inbox is lost_after_ack. recover_by is the delivery time plus retention."""
    from connectors.sandbox.sender import github_webhooks, record_github_outcomes

    monkeypatch.setenv("T_SBX_GH", "ghp_sandbox")
    now = datetime.now(UTC).replace(microsecond=0)
    world = build_world(
        seed=9,
        now=now - timedelta(minutes=15),
        stripe_events=0,
        github_deliveries=60,
        shopify_orders=0,
        github_failure_rate=0.0,
    )
    server = start_server(Sandbox(world).app)
    try:
        settings = parse_settings(
            {
                "database": {"url": db_url},
                "sources": [
                    {
                        "name": "gh",
                        "kind": "github",
                        "base_url": server.url,
                        "api_key_env": "T_SBX_GH",
                        "signing_secret_env": "T_GITHUB_SECRET",
                        "repository": "octocat/Hello-World",
                        "hook_id": 1,
                        "page_size": 20,
                        "initial_lookback_hours": 48,
                    }
                ],
            },
            "<test>",
        )
        receiver = serve(create_app(settings, engine))
        ordered, report = plan(
            github_webhooks(world.github_attempts, "It's a Secret to Everybody"),
            DeliveryFaults(drop=0.15),
            seed=2,
        )
        with httpx.Client() as client:
            send(client, f"{receiver.url}/webhooks/gh", ordered, report)
        lost = report.dropped[:1]  # GitHub believes this one was delivered
        record_github_outcomes(world, report, lost_after_ack=lost)
        assert len(report.dropped) >= 3
        Reconciler(engine, settings).run("gh")
        with engine.connect() as conn:
            rows = conn.execute(
                select(DISCREPANCIES).where(DISCREPANCIES.c.kind == "missing")
            ).all()
    finally:
        server.stop()
    causes = {r.event_id: r.cause for r in rows}
    assert set(causes) == set(report.dropped)
    assert causes[lost[0]] == "lost_after_ack"
    assert {c for e, c in causes.items() if e not in lost} == {"provider_failed"}
    delivered = {a.guid: a.delivered_at for a in world.github_attempts}
    for r in rows:
        # the API reports delivered_at to the second; recover_by follows what the source says
        assert r.recover_by == delivered[r.event_id].replace(microsecond=0) + timedelta(
            days=7
        )  # GHES retention
        assert r.detail == {"attempts": 1}


def test_business_tables_in_another_database_read_only(scenario: Scenario, tmp_path: Any) -> None:
    from reconciler.storage.engine import make_engine

    url = f"sqlite:///{tmp_path / 'business.db'}"
    writer = make_engine(url)
    biz.create_all(writer)
    with scenario.engine.connect() as src, writer.begin() as dst:
        for table in (invoices, ledger):
            rows = [dict(r._mapping) for r in src.execute(select(table))]
            if rows:
                dst.execute(insert(table), rows)
    writer.dispose()
    with scenario.engine.begin() as conn:  # the inbox database no longer has them
        conn.execute(delete(ledger))
        conn.execute(delete(invoices))
    reader = make_engine(url, readonly=True)
    try:
        Reconciler(scenario.engine, scenario.settings, business_engine=reader).run("stripe")
        with (
            reader.connect() as conn,
            pytest.raises(Exception, match=r"readonly|read-only|query_only"),
        ):
            conn.execute(delete(invoices))
    finally:
        reader.dispose()
    assert scenario.found() == scenario.expected


def test_a_run_that_cannot_build_its_connector_fails_and_frees_the_lease(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.errors import ConfigError
    from reconciler.storage.models import RECON_LEASES

    monkeypatch.delenv("T_SBX_KEY")
    with pytest.raises(ConfigError, match="T_SBX_KEY"):
        scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        run = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.error)).one()
        assert conn.execute(select(func.count()).select_from(RECON_LEASES)).scalar_one() == 0
    assert str(run.status) == "failed" and "T_SBX_KEY" in run.error
    monkeypatch.setenv("T_SBX_KEY", "sk_test_sandbox")
    assert scenario.reconciler().run("stripe").status == "succeeded"  # not skipped


def test_a_run_whose_process_died_is_marked_abandoned_once_its_lease_expires(
    scenario: Scenario,
) -> None:
    from reconciler.storage.models import RECON_LEASES

    now = datetime.now(UTC)
    with scenario.engine.begin() as conn:  # what a killed process leaves behind
        conn.execute(
            insert(RECON_RUNS).values(
                run_id="dead-run",
                source="stripe",
                trigger="schedule",
                status="running",
                started_at=now - timedelta(hours=3),
                records_scanned=0,
                counts={},
            )
        )
        conn.execute(
            insert(RECON_LEASES).values(
                source="stripe",
                owner="dead-host:1",
                acquired_at=now - timedelta(hours=3),
                expires_at=now - timedelta(hours=2),
            )
        )
    assert scenario.reconciler().run("stripe").status == "succeeded"
    with scenario.engine.connect() as conn:
        dead = conn.execute(
            select(RECON_RUNS.c.status, RECON_RUNS.c.error).where(RECON_RUNS.c.run_id == "dead-run")
        ).one()
    assert str(dead.status) == "failed" and dead.error.startswith("abandoned")


orders = Table(
    "t_orders",
    biz,
    Column("order_id", String(32), primary_key=True),
    Column("financial_status", String(32)),
)


@pytest.mark.parametrize("api", ["graphql", "rest"])
def test_shopify_state_reconciliation(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    """No delivery log: objects whose webhooks never arrived are missing by object; rows are compared
    with the order's current state. The same discrepancies through either of Shopify's APIs."""
    from connectors.sandbox.sender import shopify_webhooks

    monkeypatch.setenv("T_SBX_SHOP", "shpat_sandbox")
    now = datetime.now(UTC).replace(microsecond=0)
    world = build_world(
        seed=12,
        now=now - timedelta(minutes=15),
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=40,
    )
    server = start_server(Sandbox(world).app)
    orders.drop(engine, checkfirst=True)
    orders.create(engine)
    try:
        settings = parse_settings(
            {
                "database": {"url": db_url},
                "sources": [
                    {
                        "name": "shop",
                        "kind": "shopify",
                        "api": api,
                        "base_url": server.url,
                        "api_key_env": "T_SBX_SHOP",
                        "signing_secret_env": "T_SHOPIFY_SECRET",
                        "page_size": 15,
                        "initial_lookback_hours": 48,
                        "checks": [
                            {
                                "object_type": "order",
                                "table": "t_orders",
                                "key": "order_id",
                                "fields": {"financial_status": "financial_status"},
                            }
                        ],
                    }
                ],
            },
            "<test>",
        )
        receiver = serve(create_app(settings, engine))
        hooks = shopify_webhooks(world, "hush", seed=1)
        order_of = {h.event_id: str(json.loads(h.body)["id"]) for h in hooks}
        ordered, report = plan(hooks, DeliveryFaults(drop=0.2), seed=6)
        with httpx.Client() as client:
            send(client, f"{receiver.url}/webhooks/shop", ordered, report)

        def apply_order(event: Event, conn: Connection) -> None:
            order = event.payload
            conn.execute(delete(orders).where(orders.c.order_id == str(order["id"])))
            conn.execute(
                insert(orders).values(
                    order_id=str(order["id"]), financial_status=order["financial_status"]
                )
            )

        reg = HandlerRegistry()
        reg.register("shop", "*", apply_order)
        Worker(engine, settings, reg).drain()
        received = sorted(set(order_of.values()) - {order_of[w] for w in report.dropped})
        changed, removed = received[0], received[1]
        with engine.begin() as conn:
            conn.execute(
                update(orders).where(orders.c.order_id == changed).values(financial_status="voided")
            )
            conn.execute(delete(orders).where(orders.c.order_id == removed))
        summary = Reconciler(engine, settings).run("shop")
        with engine.connect() as conn:
            found = {
                (str(k), r, f)
                for k, r, f in conn.execute(
                    select(DISCREPANCIES.c.kind, DISCREPANCIES.c.record_key, DISCREPANCIES.c.field)
                )
            }
    finally:
        server.stop()
        orders.drop(engine, checkfirst=True)
    expected = {("missing", f"order:{order_of[w]}", "") for w in report.dropped}
    expected |= {
        ("diverged", f"t_orders:{changed}", "financial_status"),
        ("unapplied", f"t_orders:{removed}", ""),
    }
    assert report.dropped and summary.records_scanned == 40
    assert found == expected


class _Counted:
    """A connector that counts how often it is closed."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.closed = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        self.closed += 1
        self.inner.close()


def test_the_connector_built_alongside_the_runs_start_is_closed_once_run_or_skipped(
    scenario: Scenario,
) -> None:
    from reconciler.sources import build_connector

    built: list[tuple[_Counted, str]] = []

    def factory(source: Any) -> Any:
        built.append((_Counted(build_connector(source)), threading.current_thread().name))
        return built[-1][0]

    assert scenario.reconciler(connector_factory=factory).run("stripe").status == "succeeded"
    with scenario.engine.begin() as conn:  # someone else holds the lease
        assert acquire(conn, "stripe", "someone", datetime.now(UTC), timedelta(minutes=5))
    assert scenario.reconciler(connector_factory=factory).run("stripe").status == "skipped"
    assert [(c.closed, thread) for c, thread in built] == [(1, "connector-build")] * 2


def test_resolution_passes_run_only_for_kinds_with_open_discrepancies(scenario: Scenario) -> None:
    from reconciler.reconcile.store import open_store

    def open_kinds(conn: Any, source: str) -> set[Any]:
        return open_store(conn, source, "-", datetime.now(UTC), dry_run=True).passes.open_kinds()

    scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        assert {str(k) for k in open_kinds(conn, "stripe")} == {k for k, _, _ in scenario.expected}
    with scenario.engine.begin() as conn:  # an operator ignores every one of them
        conn.execute(update(DISCREPANCIES).values(status="ignored"))
    assert resolution_updates(scenario, lambda: scenario.reconciler().run("stripe")) == 0
    assert scenario.found("ignored") == scenario.expected and scenario.found() == set()
    with scenario.engine.connect() as conn:
        assert open_kinds(conn, "stripe") == set()


def test_a_scan_over_a_page_that_keeps_contradicting_its_paging_fails_and_misses_nothing(
    scenario: Scenario,
) -> None:
    """Stripe answers an empty page with has_more on every try: the run fails with the reason, the
    cursor stays at the last committed page, and a later healthy run compares every record."""
    from connectors.paging import PagingError
    from reconciler.cursors import load_cursor
    from reconciler.sources import build_connector
    from tests.faulty_http import Misbehaving

    transport = Misbehaving("empty", lambda call: call >= 3, "data")

    def faulty(source: Any) -> Any:
        return build_connector(source, transport=transport, sleep=lambda s: None)

    with pytest.raises(PagingError, match="says there is more but the page is empty"):
        scenario.reconciler(connector_factory=faulty).run("stripe")
    with scenario.engine.connect() as conn:
        run = conn.execute(
            select(RECON_RUNS.c.status, RECON_RUNS.c.error, RECON_RUNS.c.records_scanned)
        ).one()
        cursor = load_cursor(conn, "stripe")
    assert str(run.status) == "failed" and "says there is more" in run.error
    # the pages before the fault were good (sliced: each slice keeps its own position)
    assert run.records_scanned >= 25 and cursor is not None and cursor.get("phase") == "sliced"
    healthy = scenario.reconciler().run("stripe")
    assert healthy.status == "succeeded"
    assert healthy.records_scanned == 150 - run.records_scanned  # the rest, nothing twice
    assert scenario.found() == scenario.expected


def test_a_running_run_renews_its_lease(engine: Engine) -> None:
    from reconciler.reconcile.lease import Heartbeat, holder

    ttl = timedelta(seconds=1.5)
    start = datetime.now(UTC)
    with engine.begin() as conn:
        assert acquire(conn, "s", "me", start, ttl)
    with Heartbeat(engine, "s", "me", ttl, lambda: datetime.now(UTC)) as beat:
        assert beat.interval == 0.5
        import time

        time.sleep(2.2)
        with engine.begin() as conn:
            assert not acquire(conn, "s", "other", datetime.now(UTC), ttl)  # still held
            held = holder(conn, "s")
    assert held is not None and held.owner == "me" and held.expires_at > start + ttl
    time.sleep(1.6)  # no more renewals: free again
    with engine.begin() as conn:
        assert acquire(conn, "s", "other", datetime.now(UTC), ttl)


def test_the_metrics_say_when_reconciliation_last_succeeded_and_what_it_found_first(
    scenario: Scenario, serve: Any
) -> None:
    url = serve(create_app(scenario.settings, scenario.engine)).url

    def gauge(name: str) -> float:
        text = httpx.get(f"{url}/metrics").text
        [line] = [x for x in text.splitlines() if x.startswith(f'{name}{{source="stripe"}} ')]
        return float(line.split()[-1])

    assert gauge("hookledger_reconciliation_last_success_timestamp_seconds") == 0.0  # never
    before = datetime.now(UTC).timestamp()
    scenario.reconciler().run("stripe")
    assert before <= gauge("hookledger_reconciliation_last_success_timestamp_seconds")
    assert gauge("hookledger_reconciliation_last_success_timestamp_seconds") <= (
        datetime.now(UTC).timestamp()
    )
    assert gauge("hookledger_reconciliation_last_new_discrepancies") == len(scenario.expected)
    assert gauge("hookledger_reconciliation_last_failed") == 0.0
    assert gauge("hookledger_reconciliation_last_duration_seconds") > 0.0
    scenario.reconciler().run("stripe")  # the same problems again: none of them new
    assert gauge("hookledger_reconciliation_last_new_discrepancies") == 0.0


def test_one_scheduled_run_a_slot_whichever_scheduler_gets_there_second(
    scenario: Scenario,
) -> None:
    slot = datetime.now(UTC).replace(second=0, microsecond=0)
    first = scenario.reconciler(owner="scheduler-a").run("stripe", trigger="schedule", slot=slot)
    assert first.status == "succeeded"
    # the other scheduler fires for the same slot after the first run has given the lease back
    second = scenario.reconciler(owner="scheduler-b").run("stripe", trigger="schedule", slot=slot)
    assert second.status == "skipped"
    assert second.error == (
        f"the run scheduled for {slot.isoformat()} already ran (run {first.run_id})"
    )
    # a run from the command line, or the next slot, runs
    assert scenario.reconciler().run("stripe").status == "succeeded"
    later = scenario.reconciler().run(
        "stripe", trigger="schedule", slot=datetime.now(UTC) + timedelta(seconds=1)
    )
    assert later.status == "succeeded"
    with scenario.engine.connect() as conn:
        lease_free = acquire(conn, "stripe", "probe", datetime.now(UTC), timedelta(seconds=5))
    assert lease_free  # the skipped run gave the lease back
