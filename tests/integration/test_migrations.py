"""The shipped migrations create exactly the schema the models describe, on both dialects."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, Table, column, func, insert, make_url, select, table, text
from sqlalchemy.exc import OperationalError

from reconciler.reconcile.store import open_store
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import alembic_config, current_revision, head_revision, upgrade
from reconciler.storage.models import RECON_SEEN, Base
from reconciler.storage.testing import scratch_postgres_schema


def scan_start(conn: Any, source: str) -> Any:
    """The oldest record the source's current scan has seen."""
    window = open_store(conn, source, "-", datetime.now(UTC), dry_run=True).passes.window()[0]
    return window[0] if window else None


def test_migrations_match_models_and_rerun_is_safe(engine: Engine) -> None:
    upgrade(engine)  # a second run is a no-op
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
        )
    assert diff == []


def test_0005_keeps_the_ids_of_a_scan_in_progress_both_ways(engine: Engine) -> None:
    """A scan interrupted before an upgrade (or a downgrade) resumes with the ids it had seen."""
    at = datetime(2026, 11, 30, 10, 0, 0, 250000, tzinfo=UTC)
    rows = [
        {"source": "s", "event_id": "e1", "occurred_epoch": at.timestamp() + 60},
        {"source": "s", "event_id": "e1", "occurred_epoch": at.timestamp()},  # seen twice
        {"source": "s", "event_id": "e2", "occurred_epoch": None},
        {"source": "t", "event_id": "e1", "occurred_epoch": at.timestamp() - 60},
    ]
    command.downgrade(alembic_config(engine), "0005")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO recon_seen (source, event_id, occurred_epoch) VALUES (:source, :event_id, :occurred_epoch)"
            ),
            rows,
        )
    command.downgrade(alembic_config(engine), "0004")
    with engine.connect() as conn:
        old = conn.exec_driver_sql(
            "SELECT source, event_id FROM recon_seen ORDER BY source, event_id"
        ).all()
    assert [tuple(r) for r in old] == [("s", "e1"), ("s", "e2"), ("t", "e1")]
    upgrade(engine)
    with engine.connect() as conn:
        assert scan_start(conn, "s") == at
        assert scan_start(conn, "t") == datetime.fromtimestamp(at.timestamp() - 60, UTC)
        ids = conn.execute(select(RECON_SEEN.c.source, RECON_SEEN.c.event_ids)).all()
    assert sorted((s, i) for s, arr in ids for i in json.loads(arr)) == [
        ("s", "e1"),
        ("s", "e2"),
        ("t", "e1"),
    ]


def test_0006_packs_and_unpacks_the_seen_ids_of_a_scan_in_progress(engine: Engine) -> None:
    """One row per page on 0006, one row per id before it: both ways, nothing lost."""
    with engine.begin() as conn:
        conn.execute(
            insert(RECON_SEEN),
            [
                {"source": "s", "event_ids": json.dumps(["a", 'b"q', "c"]), "occurred_epoch": 5.0},
                {"source": "s", "event_ids": json.dumps(["a"]), "occurred_epoch": 3.0},
                {"source": "t", "event_ids": json.dumps(["é"]), "occurred_epoch": None},
            ],
        )
    command.downgrade(alembic_config(engine), "0005")
    with engine.connect() as conn:
        old = conn.exec_driver_sql("SELECT source, event_id, occurred_epoch FROM recon_seen").all()
    assert sorted(tuple(r) for r in old) == sorted(
        [("s", "a", 5.0), ("s", 'b"q', 5.0), ("s", "c", 5.0), ("s", "a", 3.0), ("t", "é", None)]
    )
    upgrade(engine)
    with engine.connect() as conn:
        assert scan_start(conn, "s") == datetime.fromtimestamp(3.0, UTC)
        new = conn.execute(
            select(RECON_SEEN.c.source, RECON_SEEN.c.event_ids, RECON_SEEN.c.occurred_epoch)
        ).all()
    assert sorted((s, i, at) for s, arr, at in new for i in json.loads(arr)) == sorted(
        tuple(r) for r in old
    )


def test_0007_keeps_a_page_of_seen_ids_inline_on_postgres(engine: Engine) -> None:
    """A page's row is not toasted on PostgreSQL (the table's toast_tuple_target); SQLite: no-op."""

    def reloptions() -> list[str] | None:
        with engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT reloptions FROM pg_class WHERE oid = 'recon_seen'::regclass"
            ).scalar_one()

    if engine.dialect.name != "postgresql":
        command.downgrade(alembic_config(engine), "0006")
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        return
    assert reloptions() == ["toast_tuple_target=8160"]
    page = json.dumps([f"evt_{i:024d}" for i in range(100)])
    with engine.begin() as conn:
        conn.execute(insert(RECON_SEEN).values(source="s", event_ids=page, occurred_epoch=None))
        inline, stored = conn.exec_driver_sql(
            "SELECT pg_column_size(event_ids), octet_length(event_ids) FROM recon_seen"
        ).one()
    assert stored == len(page) and inline >= len(page)  # neither compressed nor moved out of line
    command.downgrade(alembic_config(engine), "0006")
    assert reloptions() is None
    upgrade(engine)
    assert reloptions() == ["toast_tuple_target=8160"]


def _as_before(model: Table, *names: str) -> Any:
    """The table with only these columns, typed as the model types them: rows written as a schema
    older than a column's migration would (the model's defaults for newer columns left out)."""
    return table(model.name, *(column(n, model.c[n].type) for n in names))


def test_0008_gives_replayed_events_the_origin_of_their_first_receipt(engine: Engine) -> None:
    from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS

    command.downgrade(alembic_config(engine), "0007")
    now = datetime.now(UTC)
    base = {
        "source": "stripe",
        "body": b"{}",
        "headers": {},
        "received_at": now,
        "status": "pending",
        "attempts": 0,
        "correlation_id": "c",
    }
    old = _as_before(INBOX_EVENTS, *base, "event_id", "origin")
    with engine.begin() as conn:
        conn.execute(
            insert(old),
            [
                {**base, "event_id": "e_hook", "origin": "replay"},
                {**base, "event_id": "e_back", "origin": "replay"},
                {**base, "event_id": "e_none", "origin": "replay"},
                {**base, "event_id": "e_plain", "origin": "backfill"},
            ],
        )
        audit = {"at": now, "actor": "ops", "action": "replay", "source": "stripe"}
        conn.execute(
            insert(AUDIT_LOG),
            [
                {**audit, "event_id": "e_hook", "detail": {"previous_origin": "webhook"}},
                {**audit, "event_id": "e_back", "detail": {"previous_origin": "backfill"}},
                {**audit, "event_id": "e_back", "detail": {"previous_origin": "replay"}},
            ],
        )
    upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.origin)).all()
    origins = {r.event_id: r.origin for r in rows}
    assert {k: str(v) for k, v in origins.items()} == {
        "e_hook": "webhook",
        "e_back": "backfill",
        "e_none": "webhook",
        "e_plain": "backfill",
    }


def test_0016_starts_queued_at_at_receipt_and_at_write(engine: Engine) -> None:
    """Rows stored before 0016 became due when they arrived (the outbox's when written)."""
    from reconciler.storage.models import INBOX_EVENTS, OUTBOX

    command.downgrade(alembic_config(engine), "0015")
    at = datetime(2026, 12, 1, 3, 4, 5, 678000, tzinfo=UTC)
    event = {
        "source": "stripe",
        "event_id": "e1",
        "body": b"{}",
        "headers": {},
        "received_at": at,
        "origin": "webhook",
        "status": "pending",
        "attempts": 0,
        "correlation_id": "c",
    }
    message = {
        "target": "t",
        "key": "k",
        "payload": b"{}",
        "content_type": "application/json",
        "headers": {},
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": at,
        "correlation_id": "c",
        "created_at": at,
    }
    with engine.begin() as conn:
        conn.execute(insert(_as_before(INBOX_EVENTS, *event)), [event])
        conn.execute(insert(_as_before(OUTBOX, *message)), [message])
    upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(select(INBOX_EVENTS.c.queued_at)).scalar_one() == at
        assert conn.execute(select(OUTBOX.c.queued_at)).scalar_one() == at


def test_a_scratch_schema_is_dropped_even_past_a_leaked_transaction() -> None:
    """A test that leaks a connection inside a transaction on its private schema (a dashboard
    behind a frozen proxy did) must not hang the session's teardown on DROP SCHEMA."""
    base = os.environ.get("HOOKLEDGER_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("HOOKLEDGER_TEST_POSTGRES_URL is not set")
    scratch = scratch_postgres_schema(base, "hl_leak")
    url = scratch.__enter__()
    schema = str(make_url(url).query["options"]).rsplit("=", 1)[1]
    leaking = make_engine(url)
    leaked = leaking.connect()
    # an open transaction holds its lock on the table until it ends
    leaked.execute(select(func.count()).select_from(RECON_SEEN))
    started = time.monotonic()
    scratch.__exit__(None, None, None)
    assert time.monotonic() - started < 35  # the lock timeout, not pytest's 300 s
    admin = make_engine(base)
    with admin.connect() as conn:
        left = conn.execute(
            text("SELECT count(*) FROM pg_namespace WHERE nspname = :n"), {"n": schema}
        ).scalar()
    admin.dispose()
    assert left == 0
    with pytest.raises(OperationalError):
        leaked.execute(text("SELECT 1"))  # its session was ended, not left behind
    leaked.close()
    leaking.dispose()
