"""A sliced scan finds what a sequential one finds, on SQLite and PostgreSQL: with 1, 4 and 16
requests in flight, after a kill mid-run, and within a provider's rate limit."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete, select

from connectors.sandbox.app import Faults
from connectors.testing import StopsAfter
from reconciler.config import SourceSettings
from reconciler.cursors import load_cursor
from reconciler.errors import HookledgerError
from reconciler.reconcile.progress import ScanProgress
from reconciler.sources import build_connector
from reconciler.storage.models import CURSORS, DISCREPANCIES, RECON_RUNS, RECON_SEEN
from tests.scenario import Scenario

PAGE = 5  # 150 events: 30 pages, enough for 16 slices to split and resume


def tuned(source: SourceSettings, **keys: Any) -> SourceSettings:
    return source.model_copy(update={"page_size": PAGE, **keys})


def forget(scenario: Scenario) -> None:
    """Back to no reconciliation at all: the next run is a first, full one."""
    with scenario.engine.begin() as conn:
        for table in (DISCREPANCIES, CURSORS, RECON_SEEN, RECON_RUNS):
            conn.execute(delete(table))


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_the_same_discrepancies_whatever_the_slices(scenario: Scenario, concurrency: int) -> None:
    def factory(source: SourceSettings) -> Any:
        return build_connector(tuned(source, max_concurrency=concurrency))

    seen: list[ScanProgress] = []
    summary = scenario.reconciler(connector_factory=factory).run(
        "stripe", progress=lambda _source, now: seen.append(now)
    )
    assert summary.status == "succeeded" and summary.records_scanned == 150
    assert summary.pages >= 150 // PAGE
    # the progress shown: records so far, the slices done of those planned, the request rate
    assert [now.records for now in seen] == sorted(now.records for now in seen)
    assert seen[-1].records == 150 and all(now.request_rate is not None for now in seen)
    if concurrency == 1:
        assert all(now.slices_planned is None for now in seen)
    else:
        assert seen[-1].slices_done == seen[-1].slices_planned
        assert max(now.slices_planned or 0 for now in seen) > 1  # the window was split
    assert scenario.found() == scenario.expected
    with scenario.engine.connect() as conn:
        cursor = load_cursor(conn, "stripe")
    assert cursor is not None and cursor["checkpoint"] == scenario.world.stripe_events[-1]["id"]
    # and a next run, sliced from the checkpoint, changes nothing
    again = scenario.reconciler(connector_factory=factory).run("stripe")
    assert again.status == "succeeded" and scenario.found() == scenario.expected


@pytest.mark.parametrize("kill_after", [1, 4, 11])
def test_a_sliced_run_killed_mid_scan_resumes_its_unfinished_slices(
    scenario: Scenario, kill_after: int
) -> None:
    def dies(source: SourceSettings) -> Any:
        return StopsAfter(build_connector(tuned(source, max_concurrency=16)), kill_after)

    with pytest.raises(HookledgerError, match="stopped after"):
        scenario.reconciler(connector_factory=dies).run("stripe")
    with scenario.engine.connect() as conn:
        cursor = load_cursor(conn, "stripe")
        scanned = conn.execute(select(RECON_RUNS.c.records_scanned)).scalar_one()
    assert cursor is not None and cursor["phase"] == "sliced"
    assert not all(done for *_, done in cursor["slices"])  # the overall position has not moved on

    def lives(source: SourceSettings) -> Any:
        return build_connector(tuned(source, max_concurrency=16))

    resumed = scenario.reconciler(connector_factory=lives).run("stripe")
    assert resumed.records_scanned == 150 - scanned  # each slice from its own last stored page
    assert scenario.found() == scenario.expected


def test_a_run_within_the_providers_limit_gets_no_429_and_one_above_it_backs_off(
    scenario: Scenario,
) -> None:
    scenario.sandbox.faults = Faults(rate_limit=40.0)

    def polite(source: SourceSettings) -> Any:
        return build_connector(tuned(source, max_concurrency=8, max_requests_per_second=30))

    summary = scenario.reconciler(connector_factory=polite).run("stripe")
    assert summary.status == "succeeded" and scenario.found() == scenario.expected
    assert scenario.sandbox.stats.throttled == 0

    forget(scenario)
    scenario.sandbox.faults = Faults(rate_limit=10.0)

    def unlimited(source: SourceSettings) -> Any:
        return build_connector(tuned(source, max_concurrency=8, max_requests_per_second=0))

    summary = scenario.reconciler(connector_factory=unlimited).run("stripe")
    # the 429s were waited out and slowed it down: nothing lost, nothing failed
    assert summary.status == "succeeded" and scenario.found() == scenario.expected
    assert scenario.sandbox.stats.throttled > 0


def test_a_sequential_scan_never_asks_about_an_object_it_judged_on_a_newer_snapshot(
    scenario: Scenario,
) -> None:
    """An invoice whose newest event never arrived, but whose row the application brought up to
    date another way: its newest snapshot agrees with the row. A newest-first scan judges it on the
    page with that event; the later pages list its older events, whose snapshots differ from the
    row, and must not ask the provider about it (nothing newer in the inbox says they are stale)."""
    from tests.scenario import invoices

    world, dropped = scenario.world, set(scenario.dropped)
    newest: dict[str, dict[str, Any]] = {}
    for event in world.stripe_events:  # oldest first
        obj = event["data"]["object"]
        if obj.get("object") == "invoice":
            newest[obj["id"]] = event
    caught_up = [
        i
        for i, event in newest.items()
        if event["id"] in dropped
        and sum(e["data"]["object"]["id"] == i for e in world.stripe_events) > 1
    ]
    assert caught_up, "the scenario drops no invoice's newest event"
    truth = world.stripe_objects
    with scenario.engine.begin() as conn:
        for i in caught_up:
            current = truth[("invoice", i)]
            conn.execute(
                invoices.update()
                .where(invoices.c.stripe_invoice_id == i)
                .values(status=current["status"], amount_paid=current["amount_paid"])
            )
        rows = {r.stripe_invoice_id: r for r in conn.execute(select(invoices))}
    expected = {
        f
        for f in scenario.expected
        if not (f[0] in ("diverged", "unapplied") and f[1].split(":")[1] in caught_up)
    }
    expected |= {("unapplied", f"t_invoices:{i}", "") for i in caught_up if i not in rows}

    def factory(source: SourceSettings) -> Any:  # a page an event: every older one on a later page
        return build_connector(tuned(source, max_concurrency=1, page_size=1))

    before = dict(scenario.sandbox.stats.by_route)
    summary = scenario.reconciler(connector_factory=factory).run("stripe")
    assert summary.status == "succeeded"
    asked = {
        path.rsplit("/", 1)[1]: n - before.get(path, 0)
        for path, n in scenario.sandbox.stats.by_route.items()
        if path.startswith("/v1/invoices/") and n > before.get(path, 0)
    }

    # asked only where a newest snapshot differs from the row (events of one second are all
    # newest: which of them is newer the scan cannot tell, so it asks), and once each
    def newest_snapshots(i: str) -> list[dict[str, Any]]:
        of_it = [e for e in world.stripe_events if e["data"]["object"]["id"] == i]
        last = max(e["created"] for e in of_it)
        return [e["data"]["object"] for e in of_it if e["created"] == last]

    agrees = {
        i
        for i in newest
        if i in rows
        and all(
            obj[c] == rows[i]._mapping[c]
            for obj in newest_snapshots(i)
            for c in ("status", "amount_paid")
        )
    }
    assert not set(asked) & agrees
    assert set(asked.values()) <= {1}
    assert scenario.found() == expected


def test_each_check_judges_an_object_on_its_own_newest_record(scenario: Scenario) -> None:
    """Two checks see different event types of one invoice (the invoice table every type, the
    ledger only invoice.paid). An event after the paid one (listed first, newest-first) is the
    invoice check's newest record; the ledger check's is still the paid event, on a later page, and
    its duplicate must be found there."""
    import copy

    world = scenario.world
    [dup, *_] = scenario.planted["dup"]
    paid = next(
        e
        for e in world.stripe_events
        if e["type"] == "invoice.paid" and e["data"]["object"]["id"] == dup
    )
    later = copy.deepcopy(paid)
    later.update(id="evt_after_paid", type="invoice.updated", created=paid["created"] + 60)
    later["data"]["object"] = dict(world.stripe_objects[("invoice", dup)])
    world.stripe_events.append(later)  # listed by the sandbox, never delivered
    expected = scenario.expected | {("missing", "evt_after_paid", "")}

    def factory(source: SourceSettings) -> Any:  # a page an event: the paid one on a later page
        return build_connector(tuned(source, max_concurrency=1, page_size=1))

    assert scenario.reconciler(connector_factory=factory).run("stripe").status == "succeeded"
    assert ("duplicate", f"t_ledger:{dup}", "") in scenario.found()
    assert scenario.found() == expected
