"""Bring the issues up to date: read what failed since each kind's mark, a page at a time, into
groups (new ones opened, resolved ones reopened when their cause comes back), then resolve the
groups that went quiet and whose items no longer fail.

Each page and the mark that follows it commit in one transaction, so a crash re-reads at most a
page; the members' unique key makes a row read twice count once. Safe to run from several
processes at once (the scheduler, ``hookledger issues list``, the dashboard).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, Exists, and_, case, exists, literal, or_, select, update

from reconciler.audit import record_audit
from reconciler.issues.failures import READERS, Failure, Position
from reconciler.issues.signature import GroupKey, group_key
from reconciler.states import DiscrepancyStatus, EventStatus, IssueKind, IssueStatus, OutboxStatus
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    ISSUE_MARKS,
    ISSUE_MEMBERS,
    ISSUES,
    OUTBOX,
)

log = logging.getLogger(__name__)

PAGE_SIZE = 500
# rows that commit after later ones (concurrent transactions) are still read: each refresh starts
# this long before its mark; what it reads again is already a member and counts nothing
OVERLAP = timedelta(minutes=10)
DEFAULT_AUTO_RESOLVE_AFTER = timedelta(hours=24)
SYSTEM_ACTOR = "hookledger"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class RefreshReport:
    read: int = 0  # failures read (new ones and ones read again)
    added: int = 0  # members added to issues
    opened: list[int] = field(default_factory=list)  # new issues
    reopened: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)  # resolved because they went quiet


def refresh(
    engine: Engine,
    now: datetime,
    *,
    auto_resolve_after: timedelta = DEFAULT_AUTO_RESOLVE_AFTER,
    page_size: int = PAGE_SIZE,
) -> RefreshReport:
    report = RefreshReport()
    for kind, reader in READERS.items():
        with engine.connect() as conn:
            mark = _mark(conn, kind)
        position: Position = ((mark - OVERLAP) if mark else _EPOCH, 0)
        while True:
            with engine.begin() as conn:
                page = reader(conn, position, page_size)
                if not page:
                    break
                _group(conn, kind, page, report)
                position = max(f.position for f in page)
                _advance(conn, kind, position[0])
            if len(page) < page_size:
                break
    with engine.begin() as conn:
        report.resolved = resolve_quiet(conn, now, auto_resolve_after)
    return report


def _mark(conn: Connection, kind: IssueKind) -> datetime | None:
    found: datetime | None = conn.execute(
        select(ISSUE_MARKS.c.upto).where(ISSUE_MARKS.c.kind == kind)
    ).scalar_one_or_none()
    return found


def _advance(conn: Connection, kind: IssueKind, upto: datetime) -> None:
    stmt = insert_for(conn, ISSUE_MARKS).values(kind=kind, upto=upto)
    later = case(
        (ISSUE_MARKS.c.upto < stmt.excluded.upto, stmt.excluded.upto), else_=ISSUE_MARKS.c.upto
    )
    conn.execute(stmt.on_conflict_do_update(index_elements=["kind"], set_={"upto": later}))


def _group(conn: Connection, kind: IssueKind, page: list[Failure], report: RefreshReport) -> None:
    report.read += len(page)
    by_key: dict[GroupKey, list[Failure]] = defaultdict(list)
    for failure in page:
        by_key[group_key(kind, failure.source, failure.type, failure.error)].append(failure)
    for key, failures in sorted(by_key.items()):
        issue_id, created = _issue_for(conn, key, failures)
        added = _add_members(conn, issue_id, kind, failures)
        if not added:
            continue
        report.added += len(added)
        newest, oldest = max(f.at for f in added), min(f.at for f in added)
        sample = max(added, key=lambda f: (f.at, f.ref)).error
        if created:
            report.opened.append(issue_id)
        elif _reopen(conn, issue_id, newest):
            report.reopened.append(issue_id)
        i = ISSUES.c
        # typed literals: each value is bound through its column's type on either dialect
        newest_v = literal(newest, i.last_seen.type)
        oldest_v = literal(oldest, i.first_seen.type)
        conn.execute(
            update(ISSUES)
            .where(i.id == issue_id)
            .values(
                count=i.count + len(added),
                sample_error=case(
                    (i.last_seen <= newest_v, literal(sample, i.sample_error.type)),
                    else_=i.sample_error,
                ),
                last_seen=case((i.last_seen < newest_v, newest_v), else_=i.last_seen),
                first_seen=case((i.first_seen > oldest_v, oldest_v), else_=i.first_seen),
            )
        )


def _issue_for(conn: Connection, key: GroupKey, failures: list[Failure]) -> tuple[int, bool]:
    """The issue's id, and whether this call created it (one statement decides: ON CONFLICT)."""
    first = min(f.at for f in failures)
    inserted = conn.execute(
        insert_for(conn, ISSUES)
        .values(
            kind=key.kind,
            source=key.source,
            event_type=key.type,
            signature=key.signature,
            sample_error=None,
            first_seen=first,
            last_seen=first,
            count=0,
            status=IssueStatus.OPEN,
            reopened_count=0,
        )
        .on_conflict_do_nothing(index_elements=["kind", "source", "event_type", "signature"])
        .returning(ISSUES.c.id)
    ).scalar_one_or_none()
    if inserted is not None:
        return int(inserted), True
    i = ISSUES.c
    found = conn.execute(
        select(i.id).where(
            i.kind == key.kind,
            i.source == key.source,
            i.event_type == key.type,
            i.signature == key.signature,
        )
    ).scalar_one()
    return int(found), False


def _add_members(
    conn: Connection, issue_id: int, kind: IssueKind, failures: list[Failure]
) -> list[Failure]:
    """The failures that were not members yet (now members of ``issue_id``)."""
    rows = [
        {
            "issue_id": issue_id,
            "kind": kind,
            "ref": f.ref,
            "item_id": f.item_id,
            "item": f.item[:400],
            "at": f.at,
        }
        for f in failures
    ]
    stmt = (
        insert_for(conn, ISSUE_MEMBERS)
        .values(rows)
        .on_conflict_do_nothing(index_elements=["kind", "ref"])
        .returning(ISSUE_MEMBERS.c.ref)
    )
    new = set(conn.execute(stmt).scalars().all())
    return [f for f in failures if f.ref in new]


def _reopen(conn: Connection, issue_id: int, newest: datetime) -> bool:
    """A resolved issue whose cause came back (a failure after it was resolved): open again,
    audited. One conditional UPDATE, so concurrent refreshes reopen it once."""
    i = ISSUES.c
    reopened = conn.execute(
        update(ISSUES)
        .where(i.id == issue_id, i.status == IssueStatus.RESOLVED, i.resolved_at < newest)
        .values(
            status=IssueStatus.OPEN,
            reopened_count=i.reopened_count + 1,
            acknowledged_by=None,
            acknowledged_at=None,
            resolved_by=None,
            resolved_at=None,
            resolved_reason=None,
        )
    ).rowcount
    if reopened:
        record_audit(
            conn,
            actor=SYSTEM_ACTOR,
            action="issue.reopen",
            target=f"issue:{issue_id}",
            reason="the cause came back",
            detail={"issue": issue_id, "failed_at": newest.isoformat()},
        )
    return bool(reopened)


def still_failing(kind: IssueKind) -> Exists | None:
    """Whether an issue of ``kind`` has an item that still fails (SQL, correlated on the issue):
    a dead event not replayed, an outbox message not sent, a discrepancy still open."""
    m = ISSUE_MEMBERS
    mine = and_(m.c.issue_id == ISSUES.c.id, m.c.kind == kind)
    if kind is IssueKind.DEAD_EVENT:
        e = INBOX_EVENTS
        return exists().where(mine, e.c.id == m.c.item_id, e.c.status == EventStatus.DEAD)
    if kind is IssueKind.OUTBOX_FAILURE:
        o = OUTBOX
        return exists().where(
            mine, o.c.id == m.c.item_id, o.c.status.in_([OutboxStatus.DEAD, OutboxStatus.FAILED])
        )
    if kind is IssueKind.DISCREPANCY:
        d = DISCREPANCIES
        return exists().where(mine, d.c.id == m.c.item_id, d.c.status == DiscrepancyStatus.OPEN)
    return None  # a failed run is over: only time tells that its cause went away


def resolve_quiet(conn: Connection, now: datetime, quiet_for: timedelta) -> list[int]:
    """Resolve every open or acknowledged issue with nothing new for ``quiet_for`` and no item
    that still fails; each audited."""
    i = ISSUES.c
    blocked = [
        and_(i.kind == kind, cond)
        for kind in IssueKind
        if (cond := still_failing(kind)) is not None
    ]
    candidates = (
        select(i.id)
        .where(
            i.status.in_([IssueStatus.OPEN, IssueStatus.ACKNOWLEDGED]),
            i.last_seen < now - quiet_for,
            ~or_(*blocked),
        )
        .order_by(i.id)
        .limit(1000)
    )
    reason = f"nothing new failed for {quiet_for} and none of its items still fails"
    resolved = []
    for issue_id in conn.execute(candidates).scalars().all():
        done = conn.execute(
            update(ISSUES)
            .where(i.id == issue_id, i.status != IssueStatus.RESOLVED)
            .values(
                status=IssueStatus.RESOLVED,
                resolved_by=SYSTEM_ACTOR,
                resolved_at=now,
                resolved_reason=reason,
            )
        ).rowcount
        if done:
            record_audit(
                conn,
                actor=SYSTEM_ACTOR,
                action="issue.resolve",
                target=f"issue:{issue_id}",
                reason=reason,
                detail={"issue": issue_id, "automatic": True},
            )
            resolved.append(int(issue_id))
    return resolved
