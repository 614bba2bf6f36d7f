"""The persisted connector position of each source (the ``cursors`` table).

A connector never writes it: the caller saves the cursor of a page in the same transaction as that
page's results, so a run that dies resumes exactly after the last page it committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from reconciler.storage.dialect import insert_for
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


# built once: a scan moves its cursor every page
_MOVE = (
    update(CURSORS)
    .where(CURSORS.c.source == bindparam("cursor_source"))
    .values(
        position=bindparam("position"),
        updated_at=bindparam("updated_at"),
        run_id=bindparam("run_id"),
    )
)


def save_cursor(
    conn: Connection, source: str, position: Mapping[str, Any], run_id: str | None = None
) -> None:
    """Move the source's cursor. An UPDATE first: it is what a scan does every page, and unlike
    the dialects' INSERT ... ON CONFLICT it is compiled once and cached by SQLAlchemy."""
    values = {"position": dict(position), "updated_at": utcnow(), "run_id": run_id}
    moved = conn.execute(_MOVE, {"cursor_source": source, **values})
    if not moved.rowcount:
        conn.execute(cursor_upsert(insert_for(conn, CURSORS).values(source=source, **values)))


def clear_cursor(conn: Connection, source: str) -> None:
    conn.execute(CURSORS.delete().where(CURSORS.c.source == source))
