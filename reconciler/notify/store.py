"""The ``notifications`` table: a fact recorded once per target (unique target + key, so several
processes finding it record it once), claimed for an attempt by a conditional update (so two
senders never send one at once), and its outcome."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, update

from reconciler.notify.notices import Fact
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import NOTIFICATIONS, NOTIFY_TARGETS, NotificationStatus
from reconciler.storage.queries import register_notify_targets

n = NOTIFICATIONS
CLAIM_BATCH = 20  # notifications a target sends per dispatch at most (the rest wait for the next)


def target_since(conn: Connection, target: str, now: datetime) -> datetime:
    """When the target was first seen (now, the first time): it hears about what came after."""
    register_notify_targets(conn, [target], now)
    since: datetime = conn.execute(
        select(NOTIFY_TARGETS.c.since).where(NOTIFY_TARGETS.c.target == target)
    ).scalar_one()
    return since


def last_fact_at(conn: Connection, target: str, kind: str, subject: str) -> datetime | None:
    """The time of the newest fact of this kind and subject the target was told (or will be)."""
    found: datetime | None = conn.execute(
        select(func.max(n.c.fact_at)).where(
            n.c.target == target, n.c.kind == kind, n.c.subject == subject
        )
    ).scalar()
    return found


def known_keys(conn: Connection, target: str, keys: Iterable[str]) -> set[str]:
    wanted = list(keys)
    if not wanted:
        return set()
    return set(
        conn.execute(select(n.c.key).where(n.c.target == target, n.c.key.in_(wanted))).scalars()
    )


def record(conn: Connection, target: str, facts: Iterable[Fact], now: datetime) -> int:
    """The facts as pending notifications of the target; those it already has are left as they
    are (most of them, on each pass: looked up first, not inserted again). Returns how many were
    new."""
    facts = list(facts)
    known = known_keys(conn, target, (f.key[:255] for f in facts))
    added = 0
    for fact in facts:
        if fact.key[:255] in known:
            continue
        row = conn.execute(
            insert_for(conn, n)
            .values(
                target=target,
                key=fact.key[:255],
                kind=fact.kind,
                subject=fact.subject[:128],
                fact_at=fact.at,
                created_at=now,
                status=NotificationStatus.PENDING,
                attempts=0,
                next_attempt_at=now,
                payload=fact.data,
            )
            .on_conflict_do_nothing(index_elements=["target", "key"])
            .returning(n.c.id)
        ).first()
        added += row is not None
    return added


def claim_due(
    conn: Connection, target: str, now: datetime, lease: timedelta
) -> list[dict[str, Any]]:
    """The target's due notifications, oldest first, each claimed for one attempt: its next
    attempt moved past the lease (a sender that dies mid-way leaves it to be tried again)."""
    due = conn.execute(
        select(n.c.id, n.c.key, n.c.kind, n.c.subject, n.c.fact_at, n.c.attempts, n.c.payload)
        .where(
            n.c.target == target,
            n.c.status == NotificationStatus.PENDING,
            n.c.next_attempt_at <= now,
        )
        .order_by(n.c.id)
        .limit(CLAIM_BATCH)
    ).mappings()
    claimed = []
    for row in list(due):
        took = conn.execute(
            update(n)
            .where(
                n.c.id == row["id"],
                n.c.status == NotificationStatus.PENDING,
                n.c.next_attempt_at <= now,
            )
            .values(next_attempt_at=now + lease, attempts=n.c.attempts + 1)
        ).rowcount
        if took:
            claimed.append({**row, "attempts": row["attempts"] + 1})
    return claimed


def sent_within(conn: Connection, target: str, since: datetime) -> int:
    return int(
        conn.execute(
            select(func.count()).where(
                n.c.target == target, n.c.status == NotificationStatus.SENT, n.c.sent_at >= since
            )
        ).scalar_one()
    )


def held_back(conn: Connection, target: str) -> int:
    """Notifications the rate limit kept from the target since the last one it was sent."""
    last_sent = (
        select(func.max(n.c.sent_at))
        .where(n.c.target == target, n.c.status == NotificationStatus.SENT)
        .scalar_subquery()
    )
    return int(
        conn.execute(
            select(func.count()).where(
                n.c.target == target,
                n.c.status == NotificationStatus.SUPPRESSED,
                # a suppressed row's sent_at is when it was held back (see finish): at or after
                # the last one sent, since it is the limit those reached that holds it back
                (last_sent.is_(None)) | (n.c.sent_at >= last_sent),
            )
        ).scalar_one()
    )


def finish(
    conn: Connection,
    notification_id: int,
    status: NotificationStatus,
    now: datetime,
    *,
    error: str | None = None,
    retry_at: datetime | None = None,
) -> None:
    """The attempt's outcome: sent, suppressed (its time kept in sent_at, for :func:`held_back`),
    failed for good, or pending again at ``retry_at``."""
    values: dict[str, Any] = {"status": status, "last_error": error}
    if status in (NotificationStatus.SENT, NotificationStatus.SUPPRESSED):
        values.update(sent_at=now, next_attempt_at=None)
    elif status is NotificationStatus.PENDING:
        values.update(next_attempt_at=retry_at)
    else:
        values.update(next_attempt_at=None)
    conn.execute(update(n).where(n.c.id == notification_id).values(**values))


def unsent(conn: Connection) -> dict[str, dict[str, int]]:
    """Per target, how many are pending, failed and suppressed (for the CLI and doctor)."""
    out: dict[str, dict[str, int]] = {}
    rows = conn.execute(
        select(n.c.target, n.c.status, func.count())
        .where(n.c.status != NotificationStatus.SENT)
        .group_by(n.c.target, n.c.status)
    )
    for target, status, count in rows:
        out.setdefault(target, {})[str(status)] = int(count)
    return out
