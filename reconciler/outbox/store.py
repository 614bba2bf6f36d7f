"""The outbox's statements: claiming due messages with a lease, recording each attempt's outcome,
and putting a dead message back to pending (an operator's replay, audited).

A claim is one ``UPDATE ... RETURNING`` per status over ``ix_outbox_status_next_attempt_at``: expired
leases first (their publisher stopped mid-attempt), then due retries, then new messages. PostgreSQL
adds ``FOR UPDATE SKIP LOCKED`` so that concurrent publishers never claim the same row; SQLite
serialises writers. A claim counts the attempt (a publisher claims only what it sends at once) and
sets ``next_attempt_at`` to the lease's expiry. Completion is conditional on still holding the lease.

A paused target's messages (a row in ``outbox_pauses``, ``pauses``) are not due: they stay as they
are until an operator resumes the target.

On a target with ``order_by_object``, a message is not due while an earlier message (lower id) of
the same object to the same target is unsent (pending, sending or failed); a dead one no longer
holds the object's later messages back: a person decides about it, the others go on.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    exists,
    func,
    insert,
    not_,
    select,
    true,
    update,
)

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.payment_text import mask_payment_text
from reconciler.states import OUTBOX_UNSENT
from reconciler.storage.dialect import skips_locked_rows
from reconciler.storage.models import (
    OUTBOX,
    OUTBOX_ATTEMPTS,
    OUTBOX_PAUSES,
    ErrorClass,
    OutboxStatus,
)
from reconciler.storage.types import utcnow

UNSENT = OUTBOX_UNSENT
CLAIM_ORDER = (OutboxStatus.SENDING, OutboxStatus.FAILED, OutboxStatus.PENDING)
REPLAYABLE = (OutboxStatus.DEAD, OutboxStatus.FAILED)


@dataclass(frozen=True)
class Claimed:
    """A message a publisher holds the lease on: the values it sends."""

    id: int
    target: str
    key: str
    payload: bytes
    content_type: str
    headers: dict[str, str]
    attempt: int  # this attempt's number (counted by the claim)
    correlation_id: str
    # the previous attempt's publisher stopped before recording an answer (its lease ran out)
    expired: bool = False


def _earlier_unsent() -> Any:
    """True for a message of an ordered target (``b_ordered``) that must wait for an earlier one
    of its object (see the module)."""
    earlier = OUTBOX.alias("earlier")
    blocked = exists(
        select(earlier.c.id).where(
            earlier.c.target == OUTBOX.c.target,
            earlier.c.object_key == OUTBOX.c.object_key,
            earlier.c.id < OUTBOX.c.id,
            earlier.c.status.in_(UNSENT),
        )
    )
    ordered = OUTBOX.c.target.in_(bindparam("b_ordered", expanding=True))
    return and_(ordered, OUTBOX.c.object_key.is_not(None), blocked)


def _paused() -> Any:
    """True for a message of a paused target."""
    return exists(select(OUTBOX_PAUSES.c.target).where(OUTBOX_PAUSES.c.target == OUTBOX.c.target))


@functools.cache
def _claim_statement(status: OutboxStatus, ordered: bool, skip_locked: bool) -> Any:
    """The claim of one status, built once: a statement built per call spends most of its time in
    SQLAlchemy's coercion and cache-key code (as the worker's do)."""
    due = (
        select(OUTBOX.c.id)
        .where(
            OUTBOX.c.status == status,
            OUTBOX.c.next_attempt_at <= bindparam("b_now"),
            OUTBOX.c.target.in_(bindparam("b_targets", expanding=True)),
            not_(_paused()),
            not_(_earlier_unsent()) if ordered else true(),
        )
        .order_by(OUTBOX.c.next_attempt_at, OUTBOX.c.id)
        .limit(bindparam("b_limit"))
    )
    if skip_locked:
        due = due.with_for_update(skip_locked=True)
    lease_until = bindparam("b_lease_until", type_=OUTBOX.c.lease_expires_at.type)
    return (
        update(OUTBOX)
        .where(OUTBOX.c.id.in_(due.scalar_subquery()))
        .values(
            status=OutboxStatus.SENDING,
            lease_owner=bindparam("b_owner"),
            lease_expires_at=lease_until,
            next_attempt_at=lease_until,
            attempts=OUTBOX.c.attempts + 1,
        )
        .returning(
            OUTBOX.c.id,
            OUTBOX.c.target,
            OUTBOX.c.key,
            OUTBOX.c.payload,
            OUTBOX.c.content_type,
            OUTBOX.c.headers,
            OUTBOX.c.attempts,
            OUTBOX.c.correlation_id,
        )
    )


def claim(
    conn: Connection,
    *,
    now: datetime,
    lease_until: datetime,
    owner: str,
    limit: int,
    targets: Collection[str],
    ordered: Collection[str] = (),
) -> list[Claimed]:
    """Up to ``limit`` due messages of these targets, leased to ``owner``, oldest due first."""
    out: list[Claimed] = []
    skip_locked = skips_locked_rows(conn)
    params: dict[str, Any] = {
        "b_now": now,
        "b_lease_until": lease_until,
        "b_owner": owner,
        "b_targets": list(targets),
    }
    if ordered:
        params["b_ordered"] = list(ordered)
    for status in CLAIM_ORDER:
        if len(out) >= limit or not targets:
            break
        stmt = _claim_statement(status, bool(ordered), skip_locked)
        rows = conn.execute(stmt, {**params, "b_limit": limit - len(out)})
        out.extend(
            Claimed(
                id=r.id,
                target=r.target,
                key=r.key,
                payload=r.payload,
                content_type=r.content_type,
                headers=dict(r.headers or {}),
                attempt=r.attempts,
                correlation_id=r.correlation_id,
                expired=status is OutboxStatus.SENDING,
            )
            for r in rows
        )
    return sorted(out, key=lambda c: c.id)


@dataclass(frozen=True)
class Outcome:
    """What an attempt came to, as it is stored."""

    status: OutboxStatus  # sent | failed | dead
    attempts: int  # the message's attempt count after it
    started_at: datetime
    finished_at: datetime
    status_code: int | None = None
    error_class: ErrorClass | None = None
    error: str | None = None
    next_attempt_at: datetime | None = None  # failed: when the retry is due


# Built once (the SET columns come from the parameters' names), as the claims are.
_FINISH = update(OUTBOX).where(
    OUTBOX.c.id == bindparam("b_id"),
    OUTBOX.c.lease_owner == bindparam("b_owner"),
    OUTBOX.c.status == OutboxStatus.SENDING,
)
_RECORD_ATTEMPT = insert(OUTBOX_ATTEMPTS)


def _masked(error: str | None) -> str | None:
    """A receiver's answer may quote the payload: card numbers and IBANs in it are masked."""
    return None if error is None else mask_payment_text(error)


def finish(conn: Connection, msg: Claimed, owner: str, outcome: Outcome) -> bool:
    """Record the outcome on the message, if ``owner`` still holds its lease (False: lost)."""
    sent = outcome.status is OutboxStatus.SENT
    result = conn.execute(
        _FINISH,
        {
            "b_id": msg.id,
            "b_owner": owner,
            "status": outcome.status,
            "attempts": outcome.attempts,
            "lease_owner": None,
            "lease_expires_at": None,
            # a sent or dead message is never due again; the column is not nullable
            "next_attempt_at": outcome.next_attempt_at or outcome.finished_at,
            "last_status_code": outcome.status_code,
            "error_class": None if sent else outcome.error_class,
            "last_error": None if sent else _masked(outcome.error),
            "dead_at": outcome.finished_at if outcome.status is OutboxStatus.DEAD else None,
            **({"sent_at": outcome.finished_at} if sent else {}),
        },
    )
    return result.rowcount == 1


def record_attempt(
    conn: Connection, msg: Claimed, publisher: str, attempt: int, outcome: Outcome
) -> None:
    conn.execute(
        _RECORD_ATTEMPT,
        {
            "message_id": msg.id,
            "target": msg.target,
            "attempt": attempt,
            "publisher": publisher[:128],
            "started_at": outcome.started_at,
            "finished_at": outcome.finished_at,
            "outcome": outcome.status,
            "error_class": outcome.error_class,
            "status_code": outcome.status_code,
            "error": _masked(outcome.error),
        },
    )


@dataclass(frozen=True)
class ReplayedMessage:
    id: int
    target: str
    key: str
    previous_status: str


def _requeued(now: datetime) -> dict[str, Any]:
    """A message's columns as a replay leaves them: pending now, attempts from zero."""
    return {
        "status": OutboxStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "queued_at": now,  # its age counts from the replay
        "lease_owner": None,
        "lease_expires_at": None,
        "error_class": None,
        "last_error": None,
        "dead_at": None,
    }


def dead_since_where(target: str, since: datetime) -> list[Any]:
    """The messages of one target that went dead at or after ``since`` (Svix's "recover since"):
    a message written last week that died an hour ago is among them (``ix_outbox_target_dead_at``)."""
    return [
        OUTBOX.c.target == target,
        OUTBOX.c.dead_at >= since,
        OUTBOX.c.status == OutboxStatus.DEAD,
    ]


def count_dead_since(conn: Connection, target: str, since: datetime) -> int:
    stmt = select(func.count()).select_from(OUTBOX).where(*dead_since_where(target, since))
    return int(conn.execute(stmt).scalar_one())


def recover_since(
    conn: Connection,
    target: str,
    since: datetime,
    *,
    actor: str,
    reason: str,
    expected: int,
    batch_size: int = 500,
) -> int:
    """Every message of ``target`` that went dead since ``since`` back to pending with its key, in
    the caller's transaction, with ONE audit entry; refused when the count is not ``expected``
    (what the operator confirmed: nothing uncounted is sent)."""
    total = count_dead_since(conn, target, since)
    if total == 0:
        raise ActionRefusedError(f"no dead message of target '{target}' since {since.isoformat()}")
    if total != expected:
        raise ActionRefusedError(
            f"target '{target}' now has {total:,} dead messages since {since.isoformat()}, not "
            f"the {expected:,} confirmed: count again and confirm"
        )
    ids: list[int] = []
    last = 0
    now = utcnow()
    while True:
        batch = list(
            conn.execute(
                select(OUTBOX.c.id)
                .where(*dead_since_where(target, since), OUTBOX.c.id > last)
                .order_by(OUTBOX.c.id)
                .limit(batch_size)
            ).scalars()
        )
        if not batch:
            break
        last = batch[-1]
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id.in_(batch), OUTBOX.c.status == OutboxStatus.DEAD)
            .values(**_requeued(now))
        )
        ids.extend(batch)
    record_audit(
        conn,
        actor=actor,
        action="outbox.recover",
        target=f"outbox:{target}"[:255],
        reason=reason,
        detail={"since": since.isoformat(), "count": len(ids), "ids": ids[:1000]},
    )
    return len(ids)


def replay_message(
    conn: Connection, message_id: int, *, actor: str, reason: str | None
) -> ReplayedMessage:
    """Put a dead (or failed) message back to pending with the SAME key, attempts from zero;
    audited. A receiver that saw an earlier attempt recognises the key."""
    row = conn.execute(
        select(
            OUTBOX.c.id,
            OUTBOX.c.target,
            OUTBOX.c.key,
            OUTBOX.c.status,
            OUTBOX.c.attempts,
            OUTBOX.c.last_error,
            OUTBOX.c.source,
            OUTBOX.c.event_id,
        ).where(OUTBOX.c.id == message_id)
    ).first()
    if row is None:
        raise NoSuchRecordError(f"no outbox message {message_id}")
    status = OutboxStatus(row.status)
    if status not in REPLAYABLE:
        raise ActionRefusedError(
            f"outbox message {message_id} is {status.value}: only dead or failed messages can be "
            "replayed"
        )
    done = conn.execute(
        update(OUTBOX)
        .where(OUTBOX.c.id == row.id, OUTBOX.c.status == status)
        .values(**_requeued(utcnow()))
    )
    if done.rowcount != 1:
        raise ActionRefusedError(f"outbox message {message_id} changed while replaying it")
    record_audit(
        conn,
        actor=actor,
        action="outbox.replay",
        source=row.source,
        event_id=row.event_id,
        target=f"outbox:{row.target}:{row.key}"[:255],
        reason=reason,
        detail={
            "message_id": row.id,
            "previous_status": status.value,
            "previous_attempts": row.attempts,
            "previous_error": (row.last_error or "")[:2000],
        },
    )
    return ReplayedMessage(row.id, row.target, row.key, status.value)


def replay_messages(
    conn: Connection, message_ids: Sequence[int], *, actor: str, reason: str
) -> int:
    """Replay each of these messages (all or none: one transaction, the caller's)."""
    for message_id in message_ids:
        replay_message(conn, message_id, actor=actor, reason=reason)
    return len(message_ids)
