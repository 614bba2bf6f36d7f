"""The persisted connector cursor, on SQLite and PostgreSQL: it moves with its page's data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, insert, select

from reconciler.cursors import clear_cursor, load_cursor, save_cursor
from reconciler.storage.models import AUDIT_LOG, CURSORS


def test_save_load_overwrite_clear(engine: Engine) -> None:
    with engine.begin() as conn:
        assert load_cursor(conn, "stripe") is None
        save_cursor(
            conn, "stripe", {"checkpoint": "evt_1", "checkpoint_created": 1700000000}, run_id="r1"
        )
    with engine.begin() as conn:
        assert load_cursor(conn, "stripe") == {
            "checkpoint": "evt_1",
            "checkpoint_created": 1700000000,
        }
        save_cursor(conn, "stripe", {"checkpoint": "evt_2"}, run_id="r2")
        save_cursor(conn, "github", {"stop_at": 12})
    with engine.connect() as conn:
        rows = {r.source: (r.position, r.run_id) for r in conn.execute(select(CURSORS))}
    assert rows == {"stripe": ({"checkpoint": "evt_2"}, "r2"), "github": ({"stop_at": 12}, None)}
    with engine.begin() as conn:
        clear_cursor(conn, "stripe")
        assert load_cursor(conn, "stripe") is None


def test_a_failed_page_rolls_the_cursor_back_with_its_data(engine: Engine) -> None:
    with engine.begin() as conn:
        save_cursor(conn, "stripe", {"checkpoint": "evt_1"})
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(insert(AUDIT_LOG).values(at=datetime.now(UTC), actor="t", action="page"))
        save_cursor(conn, "stripe", {"checkpoint": "evt_2"})
        raise RuntimeError("the page's processing failed")
    with engine.connect() as conn:
        assert load_cursor(conn, "stripe") == {"checkpoint": "evt_1"}
        assert conn.execute(select(AUDIT_LOG)).first() is None
