"""Waiting for the demo's pipeline to settle: deliveries received, the queue drained, the outbox
sent (each bounded in time, with a clear error past it)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, func, select

from reconciler.demo.day import SteppedClock
from reconciler.errors import HookledgerError
from reconciler.ops.overview import UNPROCESSED
from reconciler.storage.models import (
    INBOX_EVENTS,
    OUTBOX,
    EventStatus,
    OutboxStatus,
)

DUE_STATUSES = (EventStatus.PENDING, EventStatus.FAILED)


def wait_quiet(engine: Engine, clock: SteppedClock, timeout: float = 120.0) -> None:
    """Until nothing is being processed or sent and nothing is due at the clock's time."""
    deadline = time.monotonic() + timeout
    e, o = INBOX_EVENTS, OUTBOX
    while True:
        now = clock()
        with engine.connect() as conn:
            busy = (
                conn.execute(
                    select(func.count())
                    .select_from(e)
                    .where(
                        (e.c.status == EventStatus.PROCESSING)
                        | (e.c.status.in_(DUE_STATUSES) & (e.c.next_attempt_at <= now))
                    )
                ).scalar_one()
                + conn.execute(
                    select(func.count())
                    .select_from(o)
                    .where(
                        (o.c.status == OutboxStatus.SENDING)
                        | (
                            o.c.status.in_((OutboxStatus.PENDING, OutboxStatus.FAILED))
                            & (o.c.next_attempt_at <= now)
                        )
                    )
                ).scalar_one()
            )
        if not busy:
            return
        if time.monotonic() > deadline:
            raise HookledgerError(f"the worker and publisher did not catch up ({busy} due)")
        time.sleep(0.05)


def wait_drained(engine: Engine, timeout: float = 300.0) -> None:
    """Until no inbox event is left unprocessed."""
    due = select(func.count()).select_from(INBOX_EVENTS)
    left = due.where(INBOX_EVENTS.c.status.in_(UNPROCESSED))
    _until_none(engine, left, timeout, "the worker did not drain the inbox ({} events waiting)")


def wait_sent(engine: Engine, timeout: float = 120.0) -> None:
    """Until the publisher has sent every outbox message (the mailer's failures are retried)."""
    left = select(func.count()).select_from(OUTBOX).where(OUTBOX.c.status != OutboxStatus.SENT)
    _until_none(engine, left, timeout, "the publisher did not send the outbox ({} messages left)")


def _until_none(engine: Engine, count: Any, timeout: float, failure: str) -> None:
    """Until ``count`` reads 0; past ``timeout``, ``failure`` with the count left."""
    deadline = time.monotonic() + timeout
    while True:
        with engine.connect() as conn:
            left = conn.execute(count).scalar_one()
        if not left:
            return
        if time.monotonic() > deadline:
            raise HookledgerError(failure.format(left))
        time.sleep(0.2)
