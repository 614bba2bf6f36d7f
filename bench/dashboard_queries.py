"""The queries behind the dashboard's Overview (all sources, 7-day range) on a large inbox.

N inbox events over ``--days`` days (three sources), ``--deliveries`` deliveries per event, one
processing attempt per event, a queue snapshot per source per minute, 10k discrepancies and a run per
source per day, in SQLite and in PostgreSQL (``ANALYZE``d / ``VACUUM ANALYZE``d as a live database
would be). For each query ``load_overview`` sends, in one run, interleaved over the rounds:

- ``indexed``: the statement as the dashboard sends it (driver time);
- ``no index``: the same aggregate with its indexes unusable (SQLite ``NOT INDEXED``; PostgreSQL with
  index, index-only and bitmap scans switched off), the baseline of the ratio;

plus each figure's function as the page calls it (SQLAlchemy included) and the wall time of the whole
``load_overview`` call. The ratio compares the statements the dashboard sends (rollups and raw edges)
with the no-index aggregate, both as driver time. Goals (issue #5): total
under 150 ms, each query at most 0.2x its no-index baseline.

    python bench/dashboard_queries.py --events 1000000 --deliveries 3 --rounds 5 [--no-postgres]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, event, text

from bench.common import median, pg_schema, sqlite_db
from reconciler.ops import overview, rollup
from reconciler.ops.overview import load_overview
from reconciler.ops.timerange import TimeRange, choose_bucket
from reconciler.storage.engine import make_engine
from reconciler.storage.models import ROLLUP_MARKS
from reconciler.storage.types import utcnow

SOURCES = ("stripe", "github", "shopify")

SQLITE_FILL = [
    # n(i): 1..N; the i-th event is i * step seconds before now
    """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :n)
    INSERT INTO inbox_events (source, event_id, event_type, object_type, object_id, body, headers,
        received_at, queued_at, origin, status, attempts, next_attempt_at, correlation_id)
    SELECT CASE i % 3 WHEN 0 THEN 'stripe' WHEN 1 THEN 'github' ELSE 'shopify' END, 'e' || i,
        'invoice.paid', 'invoice', 'o' || (i / 2), x'7b7d', '{}',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * :step, 'unixepoch') || '.000000',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * :step, 'unixepoch') || '.000000', 'webhook',
        CASE WHEN i % 200 = 0 THEN 'dead' WHEN i % 200 = 1 AND i < 2000 THEN 'pending'
             ELSE 'processed' END, 1,
        CASE WHEN i % 200 = 1 AND i < 2000
             THEN strftime('%Y-%m-%d %H:%M:%S', :now - i * :step, 'unixepoch') || '.000000' END,
        'c' || i
    FROM n""",
    """INSERT INTO deliveries (source, event_id, delivery_id, received_at, outcome, status_code)
    SELECT e.source, e.event_id, e.event_id || '-' || k.k,
        strftime('%Y-%m-%d %H:%M:%S', unixepoch(e.received_at) + k.k * 30, 'unixepoch') || '.000000',
        CASE WHEN k.k = 0 THEN 'accepted' WHEN e.id % 97 = 0 THEN 'rejected' ELSE 'duplicate' END,
        CASE WHEN e.id % 97 = 0 AND k.k > 0 THEN 401 ELSE 200 END
    FROM inbox_events e,
        (WITH RECURSIVE m(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM m WHERE k < :d - 1)
         SELECT k FROM m) k""",
    """INSERT INTO processing_attempts (inbox_event_id, source, attempt, worker, started_at,
        finished_at, outcome)
    SELECT id, source, 1, 'w', received_at, received_at,
        CASE status WHEN 'dead' THEN 'dead' WHEN 'pending' THEN 'failed' ELSE 'processed' END
    FROM inbox_events""",
    """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :minutes)
    INSERT INTO queue_snapshots (at, source, unprocessed, oldest_age_seconds)
    SELECT strftime('%Y-%m-%d %H:%M:%S', :now - i * 60, 'unixepoch') || '.000000', s.s, i % 7,
        (i % 13) * 60.0
    FROM n, (SELECT 'stripe' AS s UNION ALL SELECT 'github' UNION ALL SELECT 'shopify') s""",
    """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
    INSERT INTO discrepancies (source, kind, record_key, field, first_seen_at, last_seen_at,
        first_run_id, last_run_id, status)
    SELECT CASE i % 3 WHEN 0 THEN 'stripe' WHEN 1 THEN 'github' ELSE 'shopify' END,
        CASE i % 4 WHEN 0 THEN 'missing' WHEN 1 THEN 'diverged' WHEN 2 THEN 'unapplied'
             ELSE 'orphaned' END, 'k' || i, '',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * 600, 'unixepoch') || '.000000',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * 600, 'unixepoch') || '.000000', 'r', 'r',
        CASE WHEN i % 20 = 0 THEN 'open' ELSE 'resolved' END
    FROM n""",
    """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :days)
    INSERT INTO recon_runs (run_id, source, trigger, status, started_at, finished_at,
        records_scanned, counts)
    SELECT 'run-' || i || '-' || s.s, s.s, 'schedule', 'succeeded',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * 86400, 'unixepoch') || '.000000',
        strftime('%Y-%m-%d %H:%M:%S', :now - i * 86400 + 60, 'unixepoch') || '.000000', 1000,
        '{"missing": 2, "diverged": 1}'
    FROM n, (SELECT 'stripe' AS s UNION ALL SELECT 'github' UNION ALL SELECT 'shopify') s""",
]

PG_FILL = [
    """INSERT INTO inbox_events (source, event_id, event_type, object_type, object_id, body, headers,
        received_at, queued_at, origin, status, attempts, next_attempt_at, correlation_id)
    SELECT (ARRAY['github', 'shopify', 'stripe'])[i % 3 + 1], 'e' || i, 'invoice.paid', 'invoice',
        'o' || (i / 2), '\\x7b7d', '{}', to_timestamp(:now - i * :step),
        to_timestamp(:now - i * :step), 'webhook',
        CASE WHEN i % 200 = 0 THEN 'dead' WHEN i % 200 = 1 AND i < 2000 THEN 'pending'
             ELSE 'processed' END, 1,
        CASE WHEN i % 200 = 1 AND i < 2000 THEN to_timestamp(:now - i * :step) END, 'c' || i
    FROM generate_series(1, :n) i""",
    """INSERT INTO deliveries (source, event_id, delivery_id, received_at, outcome, status_code)
    SELECT e.source, e.event_id, e.event_id || '-' || k, e.received_at + k * interval '30 seconds',
        CASE WHEN k = 0 THEN 'accepted' WHEN e.id % 97 = 0 THEN 'rejected' ELSE 'duplicate' END,
        CASE WHEN e.id % 97 = 0 AND k > 0 THEN 401 ELSE 200 END
    FROM inbox_events e, generate_series(0, :d - 1) k""",
    """INSERT INTO processing_attempts (inbox_event_id, source, attempt, worker, started_at,
        finished_at, outcome)
    SELECT id, source, 1, 'w', received_at, received_at,
        CASE status WHEN 'dead' THEN 'dead' WHEN 'pending' THEN 'failed' ELSE 'processed' END
    FROM inbox_events""",
    """INSERT INTO queue_snapshots (at, source, unprocessed, oldest_age_seconds)
    SELECT to_timestamp(:now - i * 60), s, i % 7, (i % 13) * 60.0
    FROM generate_series(1, :minutes) i, unnest(ARRAY['stripe', 'github', 'shopify']) s""",
    """INSERT INTO discrepancies (source, kind, record_key, field, first_seen_at, last_seen_at,
        first_run_id, last_run_id, status)
    SELECT (ARRAY['github', 'shopify', 'stripe'])[i % 3 + 1],
        (ARRAY['orphaned', 'missing', 'diverged', 'unapplied'])[i % 4 + 1], 'k' || i, '',
        to_timestamp(:now - i * 600), to_timestamp(:now - i * 600), 'r', 'r',
        CASE WHEN i % 20 = 0 THEN 'open' ELSE 'resolved' END
    FROM generate_series(1, 10000) i""",
    """INSERT INTO recon_runs (run_id, source, trigger, status, started_at, finished_at,
        records_scanned, counts)
    SELECT 'run-' || i || '-' || s, s, 'schedule', 'succeeded', to_timestamp(:now - i * 86400),
        to_timestamp(:now - i * 86400 + 60), 1000, '{"missing": 2, "diverged": 1}'
    FROM generate_series(1, :days) i, unnest(ARRAY['stripe', 'github', 'shopify']) s""",
]


def populate(engine: Engine, n: int, per_event: int, days: int) -> float:
    start = time.perf_counter()
    params = {
        "n": n,
        "d": per_event,
        "now": int(utcnow().timestamp()),
        "step": days * 86400 / n,
        "minutes": days * 1440,
        "days": days,
    }
    fill = SQLITE_FILL if engine.dialect.name == "sqlite" else PG_FILL
    with engine.begin() as conn:
        for sql in fill:
            used = {k: v for k, v in params.items() if f":{k}" in sql}
            conn.execute(text(sql), used)
    hour = (
        "strftime('%Y-%m-%d %H:00:00.000000', at)"
        if engine.dialect.name == "sqlite"
        else "to_timestamp(floor(extract(epoch from at) / 3600) * 3600)"
    )
    with engine.begin() as conn:  # what the snapshot job keeps as it records
        conn.execute(
            text(
                "INSERT INTO queue_snapshots_hourly (source, hour, max_unprocessed, "
                f"max_oldest_age_seconds) SELECT source, {hour}, max(unprocessed), "
                f"max(oldest_age_seconds) FROM queue_snapshots GROUP BY source, {hour}"
            )
        )
    rolled = time.perf_counter()
    rollup.roll_up(engine, utcnow())  # what the scheduler does every minute, here all at once
    print(f"  rollup of the whole history: {time.perf_counter() - rolled:.1f} s")
    with engine.connect() as conn:
        maintenance = "ANALYZE" if engine.dialect.name == "sqlite" else "VACUUM ANALYZE"
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text(maintenance))
    return time.perf_counter() - start


def figures(rng: TimeRange, now: Any) -> dict[str, Callable[[Any], Any]]:
    width = choose_bucket(rng)
    return {
        "deliveries": lambda c: overview.delivery_counts(c, rng, width, SOURCES),
        "processing": lambda c: overview.attempt_counts(c, rng, width, SOURCES),
        "queue now": lambda c: overview.queue_now(c, SOURCES),
        "queue history": lambda c: overview.snapshot_series(c, rng, width, SOURCES),
        "discrepancies": lambda c: overview.open_discrepancies(c, SOURCES),
        "runs": lambda c: overview.run_points(c, rng, SOURCES),
    }


def sent_statements(
    engine: Engine, fn: Callable[[Any], Any], *, rolled_up: bool = True
) -> list[tuple[str, Any]]:
    """The statements a figure sends: as the dashboard does (``rolled_up``), or when nothing is
    rolled up (the marks deleted, rolled back): the raw aggregate over the whole range."""
    statements: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "rollup_marks" not in statement:
            statements.append((statement, params))

    with engine.connect() as conn:
        if not rolled_up:
            conn.execute(ROLLUP_MARKS.delete())
        event.listen(engine, "before_cursor_execute", grab)
        try:
            fn(conn)
        finally:
            event.remove(engine, "before_cursor_execute", grab)
        conn.rollback()
    return statements


def _name(sql: str) -> str:
    return re.search(r"FROM (\w+)", sql).group(1)  # type: ignore[union-attr]


def _no_index_sqlite(sql: str) -> str:
    table = _name(sql)
    pinned = re.sub(r"INDEXED BY \w+", "NOT INDEXED", sql)
    return pinned if pinned != sql else sql.replace(f"FROM {table}", f"FROM {table} NOT INDEXED", 1)


def timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def run_statements(conn: Any, statements: list[tuple[str, Any]]) -> None:
    for sql, params in statements:
        conn.exec_driver_sql(sql, params).fetchall()


def run_without_index(conn: Any, statements: list[tuple[str, Any]]) -> None:
    if conn.dialect.name == "sqlite":
        for sql, params in statements:
            conn.exec_driver_sql(_no_index_sqlite(sql), params).fetchall()
        return
    with conn.begin():
        for knob in ("indexscan", "indexonlyscan", "bitmapscan"):
            conn.exec_driver_sql(f"SET LOCAL enable_{knob} = off")
        for sql, params in statements:
            conn.exec_driver_sql(sql, params).fetchall()


def measure(engine: Engine, rounds: int) -> dict[str, Any]:
    now = utcnow()
    rng = TimeRange(now - timedelta(days=7), now)
    figs = figures(rng, now)
    sent = {name: sent_statements(engine, fn) for name, fn in figs.items()}
    baseline = {name: sent_statements(engine, fn, rolled_up=False) for name, fn in figs.items()}
    walls: list[float] = []
    per: dict[str, dict[str, list[float]]] = {
        n: {"dashboard": [], "sql": [], "no index": []} for n in figs
    }
    with engine.connect() as conn:
        load_overview(conn, rng, choose_bucket(rng), now, SOURCES)  # warm up
        conn.rollback()
    for _ in range(rounds):
        with engine.connect() as conn:
            walls.append(timed(lambda: load_overview(conn, rng, choose_bucket(rng), now, SOURCES)))
            conn.rollback()
            for name, fn in figs.items():
                per[name]["dashboard"].append(timed(lambda: fn(conn)))  # noqa: B023
                conn.rollback()
                per[name]["sql"].append(timed(lambda: run_statements(conn, sent[name])))  # noqa: B023
                conn.rollback()
                per[name]["no index"].append(
                    timed(lambda: run_without_index(conn, baseline[name]))  # noqa: B023
                )
                conn.rollback()
    return {
        "wall": median(walls),
        "queries": {k: {arm: median(v) for arm, v in arms.items()} for k, arms in per.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--deliveries", type=int, default=3, help="deliveries per event")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dbs: dict[str, Any] = {"SQLite": sqlite_db(Path(tmp), "dash.db")}
        if not args.no_postgres:
            dbs["PostgreSQL"] = pg_schema()
        for label, ctx in dbs.items():
            with ctx as url:
                engine = make_engine(url)
                try:
                    took = populate(engine, args.events, args.deliveries, args.days)
                    print(
                        f"\n{label}: {args.events:,} events, {args.events * args.deliveries:,} "
                        f"deliveries over {args.days} days (populated in {took:.0f} s)"
                    )
                    result = measure(engine, args.rounds)
                finally:
                    engine.dispose()
            total = 0.0
            print(
                f"{'figure':<16} {'dashboard ms':>12} {'its SQL ms':>11} {'no index ms':>12} "
                f"{'ratio':>7}"
            )
            for name, arms in result["queries"].items():
                total += arms["dashboard"]
                ratio = arms["sql"] / arms["no index"]  # the same aggregate, driver time both
                print(
                    f"{name:<16} {arms['dashboard'] * 1000:>12.1f} {arms['sql'] * 1000:>11.2f} "
                    f"{arms['no index'] * 1000:>12.2f} "
                    f"{ratio:>7.3f}{'' if ratio <= 0.2 else '  (goal <= 0.2 not met)'}"
                )
            print(
                f"{'all six':<22} {total * 1000:>12.1f}   load_overview wall "
                f"{result['wall'] * 1000:.1f} ms (goal < 150)"
            )


if __name__ == "__main__":
    main()
