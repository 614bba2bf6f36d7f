"""What the operator's dashboard reads and does, on SQLite and PostgreSQL: the event list's keyset
pages, bulk replay of dead letters by selection (one transaction, one audit entry), bulk resolve by
filter, the health strip's facts, the scheduler's heartbeat, an object's other discrepancies."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, insert, select

from reconciler.errors import ActionRefusedError
from reconciler.ops import dead_letters, discrepancies, events, health
from reconciler.ops import operator_actions as actions
from reconciler.reconcile.export import DiscrepancyFilter, count
from reconciler.schedule import heartbeat
from reconciler.storage.models import (
    AUDIT_LOG,
    DISCREPANCIES,
    INBOX_EVENTS,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
    SCHEDULER_HEARTBEATS,
    DiscrepancyStatus,
)
from reconciler.storage.queries import dead_lettered_events
from reconciler.storage.types import utcnow
from tests.dashboard_data import _event, seed


def _dead(engine: Engine, n: int, *, event_type: str = "invoice.bulk", prefix: str = "b") -> None:
    now = utcnow()
    with engine.begin() as conn:
        conn.execute(
            insert(INBOX_EVENTS),
            [
                _event(
                    "stripe",
                    f"evt_{prefix}_{i:05d}",
                    "dead",
                    now - timedelta(seconds=i),
                    event_type=event_type,
                    object_id=f"in_{prefix}_{i}",
                    last_error="PermanentError: refused",
                    error_class="permanent",
                )
                for i in range(n)
            ],
        )


def test_the_event_list_pages_by_keyset_with_its_total(engine: Engine) -> None:
    seed(engine)
    _dead(engine, 120)
    flt = events.EventFilter(sources=("stripe",))
    seen: list[str] = []
    after = None
    with engine.connect() as conn:
        total = conn.execute(
            select(func.count()).select_from(INBOX_EVENTS).where(INBOX_EVENTS.c.source == "stripe")
        ).scalar_one()
        while True:
            page = events.list_events(conn, flt, after=after, limit=50)
            assert page.total == total
            seen += [r["event_id"] for r in page.rows]
            if page.next_after is None:
                break
            after = page.next_after
    assert len(seen) == len(set(seen)) == total  # every event once, none skipped at page edges
    with engine.connect() as conn:
        times = [r["received_at"] for r in events.list_events(conn, flt, limit=500).rows]
    assert times == sorted(times, reverse=True)


def test_event_filters(engine: Engine) -> None:
    seed(engine)
    _dead(engine, 5, prefix="Mixed")
    with engine.connect() as conn:
        dead = events.list_events(conn, events.EventFilter(statuses=("dead",)), limit=100)
        assert {str(r["status"]) for r in dead.rows} == {"dead"} and dead.total >= 5
        prefixed = events.list_events(conn, events.EventFilter(id_prefix="EVT_mixed_00003"))
        assert [r["event_id"] for r in prefixed.rows] == ["evt_Mixed_00003"]
        typed = events.list_events(conn, events.EventFilter(types=("invoice.bulk",)))
        assert typed.total == 5
        assert "invoice.bulk" in events.event_types(conn, ("stripe",))
        assert events.in_inbox(conn, "stripe", "evt_Mixed_00001")
        assert not events.in_inbox(conn, "github", "evt_Mixed_00001")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=st.text(max_size=12))
@example(prefix="\x00evt")
@example(prefix="evt_a%")
@example(prefix="evt_a\\")
def test_a_hostile_id_prefix_matches_only_what_it_says(engine: Engine, prefix: str) -> None:
    """LIKE's wildcards and escapes in the box are plain characters; nothing errors."""
    with engine.begin() as conn:
        if not conn.execute(select(INBOX_EVENTS.c.id).limit(1)).first():
            conn.execute(
                insert(INBOX_EVENTS),
                [
                    _event("stripe", eid, "processed", utcnow())
                    for eid in ("evt_a%b", "evt_a_b", "evt_axb", "evt_a\\b", "EVT_Ä")
                ],
            )
    with engine.connect() as conn:
        page = events.list_events(conn, events.EventFilter(id_prefix=prefix), limit=100)
    wanted = prefix.replace("\x00", "").strip().lower()
    assert all(r["event_id"].lower().startswith(wanted) for r in page.rows)


def test_bulk_replay_of_a_selection_is_one_transaction_and_one_audit_entry(
    engine: Engine,
) -> None:
    seed(engine)
    _dead(engine, 1200)
    _dead(engine, 3, event_type="invoice.other", prefix="o")
    flt = dead_letters.DeadFilter(types=("invoice.bulk",))
    with engine.connect() as conn:
        assert dead_letters.count_dead(conn, flt) == 1200
        assert len(dead_letters.list_dead(conn, flt, limit=100)) == 100
    # a count that moved since it was confirmed: refused, nothing changed
    with pytest.raises(ActionRefusedError, match="now holds 1,200 events, not the 1,000"):
        actions.replay_dead_matching(engine, flt, actor="ada", reason="x", expected=1000)
    with pytest.raises(ActionRefusedError, match="reason"):
        actions.replay_dead_matching(engine, flt, actor="ada", reason=" ", expected=1200)
    seen: list[tuple[int, int]] = []
    message = actions.replay_dead_matching(
        engine,
        flt,
        actor="ada",
        reason="the plan exists now",
        expected=1200,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert message.startswith("1,200 events put back to pending (dead events with type")
    assert seen == [(500, 1200), (1000, 1200), (1200, 1200)]
    with engine.connect() as conn:
        by_status = dict(
            conn.execute(
                select(INBOX_EVENTS.c.event_type, func.count())
                .where(
                    INBOX_EVENTS.c.status == "pending", INBOX_EVENTS.c.event_type.like("invoice.%")
                )
                .group_by(INBOX_EVENTS.c.event_type)
            ).all()
        )
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.detail)
        ).all()
    assert by_status.get("invoice.bulk") == 1200 and "invoice.other" not in by_status
    [(action, actor, detail)] = audit
    assert (action, actor, detail["count"]) == ("replay.bulk", "ada", 1200)
    assert detail["selection"] == {"types": ["invoice.bulk"]}
    assert len(detail["events"]) == 1200 and json.dumps(detail)
    with pytest.raises(ActionRefusedError, match="nothing to replay"):
        actions.replay_dead_matching(engine, flt, actor="ada", reason="again", expected=0)


def test_bulk_resolve_by_filter_checks_the_confirmed_count(engine: Engine) -> None:
    seed(engine)
    flt = DiscrepancyFilter(sources=("stripe",), status="open")
    with engine.connect() as conn:
        n = count(conn, flt)
    assert n == 2
    with pytest.raises(ActionRefusedError, match="now matches 2 discrepancies, not the 1"):
        actions.set_status_matching(
            engine, flt, DiscrepancyStatus.RESOLVED, actor="ada", reason="x", expected=1
        )
    msg = actions.set_status_matching(
        engine, flt, DiscrepancyStatus.IGNORED, actor="ada", reason="billing migration", expected=2
    )
    assert msg == "2 discrepancies marked ignored (one audit entry)"
    with engine.connect() as conn:
        assert count(conn, flt) == 0
        audit = conn.execute(select(AUDIT_LOG.c.action, AUDIT_LOG.c.reason)).all()
    assert [tuple(a) for a in audit] == [("discrepancy.ignored.bulk", "billing migration")]


def test_health_facts_and_the_scheduler_heartbeat(engine: Engine) -> None:
    seed(engine)
    now = utcnow()
    with engine.connect() as conn:
        facts = health.health_facts(conn, now, ("stripe", "github", "shopify"), 3600)
    assert facts.dead >= 1 and facts.stuck >= 1
    assert facts.heartbeat is None and facts.last_delivery is not None
    assert set(facts.last_success) == {"stripe", "github", "shopify"}
    started = now - timedelta(minutes=5)
    heartbeat(engine, "host:1", started)
    heartbeat(engine, "host:1", started)  # moves the same row
    heartbeat(engine, "host:2", started)
    with engine.connect() as conn:
        rows = conn.execute(select(SCHEDULER_HEARTBEATS.c.owner)).scalars().all()
        facts = health.health_facts(conn, utcnow(), ("stripe",), 3600)
    assert sorted(rows) == ["host:1", "host:2"]
    assert facts.heartbeat is not None and utcnow() - facts.heartbeat < timedelta(seconds=30)
    levels = {s.label: s.level for s in health.judge(facts, 3600, 60)}
    assert levels["Scheduler"] is health.Level.OK and levels["Dead events"] is health.Level.BAD


def test_dead_lettered_counts_events_not_attempts(engine: Engine) -> None:
    seed(engine)
    now = utcnow()
    with engine.begin() as conn:
        event_id = conn.execute(
            select(INBOX_EVENTS.c.id).where(INBOX_EVENTS.c.source == "github").limit(1)
        ).scalar_one()
        base = dict(inbox_event_id=event_id, source="github", worker="w", outcome="dead")
        conn.execute(
            insert(PROCESSING_ATTEMPTS),
            [{**base, "attempt": i, "started_at": now, "finished_at": now} for i in (7, 8, 9)],
        )
        before = dead_lettered_events(conn, now - timedelta(hours=1), now + timedelta(seconds=1))
    with engine.connect() as conn:
        attempts = conn.execute(
            select(func.count()).where(
                PROCESSING_ATTEMPTS.c.source == "github",
                PROCESSING_ATTEMPTS.c.outcome == "dead",
                PROCESSING_ATTEMPTS.c.finished_at >= now - timedelta(hours=1),
            )
        ).scalar_one()
    assert attempts > before["github"]  # three dead attempts of one event count once


def test_an_objects_other_discrepancies(engine: Engine) -> None:
    seed(engine)
    with engine.begin() as conn:
        diverged = conn.execute(
            select(DISCREPANCIES.c.id).where(DISCREPANCIES.c.kind == "diverged")
        ).scalar_one()
        conn.execute(
            insert(DISCREPANCIES).values(
                source="stripe",
                kind="missing",
                record_key="evt_in2_paid",
                field="",
                event_id="evt_in2_paid",
                object_id="in_2",
                status="open",
                first_seen_at=utcnow(),
                last_seen_at=utcnow(),
                first_run_id="r",
                last_run_id="r",
            )
        )
        same = discrepancies.same_object(conn, "stripe", "in_2", diverged)
        assert [(str(r["kind"]), r["event_id"]) for r in same] == [("missing", "evt_in2_paid")]
        assert discrepancies.same_object(conn, "stripe", None, diverged) == []


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(needle=st.text(max_size=12))
@example(needle="\x00")
@example(needle="%")
def test_a_hostile_error_filter_counts_what_it_says(engine: Engine, needle: str) -> None:
    with engine.begin() as conn:
        if not conn.execute(select(INBOX_EVENTS.c.id).limit(1)).first():
            conn.execute(
                insert(INBOX_EVENTS),
                [
                    _event("stripe", f"evt_{i}", "dead", utcnow(), last_error=err)
                    for i, err in enumerate(("50% off refused", "a_b", "plain"))
                ],
            )
    flt = dead_letters.DeadFilter(error_contains=needle)
    with engine.connect() as conn:
        rows = dead_letters.list_dead(conn, flt)
        assert dead_letters.count_dead(conn, flt) == len(rows)
    wanted = needle.replace("\x00", "").strip().lower()
    assert all(wanted in (r["last_error"] or "").lower() for r in rows)


def test_a_source_whose_last_run_failed_is_red_with_its_errors_first_line(engine: Engine) -> None:
    """Two failed runs after a success: red "failed … ago" with the error's first line, not the
    age of the last success; a receive-only source has no reconciliation signal at all."""
    seed(engine)  # stripe succeeded 29 minutes ago (run-1)
    now = utcnow()
    base = {
        "source": "stripe",
        "trigger": "schedule",
        "status": "failed",
        "window_start": now - timedelta(days=1),
        "window_end": now,
        "records_scanned": 0,
        "counts": {},
    }
    with engine.begin() as conn:
        for i, minutes in enumerate((20, 10)):
            conn.execute(
                insert(RECON_RUNS).values(
                    **base,
                    run_id=f"failed-{i}",
                    started_at=now - timedelta(minutes=minutes),
                    finished_at=now - timedelta(minutes=minutes - 1),
                    error=f"\nsource stripe: the API answered 401 (run {i})\nTraceback: details",
                )
            )
    with engine.connect() as conn:
        facts = health.health_facts(
            conn, now, ("stripe", "github", "slack"), 3600, reconciled=("stripe", "github")
        )
    assert set(facts.last_success) == {"stripe", "github"}  # slack receives only
    assert facts.last_run["stripe"].status == "failed"
    assert facts.last_run["stripe"].error == "source stripe: the API answered 401 (run 1)"
    signals = {s.label: s for s in health.judge(facts, 3600, 60)}
    assert signals["Reconciled: stripe"].level is health.Level.BAD
    assert signals["Reconciled: stripe"].value == "failed 9 min ago"
    assert signals["Reconciled: stripe"].detail == "source stripe: the API answered 401 (run 1)"
    assert "Reconciled: slack" not in signals


def test_money_impact_follows_every_filter_of_the_page(engine: Engine) -> None:
    """The page's totals are its list's: kind, status, run and date narrow them, not only source."""
    from reconciler.reconcile.export import DiscrepancyFilter, money_impact

    seed(engine)  # stripe: missing 5.00 USD and diverged 12.00 EUR, both open, found by run-1
    with engine.connect() as conn:

        def totals(**kw: object) -> list[tuple[str, str, int]]:
            rows = money_impact(conn, flt=DiscrepancyFilter(**kw))  # type: ignore[arg-type]
            return [(r["kind"], r["currency"], r["amount"]) for r in rows]

        assert totals() == [("diverged", "eur", 1200), ("missing", "usd", 500)]
        assert totals(kinds=("missing",)) == [("missing", "usd", 500)]
        assert totals(sources=("shopify",)) == []
        assert totals(status="resolved") == []
        assert totals(run_id="another-run") == []
        assert totals(run_id="run-1", kinds=("diverged",)) == [("diverged", "eur", 1200)]
