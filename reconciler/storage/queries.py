"""Small read queries shared by floors that must not import each other (the receiver's metrics and
the dashboard's overview)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, func, select

from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    PROCESSING_ATTEMPTS,
    DiscrepancyStatus,
    EventStatus,
)
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


def failures_by_class(
    conn: Connection, start: datetime, end: datetime, sources: Sequence[str] = ()
) -> dict[str, dict[str, int]]:
    """Processing attempts that failed (retry due or dead) in ``[start, end)``, per source and error
    class (transient / ambiguous / permanent). The time index narrows the rows; only failures are
    read from the table."""
    a = PROCESSING_ATTEMPTS
    stmt = (
        select(a.c.source, a.c.error_class, func.count())
        .where(
            a.c.finished_at >= start,
            a.c.finished_at < end,
            a.c.outcome.in_((EventStatus.FAILED, EventStatus.DEAD)),
        )
        .group_by(a.c.source, a.c.error_class)
    )
    if sources:
        stmt = stmt.where(a.c.source.in_(sources))
    out: dict[str, dict[str, int]] = {}
    for source, error_class, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(error_class or "transient")] = int(n)
    return out


def waiting_for_a_person(
    conn: Connection, sources: Sequence[str] = ()
) -> dict[str, dict[str, int]]:
    """Dead events per source and error class: nothing retries them; a person must (an
    ``ambiguous`` one: find out whether its effect happened, then replay or resolve)."""
    e = INBOX_EVENTS
    stmt = (
        select(e.c.source, e.c.error_class, func.count())
        .where(e.c.status == EventStatus.DEAD)
        .group_by(e.c.source, e.c.error_class)
    )
    if sources:
        stmt = stmt.where(e.c.source.in_(sources))
    out: dict[str, dict[str, int]] = {}
    for source, error_class, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(error_class or "unknown")] = int(n)
    return out
