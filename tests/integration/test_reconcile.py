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

from connectors.parsing import parse_stripe
from connectors.sandbox.app import Faults, Sandbox
from connectors.sandbox.sender import DeliveryFaults, plan, send, stripe_webhooks
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.reconcile.lease import acquire
from reconciler.reconcile.run import Reconciler
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS, RECON_RUNS, RECON_SEEN
from tests.conftest import start_server
from tests.scenario import (
    SECRET,
    Scenario,
    anti_join_ran,
    biz,
    forge,
    forged_event,
    invoices,
    ledger,
    orphan_passes,
    registry,
    resolution_updates,
    stopping,
    unforge,
)


@pytest.mark.parametrize("delays", [[], [7.0], [5.0, 1.0], [9.0, 1.5, 4.0], [3.0, 8.0, 1.0, 2.0]])
def test_detection_delays_are_the_median_and_maximum_of_the_runs_own_first_findings(
    engine: Engine, delays: list[float]
) -> None:
    from reconciler.reconcile.store import open_store

    now = datetime.now(UTC)

    def row(key: str, delay: float | None, first: str = "run", last: str = "run") -> dict[str, Any]:
        return {
            "source": "stripe",
            "kind": "missing",
            "record_key": key,
            "field": "",
            "first_seen_at": now,
            "last_seen_at": now,
            "first_run_id": first,
            "last_run_id": last,
            "status": "open",
            "detection_delay_seconds": delay,
        }

    rows = [row(f"e{i}", d) for i, d in enumerate(delays)]
    rows += [
        row("no-delay", None),  # an object-only finding: no occurrence time
        row("older", 1e6, first="earlier"),  # found first by an earlier run, seen again
        row("other", -1e6, first="other", last="other"),
    ]
    with engine.begin() as conn:
        conn.execute(insert(DISCREPANCIES), rows)
    with engine.connect() as conn:
        got = open_store(conn, "stripe", "run", now, dry_run=True).detection_delays()
    if not delays:
        assert got is None
    else:
        assert got == (pytest.approx(statistics.median(delays)), max(delays))


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
    assert [(str(s), n) for s, n in runs] == [("failed", stop_after * 25)]
    assert seen == stop_after * 25  # what the interrupted scan saw is kept for the orphan anti-join
    resumed = scenario.reconciler().run("stripe")
    assert resumed.records_scanned == 150 - stop_after * 25
    assert scenario.found() == scenario.expected
    scenario.reconciler().run("stripe")  # and a next run changes nothing
    assert scenario.found() == scenario.expected


def test_an_orphan_the_source_lists_later_is_resolved_the_other_stays_open(
    scenario: Scenario,
) -> None:
    scenario.reconciler().run("stripe")
    orphans = sorted(r for k, r, _ in scenario.found() if k == "orphaned")
    assert len(orphans) == 2
    listed, unlisted = orphans
    with scenario.engine.connect() as conn:
        body = conn.execute(
            select(INBOX_EVENTS.c.body).where(INBOX_EVENTS.c.event_id == listed)
        ).scalar_one()
    event = json.loads(body)
    events = scenario.world.stripe_events  # oldest first: the sandbox bisects on creation time
    at = next((i for i, e in enumerate(events) if e["created"] > event["created"]), len(events))
    events.insert(at, event)
    summary = scenario.reconciler().run("stripe", full=True)  # its window holds the event again
    assert ("orphaned", listed, "") in scenario.found("resolved")
    assert ("orphaned", unlisted, "") in scenario.found("open")
    assert summary.found.get("orphaned") == 1


def test_an_unlisted_event_from_before_the_window_is_not_an_orphan(scenario: Scenario) -> None:
    """An inbox older than the scan's window: the anti-join is bounded by the window (received_at),
    and what lies before it is neither reported nor read."""
    old = datetime.now(UTC) - timedelta(days=10)
    body = json.dumps(
        {
            "id": "evt_long_ago",
            "object": "event",
            "type": "charge.succeeded",
            "created": int(old.timestamp()),
            "data": {"object": {"id": "ch_long_ago", "object": "charge"}},
        }
    ).encode()
    with scenario.engine.begin() as conn:
        store_items(conn, [IncomingEvent("stripe", parse_stripe({}, body), body, {}, old)])
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id == "evt_long_ago")
            .values(status="processed")
        )
    summary = scenario.reconciler().run("stripe")
    assert scenario.found() == scenario.expected  # the two forged events, not the old one
    assert summary.found.get("orphaned") == 2


def test_pages_split_into_several_lookups_and_seen_rows_find_the_same(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.reconcile.store.base import ScanStore

    monkeypatch.setattr(ScanStore, "lookup_chunk", 7)  # several statements and seen rows a page
    scenario.reconciler().run("stripe")
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_without_json_functions_is_refused_before_anything_is_written(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.errors import ConfigError
    from reconciler.reconcile.store import sqlite

    monkeypatch.setattr(sqlite, "SQLITE_JSON", False)
    with pytest.raises(ConfigError, match=r"no JSON functions \(json_each\)"):
        scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(RECON_RUNS)).scalar_one() == 0
    assert scenario.found() == set()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_scan_hands_the_pool_its_connections_back_as_they_were(
    scenario: Scenario,
) -> None:
    """The scan changes its session's settings for its pages; the pool gets every connection back
    with the engine's own (RESET would go to the server's defaults and drop force_custom_plan)."""

    def settings(c: Any) -> tuple[str, str, bool]:
        return (
            c.exec_driver_sql("SHOW synchronous_commit").scalar_one(),
            c.exec_driver_sql("SHOW plan_cache_mode").scalar_one(),
            c.connection.dbapi_connection.autocommit,
        )

    with scenario.engine.connect() as c:
        session = settings(c)
    assert session == ("on", "force_custom_plan", False)
    scenario.reconciler().run("stripe")
    pooled = [scenario.engine.connect() for _ in range(scenario.engine.pool.checkedin())]  # type: ignore[attr-defined]
    try:
        after = {settings(c) for c in pooled}
    finally:
        for c in pooled:
            c.close()
    assert after == {session}
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("how", ["dry_run", "interrupted"])
def test_postgres_a_scan_that_ends_early_hands_its_connection_back_as_it_was(
    scenario: Scenario, how: str
) -> None:
    from reconciler.errors import HookledgerError

    with scenario.engine.connect() as c:
        before = c.exec_driver_sql("SHOW plan_cache_mode").scalar_one()
    reconciler = scenario.reconciler()
    if how == "dry_run":
        reconciler.run("stripe", dry_run=True)
    else:
        with pytest.raises(HookledgerError, match="stopped after 1 page"):
            stopping(scenario, 1).run("stripe")
    pooled = [scenario.engine.connect() for _ in range(scenario.engine.pool.checkedin())]  # type: ignore[attr-defined]
    try:
        after = {
            (
                c.exec_driver_sql("SHOW plan_cache_mode").scalar_one(),
                c.exec_driver_sql("SHOW synchronous_commit").scalar_one(),
            )
            for c in pooled
        }
    finally:
        for c in pooled:
            c.close()
    assert after == {(before, "on")}


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_page_statement_that_fails_stores_none_of_what_it_carries(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's findings and cursor travel with the next page's seen ids and lookup: when that
    statement fails, none of it is stored; the run before it stays intact and a rerun completes it."""
    from reconciler.cursors import load_cursor
    from reconciler.errors import DatabaseError
    from reconciler.reconcile.store.postgres import PostgresStore

    real = PostgresStore.write
    cursors: list[dict[str, Any]] = []

    def write(self: PostgresStore, records: Any, findings: Any, cursor: Any) -> None:
        real(self, records, findings, cursor)
        cursors.append(dict(cursor))
        if len(cursors) == 2 and self.pending:  # page 2's: a kind too long for its column
            rows = json.loads(self.pending["findings"])
            bad = [*rows, {**rows[0], "kind": "k" * 40}] if rows else [{}]
            self.pending["findings"] = json.dumps(bad)

    monkeypatch.setattr(PostgresStore, "write", write)
    with pytest.raises(DatabaseError, match="value too long"):  # one line, not a traceback
        scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        assert load_cursor(conn, "stripe") == cursors[0]  # page 1's, not page 2's
        seen_rows = conn.execute(select(func.count()).select_from(RECON_SEEN)).scalar_one()
        first_run = conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one()
    assert seen_rows == 2  # pages 1 and 2; page 3's went with the failed statement
    assert 0 < first_run < len(scenario.expected)
    monkeypatch.setattr(PostgresStore, "write", real)
    scenario.reconciler().run("stripe")
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_orphan_pass_plans_with_fresh_statistics_of_the_seen_ids(
    scenario: Scenario,
) -> None:
    """recon_seen is emptied and refilled every scan; stale statistics (autovacuum saw it empty)
    made PostgreSQL run the anti-join as a nested loop over the heap per inbox row."""
    from reconciler.reconcile.store.postgres import PostgresStore

    with scenario.engine.begin() as conn:  # statistics that say: no ids of this source
        conn.execute(
            insert(RECON_SEEN),
            [{"source": "other", "event_ids": json.dumps([str(i)])} for i in range(500)],
        )
        conn.exec_driver_sql("ANALYZE recon_seen")
        conn.execute(delete(RECON_SEEN))
    planned_on: list[tuple[float, int]] = []  # (rows the statistics say, rows there are)
    real = PostgresStore.not_seen

    def not_seen(self: PostgresStore, *, whole_inbox: bool) -> Any:
        stats = self.conn.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE relname = 'recon_seen'"
        ).scalar_one()
        rows = self.conn.execute(select(func.count()).select_from(RECON_SEEN)).scalar_one()
        planned_on.append((float(stats), int(rows)))
        return real(self, whole_inbox=whole_inbox)

    PostgresStore.not_seen = not_seen  # type: ignore[method-assign]
    try:
        scenario.reconciler().run("stripe")
    finally:
        PostgresStore.not_seen = real  # type: ignore[method-assign]
    # the anti-join is planned on statistics of the scan's own seen ids, not the stale 500
    assert planned_on and all(stats == rows for stats, rows in planned_on)
    assert scenario.found() == scenario.expected


def test_dry_run_writes_nothing(scenario: Scenario) -> None:
    summary = scenario.reconciler().run("stripe", dry_run=True)
    assert sum(summary.found.values()) >= len(scenario.expected)
    with scenario.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(RECON_RUNS)).scalar_one() == 0


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


def test_shopify_state_reconciliation(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No delivery log: objects whose webhooks never arrived are missing by object; rows are compared
    with the order's current state."""
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


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_window_without_orphans_is_settled_by_the_tally_not_the_anti_join(
    scenario: Scenario,
) -> None:
    unforge(scenario)
    passes = orphan_passes(scenario, lambda: scenario.reconciler().run("stripe"))
    assert passes and not anti_join_ran(passes)
    assert scenario.found() == scenario.expected
    # an orphan arrives: the tally no longer matches the window, and the anti-join finds it
    _, body = forged_event("evt_forged_late")
    with scenario.engine.begin() as conn:
        store_items(
            conn,
            [
                IncomingEvent(
                    "stripe",
                    parse_stripe({}, body),
                    body,
                    {},
                    datetime.now(UTC) - timedelta(minutes=30),
                )
            ],
        )
    passes = orphan_passes(scenario, lambda: scenario.reconciler().run("stripe", full=True))
    assert anti_join_ran(passes)
    assert scenario.found() == scenario.expected | {("orphaned", "evt_forged_late", "")}


class _ListsOneEventTwice:
    """A source that lists one event on the page before its own too (offset paging under deletes
    does that): one id too many in the tally's count."""

    def __init__(self, inner: Any, twice: str) -> None:
        self.inner, self.twice = inner, twice

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def pages(self, cursor: Any, options: Any) -> Any:
        import dataclasses

        held = None  # each page waits for the next one, which may add the event to it
        for page in self.inner.pages(cursor, options):
            twice = next((r for r in page.records if r.event_id == self.twice), None)
            if held is not None:
                yield dataclasses.replace(held, records=(*held.records, twice)) if twice else held
            held = page
        if held is not None:
            yield held


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_an_id_listed_twice_does_not_hide_an_orphan(scenario: Scenario) -> None:
    """One orphan and one id listed twice: the counts are equal, the hash sums are not, so the
    anti-join decides, and finds the orphan."""
    from reconciler.sources import build_connector

    unforge(scenario, keep=1)
    twice = scenario.planted["stuck"][0]  # inside the window (received before the grace period)
    recon = scenario.reconciler(
        connector_factory=lambda s: _ListsOneEventTwice(build_connector(s), twice)
    )
    passes = orphan_passes(scenario, lambda: recon.run("stripe"))
    assert anti_join_ran(passes)
    assert scenario.found() == scenario.expected
    assert ("orphaned", scenario.planted["forged"][0], "") in scenario.found()


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_listed_event_stored_with_an_older_time_than_the_window_leaves_it_to_the_anti_join(
    scenario: Scenario,
) -> None:
    """A listed event stored with a time before the window (its payload said so): the tally counted
    it and the window's count does not, so the anti-join decides, and it is no orphan either way."""
    unforge(scenario)
    listed = scenario.planted["stuck"][0]  # listed by the source, received before the grace period
    with scenario.engine.begin() as conn:
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id == listed)
            .values(occurred_at=datetime.now(UTC) - timedelta(days=20))
        )
    passes = orphan_passes(scenario, lambda: scenario.reconciler().run("stripe"))
    assert anti_join_ran(passes)
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_resumed_scan_without_orphans_finds_none(scenario: Scenario) -> None:
    """The resumed run's tally counts only its own pages; recon_seen holds the interrupted run's too,
    so the anti-join decides (and finds nothing)."""
    from reconciler.errors import HookledgerError

    unforge(scenario)
    with pytest.raises(HookledgerError, match="stopped after"):
        stopping(scenario, 2).run("stripe")
    passes = orphan_passes(scenario, lambda: scenario.reconciler().run("stripe"))
    assert anti_join_ran(passes)
    assert scenario.found() == scenario.expected


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
        return open_store(conn, source, "-", datetime.now(UTC), dry_run=True).open_kinds()

    scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        assert {str(k) for k in open_kinds(conn, "stripe")} == {k for k, _, _ in scenario.expected}
    with scenario.engine.begin() as conn:  # an operator ignores every one of them
        conn.execute(update(DISCREPANCIES).values(status="ignored"))
    assert resolution_updates(scenario, lambda: scenario.reconciler().run("stripe")) == 0
    assert scenario.found("ignored") == scenario.expected and scenario.found() == set()
    with scenario.engine.connect() as conn:
        assert open_kinds(conn, "stripe") == set()


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_an_unlisted_event_received_within_the_grace_period_is_no_orphan(
    scenario: Scenario,
) -> None:
    """It arrived after the source's list was read (in flight): inside what the tally's count covers,
    outside the orphan window. The tally steps aside and the anti-join reports nothing."""
    unforge(scenario)
    event_id, body = forged_event("evt_in_flight")
    with scenario.engine.begin() as conn:
        store_items(
            conn, [IncomingEvent("stripe", parse_stripe({}, body), body, {}, datetime.now(UTC))]
        )
    passes = orphan_passes(scenario, lambda: scenario.reconciler().run("stripe"))
    assert anti_join_ran(passes)
    assert scenario.found() == scenario.expected
    assert not any(r == event_id for _, r, _ in scenario.found())


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
    assert run.records_scanned == 50 and cursor is not None and cursor.get("after")
    healthy = scenario.reconciler().run("stripe")
    assert healthy.status == "succeeded" and healthy.records_scanned == 100
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


def test_a_replayed_forged_event_is_still_an_orphan(scenario: Scenario) -> None:
    from reconciler.inbox.replay import replay_event

    with scenario.engine.begin() as conn:
        replay_event(conn, source="stripe", event_id="evt_forged_0", actor="ops", reason="retry")
    Worker(scenario.engine, scenario.settings, registry()).drain()
    scenario.reconciler().run("stripe")
    assert ("orphaned", "evt_forged_0", "") in scenario.found()
    assert scenario.found() == scenario.expected


def test_an_incremental_run_that_lists_nothing_new_still_checks_new_inbox_events(
    scenario: Scenario,
) -> None:
    """A forged event received after the last run is found although the source lists nothing new;
    a real event delivered late (occurred long before, received now) is asked of the source by id
    and is no orphan."""
    first = scenario.reconciler().run("stripe")
    assert first.status == "succeeded" and scenario.found() == scenario.expected
    now = datetime.now(UTC)
    forge(scenario.engine, "evt_forged_late", "charge.succeeded", now + timedelta(minutes=1))
    late = next(e for e in scenario.world.stripe_events if e["id"] in scenario.dropped)
    body = json.dumps(late).encode()
    with scenario.engine.begin() as conn:
        store_items(
            conn,
            [IncomingEvent("stripe", parse_stripe({}, body), body, {}, now + timedelta(minutes=2))],
        )
    later = now + timedelta(minutes=20)
    second = scenario.reconciler(clock=lambda: later).run("stripe")
    assert second.status == "succeeded" and second.records_scanned == 0
    expected = (scenario.expected - {("missing", late["id"], "")}) | {
        ("orphaned", "evt_forged_late", "")
    }
    assert scenario.found() == expected
    # checked once: a third run asks nothing again and finds the same
    third = scenario.reconciler(clock=lambda: later + timedelta(minutes=1)).run("stripe")
    assert third.found.get("orphaned", 0) == 0
    assert scenario.found() == expected


def test_a_filtered_listing_makes_no_false_orphans(scenario: Scenario) -> None:
    """event_types = ["invoice.paid"]: the orphan pass compares only what that listing can return."""
    data = scenario.settings.model_dump(exclude_unset=True)
    data["sources"][0]["event_types"] = ["invoice.paid"]
    data["sources"][0]["checks"] = []
    settings = parse_settings(data, "<test>")
    forge(
        scenario.engine,
        "evt_forged_paid",
        "invoice.paid",
        datetime.now(UTC) - timedelta(minutes=30),
    )
    summary = Reconciler(scenario.engine, settings).run("stripe")
    assert summary.status == "succeeded"
    orphans = {r for k, r, _ in scenario.found() if k == "orphaned"}
    assert orphans == {"evt_forged_paid"}  # not the charge forgeries, nor any other type
    missing = {r for k, r, _ in scenario.found() if k == "missing"}
    paid = {e["id"] for e in scenario.world.stripe_events if e["type"] == "invoice.paid"}
    assert missing == set(scenario.dropped) & paid


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)  # SQLite does not go away
def test_postgres_the_database_going_away_mid_run_fails_the_run_in_one_line(
    scenario: Scenario, db_url: str
) -> None:
    """Every connection of the run is terminated after its second page: a DatabaseError naming the
    database and the driver's reason, the run marked failed, the cursor at the last committed page,
    and the next run resumes from it."""
    from reconciler.cursors import load_cursor
    from reconciler.errors import DatabaseError
    from reconciler.storage.engine import make_engine

    sep = "&" if "?" in db_url else "?"
    victim = make_engine(f"{db_url}{sep}application_name=hl_victim")
    pages = []

    def cut(source: str, scanned: int) -> None:
        pages.append(scanned)
        if len(pages) == 2:
            with scenario.engine.begin() as conn:
                conn.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'hl_victim'"
                )

    try:
        with pytest.raises(DatabaseError) as raised:
            Reconciler(victim, scenario.settings).run("stripe", progress=cut)
    finally:
        victim.dispose()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("database postgresql+psycopg://")
    assert "terminating connection due to administrator command" in message
    with scenario.engine.connect() as conn:
        run = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.error)).one()
        cursor = load_cursor(conn, "stripe")
    assert str(run.status) == "failed" and "administrator command" in run.error
    assert cursor is not None and cursor.get("phase") == "backfill"  # a committed page, not the end
    resumed = scenario.reconciler().run("stripe")
    assert resumed.status == "succeeded" and 0 < resumed.records_scanned < 150
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("nextval('t_hl_seq') > 0", "read-only transaction"),
        ("pg_sleep(5) IS NOT NULL", "statement timeout"),
    ],
)
def test_postgres_business_checks_run_read_only_within_a_statement_timeout(
    scenario: Scenario, where: str, reason: str
) -> None:
    import time

    from reconciler.errors import ConfigError

    with scenario.engine.begin() as conn:
        conn.exec_driver_sql("CREATE SEQUENCE IF NOT EXISTS t_hl_seq")
    data = scenario.settings.model_dump(exclude_unset=True)
    data["sources"][0]["checks"][0]["where"] = where
    data["business"] = {"statement_timeout_seconds": 0.5}
    settings = parse_settings(data, "<test>")
    t = time.monotonic()
    try:
        with pytest.raises(ConfigError, match=rf"check 1 \(table t_invoices\).*{reason}"):
            Reconciler(scenario.engine, settings).run("stripe")
        assert time.monotonic() - t < 10
        with scenario.engine.connect() as conn:
            advanced = conn.exec_driver_sql("SELECT last_value, is_called FROM t_hl_seq").one()
            run = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.error)).one()
        assert advanced.is_called is False  # nextval never ran
        assert str(run.status) == "failed" and reason in run.error
        # the pool's sessions are read-write again: a normal run succeeds
        assert scenario.reconciler().run("stripe").status == "succeeded"
    finally:
        with scenario.engine.begin() as conn:
            conn.exec_driver_sql("DROP SEQUENCE IF EXISTS t_hl_seq")


def test_a_listing_read_as_one_connected_account_makes_no_false_orphans(scenario: Scenario) -> None:
    """account = "acct_X": only inbox events of that account are compared with its listing."""
    data = scenario.settings.model_dump(exclude_unset=True)
    data["sources"][0]["account"] = "acct_X"
    settings = parse_settings(data, "<test>")
    at = datetime.now(UTC) - timedelta(minutes=30)
    for event_id, account in (("evt_acct_x", "acct_X"), ("evt_acct_other", "acct_other")):
        body = json.dumps(
            {
                "id": event_id,
                "object": "event",
                "type": "charge.succeeded",
                "account": account,
                "created": int((at - timedelta(hours=2)).timestamp()),
                "data": {"object": {"id": f"ch_{event_id}", "object": "charge"}},
            }
        ).encode()
        with scenario.engine.begin() as conn:
            store_items(conn, [IncomingEvent("stripe", parse_stripe({}, body), body, {}, at)])
    assert Reconciler(scenario.engine, settings).run("stripe").status == "succeeded"
    orphans = {r for k, r, _ in scenario.found() if k == "orphaned"}
    # the sandbox's events carry no account, so the forgeries without one are not compared either
    assert orphans == {"evt_acct_x"}


def test_events_the_scan_listed_inside_the_grace_period_are_not_asked_again(
    scenario: Scenario,
) -> None:
    """The delivered events arrived moments before the first run (inside its grace period) and the
    scan listed them: the next run asks the provider about none of them, only about what is new."""
    from reconciler.sources import build_connector

    asked: list[str] = []

    def counting(source: Any) -> Any:
        connector = build_connector(source)
        real = connector.fetch_event

        def fetch_event(event_id: str) -> Any:
            asked.append(event_id)
            return real(event_id)

        connector.fetch_event = fetch_event  # type: ignore[method-assign]
        return connector

    assert scenario.reconciler().run("stripe").status == "succeeded"
    later = datetime.now(UTC) + timedelta(minutes=20)
    forge(scenario.engine, "evt_forged_new", "charge.succeeded", later - timedelta(minutes=10))
    second = scenario.reconciler(clock=lambda: later, connector_factory=counting).run("stripe")
    assert second.status == "succeeded" and asked == ["evt_forged_new"]
    assert ("orphaned", "evt_forged_new", "") in scenario.found()
