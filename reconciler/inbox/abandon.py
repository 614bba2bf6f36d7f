"""Attempts that never came back: what the supervisor records of them.

An attempt the supervisor abandoned (past ``handler_timeout_seconds``) or whose worker process died
has no outcome of its own: its transactions rolled back with the process. :func:`abandon` gives it
one: an attempt ``interrupted``, retried with backoff as a transient failure, counted in the
event's ``hangs``; at ``[worker] max_hangs`` the event is dead with class ``hung`` (that attempt's
outcome ``dead``), so one event cannot take the workers in turn. A
worker stopped by a shutdown hung nothing: :func:`release_owner` gives its events back, due at once.
Both are conditional on the owner still holding the lease, as every outcome is.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, insert, select, update

from reconciler.config import WorkerSettings
from reconciler.errors import HandlerTimeout
from reconciler.inbox.retry import failure_of
from reconciler.storage.dialect import skips_locked_rows
from reconciler.storage.models import INBOX_EVENTS as EVENTS
from reconciler.storage.models import PROCESSING_ATTEMPTS as ATTEMPTS
from reconciler.storage.models import AttemptOutcome, EventStatus


@dataclass(frozen=True)
class Abandoned:
    source: str
    event_id: str
    attempt: int
    hangs: int
    status: EventStatus
    message: str


def abandon(
    conn: Connection,
    event: int,
    owner: str,
    *,
    reason: str,
    started_at: datetime,
    now: datetime,
    cfg: WorkerSettings,
    rng: random.Random,
) -> Abandoned | None:
    """Record the running attempt of inbox event ``event`` as one that never came back (None:
    ``owner`` no longer holds it)."""
    found = select(EVENTS.c.source, EVENTS.c.event_id, EVENTS.c.attempts, EVENTS.c.hangs).where(
        EVENTS.c.id == event,
        EVENTS.c.lease_owner == owner,
        EVENTS.c.status == EventStatus.PROCESSING,
    )
    if skips_locked_rows(conn):
        found = found.with_for_update()
    row = conn.execute(found).first()
    if row is None:
        return None
    hangs = row.hangs + 1
    hung = hangs >= cfg.max_hangs
    error = HandlerTimeout(
        f"hung: {hangs} attempts never came back ([worker] max_hangs = {cfg.max_hangs}); the "
        f"last: {reason}"
        if hung
        else reason
    )
    failure = failure_of(
        error,
        row.attempts,
        max_attempts=cfg.max_attempts,
        backoff_base=cfg.backoff_base_seconds,
        backoff_max=cfg.backoff_max_seconds,
        now=now,
        rng=rng,
        hung=hung,
    )
    conn.execute(
        update(EVENTS)
        .where(EVENTS.c.id == event, EVENTS.c.lease_owner == owner)
        .values(
            status=failure.status,
            error_class=failure.error_class,
            last_error=failure.message,
            next_attempt_at=failure.next_attempt_at,
            hangs=hangs,
            lease_owner=None,
            lease_expires_at=None,
            attempt_started_at=None,
        )
    )
    conn.execute(
        insert(ATTEMPTS).values(
            inbox_event_id=event,
            source=row.source,
            attempt=row.attempts,
            worker=owner[:128],
            started_at=started_at,
            finished_at=now,
            # interrupted, or dead (the row that dead-letters it: notifications count those)
            outcome=AttemptOutcome.DEAD
            if failure.status is EventStatus.DEAD
            else AttemptOutcome.INTERRUPTED,
            error_class=failure.error_class,
            error=failure.message,
        )
    )
    return Abandoned(row.source, row.event_id, row.attempts, hangs, failure.status, failure.message)


def release_owner(conn: Connection, owner: str, now: datetime) -> int:
    """Every event ``owner`` still holds, given back: pending, due now (its attempts kept)."""
    result = conn.execute(
        update(EVENTS)
        .where(EVENTS.c.lease_owner == owner, EVENTS.c.status == EventStatus.PROCESSING)
        .values(
            status=EventStatus.PENDING,
            lease_owner=None,
            lease_expires_at=None,
            attempt_started_at=None,
            next_attempt_at=now,
        )
    )
    return result.rowcount
