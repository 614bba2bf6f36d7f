"""Reading issues: a filtered page of them, one with a page of its members, and its trend (counts
per hour or day, computed in SQL). Values, not ORM objects, for the CLI and the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from reconciler.errors import NoSuchRecordError
from reconciler.states import IssueKind, IssueStatus
from reconciler.storage.models import INBOX_EVENTS, ISSUE_MEMBERS, ISSUES
from reconciler.storage.sql import bucket_expr


@dataclass(frozen=True)
class IssueRow:
    id: int
    kind: IssueKind
    source: str
    event_type: str
    signature: str
    sample_error: str | None
    first_seen: datetime
    last_seen: datetime
    count: int
    status: IssueStatus
    acknowledged_by: str | None
    acknowledged_at: datetime | None
    resolved_by: str | None
    resolved_at: datetime | None
    resolved_reason: str | None
    reopened_count: int

    def as_json(self) -> dict[str, Any]:
        return {
            k: (
                v.isoformat()
                if isinstance(v, datetime)
                else str(v)
                if k in ("kind", "status")
                else v
            )
            for k, v in self.__dict__.items()
        }


@dataclass(frozen=True)
class MemberRow:
    id: int
    item_id: int
    item: str  # event id, message key, run id or record key
    at: datetime
    state: str | None  # a dead event's current status (None for the other kinds)


@dataclass(frozen=True)
class IssueFilter:
    """Empty parts match every issue."""

    statuses: tuple[IssueStatus, ...] = ()
    sources: tuple[str, ...] = ()
    kinds: tuple[IssueKind, ...] = ()

    def where(self) -> list[Any]:
        i = ISSUES.c
        clauses: list[Any] = []
        if self.statuses:
            clauses.append(i.status.in_(self.statuses))
        if self.sources:
            clauses.append(i.source.in_(self.sources))
        if self.kinds:
            clauses.append(i.kind.in_(self.kinds))
        return clauses


def _row(mapping: Any) -> IssueRow:
    return IssueRow(**{name: mapping[name] for name in IssueRow.__dataclass_fields__})


def list_issues(
    conn: Connection,
    flt: IssueFilter = IssueFilter(),
    *,
    before: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> list[IssueRow]:
    """A page of issues, the most recently failing first; ``before``: the (last_seen, id) of the
    previous page's last issue."""
    i = ISSUES.c
    stmt = select(ISSUES).where(*flt.where())
    if before is not None:
        at, last = before
        stmt = stmt.where(or_(i.last_seen < at, and_(i.last_seen == at, i.id < last)))
    stmt = stmt.order_by(i.last_seen.desc(), i.id.desc()).limit(limit)
    return [_row(r) for r in conn.execute(stmt).mappings()]


def count_issues(conn: Connection, flt: IssueFilter = IssueFilter()) -> int:
    return int(
        conn.execute(select(func.count()).select_from(ISSUES).where(*flt.where())).scalar_one()
    )


def get_issue(conn: Connection, issue_id: int) -> IssueRow:
    found = conn.execute(select(ISSUES).where(ISSUES.c.id == issue_id)).mappings().first()
    if found is None:
        raise NoSuchRecordError(f"no issue {issue_id}")
    return _row(found)


def members(
    conn: Connection, issue_id: int, *, before_id: int | None = None, limit: int = 20
) -> list[MemberRow]:
    """A page of the issue's failures, newest first (keyset on the member id)."""
    m, e = ISSUE_MEMBERS, INBOX_EVENTS
    stmt = (
        select(m.c.id, m.c.item_id, m.c.item, m.c.at, e.c.status)
        .outerjoin(e, and_(m.c.kind == IssueKind.DEAD_EVENT, e.c.id == m.c.item_id))
        .where(m.c.issue_id == issue_id)
    )
    if before_id is not None:
        stmt = stmt.where(m.c.id < before_id)
    stmt = stmt.order_by(m.c.id.desc()).limit(limit)
    return [
        MemberRow(
            int(r.id), int(r.item_id), r.item, r.at, None if r.status is None else str(r.status)
        )
        for r in conn.execute(stmt)
    ]


def trend(
    conn: Connection, issue_id: int, now: datetime, *, width: timedelta, buckets: int
) -> list[tuple[datetime, int]]:
    """Failures per bucket of ``width`` over the last ``buckets`` of them, oldest first, empty
    buckets included; counted in SQL (GROUP BY the bucket)."""
    seconds = int(width.total_seconds())
    end = (int(now.timestamp()) // seconds + 1) * seconds  # the end of the bucket holding now
    start = end - seconds * buckets
    m = ISSUE_MEMBERS.c
    bucket = bucket_expr(m.at, seconds, conn.dialect).label("bucket")
    stmt = (
        select(bucket, func.count())
        .where(m.issue_id == issue_id, m.at >= datetime.fromtimestamp(start, UTC))
        .group_by(bucket)
    )
    counts = {int(b): int(n) for b, n in conn.execute(stmt)}
    first = start // seconds
    return [
        (datetime.fromtimestamp((first + k) * seconds, UTC), counts.get(first + k, 0))
        for k in range(buckets)
    ]


def open_count(conn: Connection, sources: Sequence[str] = ()) -> int:
    """Issues not resolved (open or acknowledged): what decides the dashboard's landing page."""
    flt = IssueFilter(statuses=(IssueStatus.OPEN, IssueStatus.ACKNOWLEDGED), sources=tuple(sources))
    return count_issues(conn, flt)
