"""Worker throughput: events per second with a no-op handler, against a bare loop in the same run.

The bare loop is the floor of the same durable work with no framework: for each event, one
transaction on the raw driver that inserts its applied mark, marks it processed and records the
attempt. The worker adds
leased batch claims, the handler call and the outcome bookkeeping. Arms alternate over the rounds on
fresh copies of the same data; medians are reported. Goal: at least 1,000 events/s on SQLite.

    python bench/worker.py [--events 20000] [--rounds 3] [--no-postgres]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, Engine, func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, pg_schema, sqlite_db
from connectors.providers.stripe.signature import parse_stripe
from reconciler.config import parse_settings
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.storage.engine import make_engine
from reconciler.storage.models import INBOX_EVENTS, Base


def load(engine: Engine, n: int) -> None:
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    start = datetime.now(UTC) - timedelta(hours=1)
    for i in range(0, n, 1000):
        items = []
        for j in range(i, min(n, i + 1000)):
            body = json.dumps(
                {
                    "id": f"evt_{uuid.uuid4().hex}",
                    "object": "event",
                    "type": "invoice.paid",
                    "created": 1,
                    "data": {"object": {"id": f"in_{j}", "object": "invoice"}},
                }
            ).encode()
            items.append(
                IncomingEvent(
                    "stripe", parse_stripe({}, body), body, {}, start + timedelta(microseconds=j)
                )
            )
        with engine.begin() as conn:
            store_items(conn, items)


def noop(event: Event, conn: Connection) -> None:
    return None


def worker_arm(engine: Engine, url: str, n: int) -> float:
    load(engine, n)
    registry = HandlerRegistry()
    registry.register("stripe", "*", noop)
    settings = parse_settings({"database": {"url": url}, "worker": {"batch_size": 200}}, "<bench>")
    worker = Worker(engine, settings, registry)
    t = time.perf_counter()
    done = worker.drain()
    elapsed = time.perf_counter() - t
    assert done == n and worker.stats.outcomes == {"processed": n}, worker.stats
    return n / elapsed


def bare_arm(engine: Engine, n: int) -> float:
    """One raw-driver transaction per event: insert the applied mark, mark processed, insert the
    attempt (the worker's durable work since issue 44)."""
    load(engine, n)
    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(select(INBOX_EVENTS.c.id).order_by(INBOX_EVENTS.c.id))]
    raw = engine.raw_connection()
    cur = raw.cursor()
    mark = "?" if engine.dialect.name == "sqlite" else "%s"
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f") if engine.dialect.name == "sqlite" else now
    t = time.perf_counter()
    for event_id in ids:
        if engine.dialect.name == "sqlite":
            cur.execute("BEGIN IMMEDIATE")
        cur.execute(
            "INSERT INTO hookledger_applied (source, event_id, replay, applied_at, attempt, worker) "
            f"VALUES ('stripe', {mark}, 0, {mark}, 1, 'bare') ON CONFLICT DO NOTHING",
            (str(event_id), stamp),
        )
        cur.execute(
            f"UPDATE inbox_events SET status='processed', processed_at={mark} WHERE id={mark}",
            (stamp, event_id),
        )
        cur.execute(
            "INSERT INTO processing_attempts (inbox_event_id, source, attempt, worker, started_at, finished_at, outcome) "
            f"VALUES ({mark}, 'stripe', 1, 'bare', {mark}, {mark}, 'processed')",
            (event_id, stamp, stamp),
        )
        raw.commit() if engine.dialect.name != "sqlite" else cur.execute("COMMIT")
    elapsed = time.perf_counter() - t
    raw.close()
    with engine.connect() as conn:
        assert (
            conn.execute(
                select(func.count())
                .select_from(INBOX_EVENTS)
                .where(INBOX_EVENTS.c.status == "processed")
            ).scalar_one()
            == n
        )
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {"sqlite": sqlite_db(Path(tmp), "worker.db")}
        if not args.no_postgres:
            dbs["postgresql"] = pg_schema()
        for name, ctx in dbs.items():
            url = ctx.__enter__()
            engine = make_engine(url)
            try:
                worker, bare = [], []
                for r in range(args.rounds):
                    bare.append(bare_arm(engine, args.events))
                    worker.append(worker_arm(engine, url, args.events))
                    print(
                        f"{name} round {r + 1}: bare {bare[-1]:.0f}/s, worker {worker[-1]:.0f}/s",
                        flush=True,
                    )
                w, b = median(worker), median(bare)
                goal = "goal >= 1000/s" if name == "sqlite" else ""
                print(
                    f"{name}: worker {w:.0f} events/s, bare loop {b:.0f}/s, ratio {w / b:.2f}  {goal}\n",
                    flush=True,
                )
            finally:
                engine.dispose()
                ctx.__exit__(None, None, None)


if __name__ == "__main__":
    main()
