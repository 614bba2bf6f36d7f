"""Orphans over the shared scenario, on SQLite and PostgreSQL: the anti-join and the tally, listing
filters and connected accounts, late deliveries and the orphan watermark."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import (
    delete,
    func,
    insert,
    select,
    update,
)

from connectors.providers.stripe.signature import parse_stripe
from reconciler.config import parse_settings
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.reconcile.run import Reconciler
from reconciler.storage.models import INBOX_EVENTS, RECON_SEEN
from tests.scenario import (
    Scenario,
    anti_join_ran,
    forge,
    forged_event,
    orphan_passes,
    registry,
    stopping,
    unforge,
)


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
            "SELECT reltuples FROM pg_class WHERE oid = 'recon_seen'::regclass"  # this schema's
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


def test_an_unlisted_event_the_inbox_did_not_get_by_webhook_is_no_orphan(
    scenario: Scenario,
) -> None:
    """An orphan is a delivery the source never sent: a stored event that came from the source's
    own listing (a backfill) and is not listed now is not one, whatever the window holds."""
    unforge(scenario)
    received = datetime.now(UTC) - timedelta(hours=2)
    forge(scenario.engine, "evt_backfilled", "charge.succeeded", received)
    forge(scenario.engine, "evt_webhook", "charge.succeeded", received)
    with scenario.engine.begin() as conn:
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id == "evt_backfilled")
            .values(origin="backfill")
        )
    scenario.reconciler().run("stripe")
    orphans = {r for k, r, _ in scenario.found() if k == "orphaned"}
    assert orphans == {"evt_webhook"}  # judged, and the backfilled one is not
