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
