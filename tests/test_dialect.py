"""Precompiled writes store exactly what SQLAlchemy's own insert stores, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, func, insert, select, text

from reconciler.storage.dialect import PrecompiledMultiRowWrite, PrecompiledWrite, insert_for
from reconciler.storage.models import RECON_SEEN


def _build(conn):  # type: ignore[no-untyped-def]
    return insert_for(conn, RECON_SEEN).on_conflict_do_nothing(
        index_elements=["source", "event_id"]
    )


def test_multi_row_and_single_row_writes_store_what_sqlalchemy_stores(engine: Engine) -> None:
    base = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    rows = [
        {
            "source": "s",
            "event_id": f"e{i}",
            "occurred_at": base + timedelta(minutes=7 * ((i * 5) % 11)),
        }
        for i in range(1203)
    ]
    with engine.begin() as conn:
        conn.execute(insert(RECON_SEEN), [dict(r, source="reference") for r in rows])
        PrecompiledMultiRowWrite(_build).execute(conn, rows)  # three chunks: 500, 500, 203
        PrecompiledWrite(_build).execute(conn, [dict(r, source="single") for r in rows[:3]])
        PrecompiledMultiRowWrite(_build).execute(conn, rows[:10])  # conflicts: nothing added
    with engine.connect() as conn:
        raw = {
            (s, e): str(t)
            for s, e, t in conn.execute(
                text("SELECT source, event_id, CAST(occurred_at AS TEXT) FROM recon_seen")
            )
        }
        counts = dict(
            conn.execute(
                select(RECON_SEEN.c.source, func.count()).group_by(RECON_SEEN.c.source)
            ).all()
        )
        minimum = conn.execute(
            select(func.min(RECON_SEEN.c.occurred_at)).where(RECON_SEEN.c.source == "s")
        ).scalar()
    assert counts == {"reference": 1203, "s": 1203, "single": 3}
    for r in rows:  # byte for byte the representation SQLAlchemy's own insert produced
        assert raw[("s", r["event_id"])] == raw[("reference", r["event_id"])]
    for r in rows[:3]:
        assert raw[("single", r["event_id"])] == raw[("reference", r["event_id"])]
    assert minimum == min(r["occurred_at"] for r in rows)
    with engine.begin() as conn:
        conn.execute(delete(RECON_SEEN))
