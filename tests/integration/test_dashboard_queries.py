"""The dashboard's read models and actions (reconciler.ops) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, text

from reconciler.errors import ActionRefusedError
from reconciler.ops import dead_letters, discrepancies, events, overview, rollup, runs
from reconciler.ops import operator_actions as actions
from reconciler.ops.timerange import TimeRange, bucket_indexes, choose_bucket
from reconciler.reconcile.export import DiscrepancyFilter
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS, DiscrepancyStatus
from reconciler.storage.types import utcnow
from tests.conftest import make_settings
from tests.dashboard_data import seed

SOURCES = ("stripe", "github", "shopify")


def _overview(engine: Engine, span: timedelta) -> overview.Overview:
    now = utcnow()
    rng = TimeRange(now - span, now + timedelta(seconds=1))
    with engine.connect() as conn:
        return overview.load_overview(conn, rng, choose_bucket(rng), now, SOURCES)


def test_overview_kpis_match_the_seeded_history(engine: Engine) -> None:
    exp = seed(engine)
    ov = _overview(engine, timedelta(hours=24))
    got = {k.source: k for k in overview.kpis(ov, stuck_after_seconds=3600)}
    assert list(got) == list(SOURCES)  # configured order; a source without data is still listed
    for source in ("stripe", "github"):
        k = got[source]
        assert k.accepted == exp.accepted[source]
        assert k.duplicate == exp.duplicate[source]
        assert k.rejected == exp.rejected[source]
        assert k.processed == exp.processed[source]
        assert k.failed == exp.failed[source]
        assert k.dead == exp.dead_attempts[source]
        assert k.pending_now == exp.pending_now[source]
        assert k.open_discrepancies == exp.open_by_kind.get(source, {})
    assert got["stripe"].dead_now == 1
    assert got["stripe"].stuck and 7100 < (got["stripe"].oldest_age_seconds or 0) < 7300
    assert not got["github"].stuck and got["github"].oldest_age_seconds is None
    assert not got["shopify"].has_data
    # every bucket lies inside the range
    assert {c.bucket for c in ov.deliveries} <= set(bucket_indexes(ov.range, ov.width))
    assert len(ov.snapshots) >= 1 and max(p.oldest_age_seconds for p in ov.snapshots) > 6000
    assert [r.run_id for r in ov.runs] == ["run-1"]
    assert ov.runs[0].counts == {"missing": 1, "diverged": 1}


def test_the_range_decides_what_is_counted(engine: Engine) -> None:
    seed(engine)
    week = {k.source: k for k in overview.kpis(_overview(engine, timedelta(days=7)), 3600)}
    hour = {k.source: k for k in overview.kpis(_overview(engine, timedelta(minutes=5.5)), 3600)}
    assert week["github"].accepted == 3  # gh_old, three days ago
    assert hour["stripe"].accepted == 0 and hour["stripe"].duplicate == 2
    assert hour["stripe"].rejected == 1


def test_one_source_only(engine: Engine) -> None:
    seed(engine)
    now = utcnow()
    rng = TimeRange(now - timedelta(hours=1), now + timedelta(seconds=1))
    with engine.connect() as conn:
        ov = overview.load_overview(conn, rng, 60, now, ("github",))
    assert {c.source for c in ov.deliveries} == {"github"}
    assert ov.discrepancies == {}


@pytest.mark.parametrize(
    "query,expected",
    [
        ("evt_2", {("stripe", "evt_2")}),
        ("in_2", {("stripe", "evt_2")}),  # object id
        ("corr-gh_1", {("github", "gh_1")}),  # correlation id
        ("d2-evt_1", {("stripe", "evt_1")}),  # a provider delivery id
        ("nothing", set()),
    ],
)
def test_event_search(engine: Engine, query: str, expected: set[tuple[str, str]]) -> None:
    seed(engine)
    with engine.connect() as conn:
        found = events.search_events(conn, query, SOURCES)
    assert {(r["source"], r["event_id"]) for r in found} == expected


def test_event_timeline_orders_everything_that_happened(engine: Engine) -> None:
    from reconciler.inbox.replay import event_detail

    seed(engine)
    actions.replay(engine, "stripe", "evt_dead", actor="alice", reason="plan fixed")
    with engine.connect() as conn:
        tl = events.timeline(event_detail(conn, source="stripe", event_id="evt_dead"))
    kinds = [t.kind for t in tl]
    assert kinds[0] == "stored" and kinds.count("attempt") == 3 and kinds[-1] == "audit"
    assert "replay by alice: plan fixed" in tl[-1].summary
    assert [t.at for t in tl] == sorted(t.at for t in tl if t.at)


def test_dead_letters_group_and_replay_a_selection_atomically(engine: Engine) -> None:
    seed(engine)
    with engine.connect() as conn:
        groups = dead_letters.dead_groups(conn, SOURCES)
        assert [(g.source, g.event_type, g.count) for g in groups] == [
            ("stripe", "invoice.paid", 1)
        ]
        rows = dead_letters.dead_events(
            conn, source="stripe", event_type="invoice.paid", last_error=groups[0].last_error
        )
    assert [r["event_id"] for r in rows] == ["evt_dead"]
    # one of the two cannot be replayed (pending): nothing changes, nothing is audited
    with pytest.raises(ActionRefusedError):
        actions.replay_selection(
            engine, [("stripe", "evt_dead"), ("stripe", "evt_old")], actor="a", reason="r"
        )
    with engine.connect() as conn:
        status = conn.execute(
            select(INBOX_EVENTS.c.status).where(INBOX_EVENTS.c.event_id == "evt_dead")
        ).scalar_one()
        assert str(status) == "dead"
        assert conn.execute(select(func.count()).select_from(AUDIT_LOG)).scalar_one() == 0
    assert "1 events" in actions.replay_selection(
        engine, [("stripe", "evt_dead")], actor="alice", reason="fixed"
    )
    with engine.connect() as conn:
        assert dead_letters.dead_groups(conn, SOURCES) == []
        audit = conn.execute(
            select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.reason)
        ).all()
    assert [tuple(a) for a in audit] == [("alice", "replay", "fixed")]


def test_actions_require_a_reason(engine: Engine) -> None:
    seed(engine)
    with pytest.raises(ActionRefusedError, match="reason"):
        actions.replay(engine, "stripe", "evt_dead", actor="a", reason="  ")
    with pytest.raises(ActionRefusedError, match="reason"):
        actions.set_discrepancy_status(engine, 1, DiscrepancyStatus.IGNORED, actor="a", reason="")


def test_discrepancy_list_filters_sorts_and_diffs(engine: Engine) -> None:
    seed(engine)
    with engine.connect() as conn:
        everything = discrepancies.list_discrepancies(conn, DiscrepancyFilter(status="all"))
        assert len(everything) == 3
        opened = discrepancies.list_discrepancies(conn, DiscrepancyFilter())
        assert {r["kind"] for r in opened} == {"missing", "diverged"}
        only = discrepancies.list_discrepancies(conn, DiscrepancyFilter(kinds=("diverged",)))
        assert [r["object_id"] for r in only] == ["in_2"]
        by_amount = discrepancies.list_discrepancies(
            conn, DiscrepancyFilter(), sort="amount", descending=False
        )
        assert [r["amount"] for r in by_amount] == [500, 1200]
        with pytest.raises(ValueError, match="cannot sort"):
            discrepancies.list_discrepancies(conn, DiscrepancyFilter(), sort="secret; drop")
        row = discrepancies.discrepancy(conn, only[0]["id"])
        related = discrepancies.related_fields(conn, row["source"], row["record_key"])
    assert [r["field"] for r in related] == ["status"]
    diff = discrepancies.value_diff(row["source_value"], row["local_value"])
    assert [(d.path, d.source, d.local) for d in diff] == [("(value)", "paid", "open")]


def test_runs_and_next_schedule(engine: Engine) -> None:
    seed(engine)
    with engine.connect() as conn:
        history = runs.recent_runs(conn, SOURCES)
    assert [r["run_id"] for r in history] == ["run-1"]
    assert history[0]["duration_seconds"] == pytest.approx(60, abs=1)
    settings = make_settings(reconcile={"schedule": "0 2 * * *"})
    nxt = runs.next_scheduled_run(settings, datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    assert nxt is not None and nxt.astimezone(UTC) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


# -- plans: every Overview query reads through an index --------------------------------------------


def _captured(engine: Engine) -> list[tuple[str, Any]]:
    statements: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", grab)
    try:
        _overview(engine, timedelta(days=7))
    finally:
        event.remove(engine, "before_cursor_execute", grab)
    return statements


def _bulk_history_postgres(engine: Engine) -> None:
    """Enough rows, mostly outside the range and mostly processed, for the planner to prefer the
    indexes as it would on a live database (a tiny table is read whole whatever the indexes)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO inbox_events (source, event_id, body, headers, received_at, "
                "queued_at, origin, status, attempts, correlation_id) SELECT 'stripe', 'bulk_' || g, "
                "'\\x7b7d', '{}', now() - (g || ' minutes')::interval, "
                "now() - (g || ' minutes')::interval, 'webhook', 'processed', 1, 'c' || g "
                "FROM generate_series(1, 60000) g"
            )
        )
        conn.execute(
            text(
                "INSERT INTO deliveries (source, event_id, received_at, outcome, status_code) "
                "SELECT 'stripe', 'bulk_' || g, now() - (g || ' minutes')::interval, 'accepted', 200 "
                "FROM generate_series(1, 60000) g"
            )
        )
        conn.execute(
            text(
                "INSERT INTO processing_attempts (inbox_event_id, source, attempt, worker, "
                "started_at, finished_at, outcome) SELECT id, source, 1, 'w', received_at, "
                "received_at, 'processed' FROM inbox_events WHERE event_id LIKE 'bulk_%'"
            )
        )
        conn.execute(
            text(
                "INSERT INTO queue_snapshots (at, source, unprocessed, oldest_age_seconds) "
                "SELECT now() - (g || ' minutes')::interval, s, 0, 0 FROM generate_series(1, 60000) g, "
                "(VALUES ('stripe'), ('github'), ('shopify')) v(s)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO discrepancies (source, kind, record_key, field, first_seen_at, "
                "last_seen_at, first_run_id, last_run_id, status) SELECT 'stripe', 'missing', "
                "'k' || g, '', now(), now(), 'r', 'r', 'resolved' FROM generate_series(1, 20000) g"
            )
        )
        conn.execute(
            text(
                "INSERT INTO recon_runs (run_id, source, trigger, status, started_at, "
                "records_scanned, counts) SELECT 'bulk-' || g, 'stripe', 'schedule', 'succeeded', "
                "now() - (g || ' hours')::interval - interval '8 days', 0, '{}' "
                "FROM generate_series(1, 20000) g"
            )
        )
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))


PINNED = {
    "deliveries": "ix_deliveries_received_at_source_outcome",
    "processing_attempts": "ix_processing_attempts_finished_at_source_outcome",
    "inbox_events": "ix_inbox_events_status_next_attempt_at",
    "queue_snapshots": "ix_queue_snapshots_source_at_values",
    "discrepancies": "ix_discrepancies_status_source_kind",
    "recon_runs": "ix_recon_runs_source_started_at",
}


def test_every_overview_query_uses_an_index(engine: Engine) -> None:
    seed(engine)
    dialect = engine.dialect.name
    if dialect == "postgresql":
        _bulk_history_postgres(engine)
    rollup.roll_up(engine, utcnow())  # 7 days: whole hours from the rollups, edges raw
    statements = [s for s in _captured(engine) if s[0].lstrip().upper().startswith("SELECT")]

    def is_raw(sql: str) -> bool:
        return any(f"FROM {t} " in sql + " " for t in PINNED)

    n_raw = sum(1 for sql, _ in statements if is_raw(sql))
    assert n_raw >= 6 and len(statements) > n_raw
    with engine.connect() as conn:
        for sql, params in statements:
            if not is_raw(sql):  # rollup tables: a few rows per hour, read by primary key
                if dialect == "sqlite":
                    plan = " ".join(
                        str(r[-1])
                        for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
                    )
                    assert "INDEX" in plan or "PRIMARY KEY" in plan, (sql, plan)
                continue
            if dialect == "sqlite":
                plan = " ".join(
                    str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
                )
                pinned = PINNED[next(t for t in PINNED if f"FROM {t}" in sql)]
                assert f"INDEX {pinned}" in plan, (sql, plan)
                assert (
                    "SCAN deliveries " not in plan + " " and "SCAN inbox_events " not in plan + " "
                )
            else:
                raw = conn.connection.driver_connection
                assert raw is not None
                with raw.cursor() as cur:
                    cur.execute(f"EXPLAIN {sql}", params)
                    plan = " ".join(r[0] for r in cur.fetchall())
                assert "Index" in plan, (sql, plan)
                assert (
                    "Seq Scan on deliveries" not in plan and "Seq Scan on inbox_events" not in plan
                )


# -- rollups: the same figures as counting every row ------------------------------------------------


def _random_history(engine: Engine, now: datetime, seed_: int, n: int = 400) -> None:
    import random

    from sqlalchemy import insert

    from reconciler.storage.models import DELIVERIES, PROCESSING_ATTEMPTS, QUEUE_SNAPSHOTS

    rnd = random.Random(seed_)
    with engine.begin() as conn:
        ids = [
            r[0]
            for r in conn.execute(
                insert(INBOX_EVENTS).returning(INBOX_EVENTS.c.id),
                [
                    {
                        "source": rnd.choice(SOURCES),
                        "event_id": f"r{seed_}-{i}",
                        "body": b"{}",
                        "headers": {},
                        "received_at": now,
                        "origin": "webhook",
                        "status": "processed",
                        "attempts": 1,
                        "correlation_id": f"c{i}",
                    }
                    for i in range(n)
                ],
            )
        ]
        ago = [timedelta(seconds=rnd.uniform(0, 12 * 86400)) for _ in range(n)]
        conn.execute(
            insert(DELIVERIES),
            [
                {
                    "source": SOURCES[i % 3],
                    "event_id": None,
                    "delivery_id": None,
                    "received_at": now - ago[i],
                    "outcome": rnd.choice(["accepted", "duplicate", "rejected"]),
                    "status_code": 200,
                }
                for i in range(n)
            ],
        )
        conn.execute(
            insert(PROCESSING_ATTEMPTS),
            [
                {
                    "inbox_event_id": ids[i],
                    "source": SOURCES[i % 3],
                    "attempt": 1,
                    "worker": "w",
                    "started_at": now - ago[i],
                    "finished_at": now - ago[i],
                    "outcome": rnd.choice(["processed", "failed", "dead"]),
                }
                for i in range(n)
            ],
        )
        snaps = [
            {
                "at": now - ago[i],
                "source": SOURCES[i % 3],
                "unprocessed": rnd.randint(0, 50),
                "oldest_age_seconds": rnd.uniform(0, 9000),
            }
            for i in range(n)
        ]
        conn.execute(insert(QUEUE_SNAPSHOTS), snaps)
        rollup.record_snapshot_hourly(conn, snaps)


def _figures(engine: Engine, rng: TimeRange, width: int) -> tuple[Any, ...]:
    with engine.connect() as conn:
        return (
            overview.delivery_counts(conn, rng, width, SOURCES),
            overview.attempt_counts(conn, rng, width, SOURCES),
            overview.snapshot_series(conn, rng, width, SOURCES),
        )


def test_rollups_give_the_same_figures_as_raw_rows(engine: Engine) -> None:
    from reconciler.storage.models import HOURLY_COUNTS, ROLLUP_MARKS

    now = utcnow()
    _random_history(engine, now, 1)
    ranges = [
        TimeRange(now - timedelta(days=7), now),
        TimeRange(now - timedelta(days=30), now),
        TimeRange(now - timedelta(days=5, minutes=17), now - timedelta(days=1, minutes=3)),
    ]

    def raw_only() -> list[tuple[Any, ...]]:
        with engine.begin() as conn:
            conn.execute(ROLLUP_MARKS.delete())
        return [_figures(engine, r, choose_bucket(r)) for r in ranges]

    expected = raw_only()
    assert sum(c.n for c in expected[1][0]) == 400  # 30 days: every delivery
    # marks part-way (a run that stopped three days ago), then all the way; more rows in between
    assert rollup.roll_up(engine, now - timedelta(days=3)) > 1
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(HOURLY_COUNTS)).scalar_one() > 0
    assert [_figures(engine, r, choose_bucket(r)) for r in ranges] == expected
    rollup.roll_up(engine, now)
    assert [_figures(engine, r, choose_bucket(r)) for r in ranges] == expected
    _random_history(engine, now, 2)
    expected = raw_only()
    with engine.begin() as conn:  # the rollup restarts from scratch: counts must not double
        conn.execute(HOURLY_COUNTS.delete())
    rollup.roll_up(engine, now)
    rollup.roll_up(engine, now)  # idempotent: nothing left to roll
    assert [_figures(engine, r, choose_bucket(r)) for r in ranges] == expected


def test_split_range_is_exact_at_hour_boundaries() -> None:
    h = datetime(2026, 11, 30, 10, tzinfo=UTC)
    split = rollup.split_range(
        h - timedelta(minutes=30),
        h + timedelta(hours=5, minutes=5),
        h + timedelta(hours=3, minutes=20),
    )
    assert split.rolled == (h, h + timedelta(hours=3))
    assert split.raw == (
        (h - timedelta(minutes=30), h),
        (h + timedelta(hours=3), h + timedelta(hours=5, minutes=5)),
    )
    assert rollup.split_range(h, h + timedelta(minutes=50), h + timedelta(days=1)).rolled is None
    assert rollup.split_range(h, h + timedelta(hours=2), None).raw == ((h, h + timedelta(hours=2)),)
