"""Precompiled writes store exactly what SQLAlchemy's own insert stores, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, func, insert, select, text

from reconciler.storage.dialect import PrecompiledMultiRowWrite, PrecompiledWrite, insert_for
from reconciler.storage.models import QUEUE_SNAPSHOTS_HOURLY as T


def _build(conn):  # type: ignore[no-untyped-def]
    return insert_for(conn, T).on_conflict_do_nothing(index_elements=["source", "hour"])


def test_multi_row_and_single_row_writes_store_what_sqlalchemy_stores(engine: Engine) -> None:
    base = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    rows = [
        {
            "source": "s",
            "hour": base + timedelta(minutes=i, microseconds=7 * ((i * 5) % 11)),
            "max_unprocessed": i,
            "max_oldest_age_seconds": i / 7,
        }
        for i in range(1203)
    ]
    with engine.begin() as conn:
        conn.execute(insert(T), [dict(r, source="reference") for r in rows])
        PrecompiledMultiRowWrite(_build).execute(conn, rows)  # three chunks: 500, 500, 203
        PrecompiledWrite(_build).execute(conn, [dict(r, source="single") for r in rows[:3]])
        PrecompiledMultiRowWrite(_build).execute(conn, rows[:10])  # conflicts: nothing added
    with engine.connect() as conn:
        raw = {
            (s, n): (str(t), f)
            for s, t, n, f in conn.execute(
                text(
                    "SELECT source, CAST(hour AS TEXT), max_unprocessed, max_oldest_age_seconds "
                    "FROM queue_snapshots_hourly"
                )
            )
        }
        counts = dict(conn.execute(select(T.c.source, func.count()).group_by(T.c.source)).all())
        minimum = conn.execute(select(func.min(T.c.hour)).where(T.c.source == "s")).scalar()
    assert counts == {"reference": 1203, "s": 1203, "single": 3}
    for r in rows:  # byte for byte the representation SQLAlchemy's own insert produced
        assert raw[("s", r["max_unprocessed"])] == raw[("reference", r["max_unprocessed"])]
    for r in rows[:3]:
        assert raw[("single", r["max_unprocessed"])] == raw[("reference", r["max_unprocessed"])]
    assert minimum == min(r["hour"] for r in rows)
    with engine.begin() as conn:
        conn.execute(delete(T))


def test_driver_execute_runs_in_the_callers_transaction_and_wraps_errors(engine: Engine) -> None:
    import pytest
    from sqlalchemy.exc import DBAPIError

    from reconciler.storage.dialect import driver_execute

    mark = "?" if engine.dialect.name == "sqlite" else "%s"
    sql = f"INSERT INTO queue_snapshots_hourly (source, hour, max_unprocessed, max_oldest_age_seconds) VALUES ({mark}, {mark}, 1, 0)"
    hour = (
        "2026-11-30 10:00:00.000000"
        if engine.dialect.name == "sqlite"
        else datetime(2026, 11, 30, 10, tzinfo=UTC)
    )
    with engine.connect() as conn:
        tx = conn.begin()
        assert driver_execute(conn, sql, ("raw", hour)) == []  # a write returns no rows
        assert conn.execute(select(func.count()).where(T.c.source == "raw")).scalar() == 1
        tx.rollback()  # the raw statement was part of the transaction
        assert conn.execute(select(func.count()).where(T.c.source == "raw")).scalar() == 0
        rows = driver_execute(conn, "SELECT 1 + 1")
        assert [tuple(r) for r in rows] == [(2,)]
        conn.rollback()
        with pytest.raises(DBAPIError, match="no_such_table"):  # wrapped as exec_driver_sql does
            driver_execute(conn, "SELECT * FROM no_such_table")
