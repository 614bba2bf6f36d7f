"""Small read queries shared by floors that must not import each other (the receiver's metrics and
the dashboard's overview)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from reconciler.storage.models import DISCREPANCIES, DiscrepancyStatus
from reconciler.storage.sql import pin_index


def open_discrepancies(conn: Connection, sources: Sequence[str] = ()) -> dict[str, dict[str, int]]:
    """Open discrepancies per source and kind."""
    d = DISCREPANCIES
    stmt = (
        select(d.c.source, d.c.kind, func.count())
        .where(d.c.status == DiscrepancyStatus.OPEN)
        .group_by(d.c.source, d.c.kind)
    )
    if sources:
        stmt = stmt.where(d.c.source.in_(sources))
    stmt = pin_index(stmt, d, "ix_discrepancies_status_source_kind", conn.dialect)
    out: dict[str, dict[str, int]] = {}
    for source, kind, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(kind)] = int(n)
    return out
