"""The persisted connector position of each source (the ``cursors`` table).

A connector never writes it: the caller saves the cursor of a page in the same transaction as that
page's results, so a run that dies resumes exactly after the last page it committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select

from reconciler.storage.dialect import PrecompiledWrite, insert_for
from reconciler.storage.models import CURSORS
from reconciler.storage.types import utcnow


def load_cursor(conn: Connection, source: str) -> dict[str, Any] | None:
    position = conn.execute(
        select(CURSORS.c.position).where(CURSORS.c.source == source)
    ).scalar_one_or_none()
    return dict(position) if position is not None else None


def cursor_upsert(stmt: Any) -> Any:
    """A dialect's INSERT into cursors made an upsert by source."""
    return stmt.on_conflict_do_update(
        index_elements=["source"],
        set_={
            "position": stmt.excluded.position,
            "updated_at": stmt.excluded.updated_at,
            "run_id": stmt.excluded.run_id,
        },
    )


def _cursor_upsert(conn: Connection) -> Any:
    return cursor_upsert(insert_for(conn, CURSORS))


_CURSOR_WRITE = PrecompiledWrite(_cursor_upsert)


def save_cursor(
    conn: Connection, source: str, position: Mapping[str, Any], run_id: str | None = None
) -> None:
    row = {"source": source, "position": dict(position), "updated_at": utcnow(), "run_id": run_id}
    _CURSOR_WRITE.execute(conn, [row])


def clear_cursor(conn: Connection, source: str) -> None:
    conn.execute(CURSORS.delete().where(CURSORS.c.source == source))
