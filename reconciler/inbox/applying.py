"""Applying one event: its handler (or ``verify``) run in the attempt's transactions, and what it
wrote committed with the event's applied mark and its processed status, fenced by the lease.

``reconciler.inbox.applied`` has the order of the commits when the business database is a separate
one; with one database everything is the inbox's one transaction. A worker whose lease was lost
meanwhile (another took the event) cannot commit: the fence is a statement of the committing
transaction, not a check before it.

On SQLite the handler's transaction begins deferred: the write lock is taken by its first write (or
by the status update after it), so a handler that waits before writing does not hold up the
receiver's commits.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, update

from reconciler.errors import AmbiguousError
from reconciler.inbox.applied import BusinessSide, Mark, insert_mark
from reconciler.inbox.attempts import Attempts, LeaseLost
from reconciler.inbox.handlers import Business, Event, Handler, Verdict, Verify, verdict_of
from reconciler.inbox.write_lock import WriteLockWatch
from reconciler.outbox.writer import Outbox, insert_message
from reconciler.storage.failures import DatabaseBusy
from reconciler.storage.models import INBOX_EVENTS as EVENTS
from reconciler.storage.models import EventStatus


class _AppliedBefore(Exception):
    """The event's applied mark was already in the inbox's database: its writes roll back."""


class _NotDone(Exception):
    """verify found the earlier attempt did not take effect (or cannot tell): nothing to commit."""


# a no-op write that checks the lease and locks the event's row for the rest of the transaction
_FENCE = (
    update(EVENTS)
    .where(
        EVENTS.c.id == bindparam("b_id"),
        EVENTS.c.lease_owner == bindparam("b_owner"),
        EVENTS.c.status == EventStatus.PROCESSING,
    )
    .values(lease_owner=EVENTS.c.lease_owner)
)


class Applier:
    """A worker's way of applying events (see the module)."""

    def __init__(
        self,
        engine: Engine,
        handler_engine: Engine,
        business_engine: Engine | None,
        business: Business,
        attempts: Attempts,
        *,
        locks: WriteLockWatch | None,
        targets: frozenset[str],
        max_payload_bytes: int,
        worker_id: str,
        clock: Callable[[], datetime],
    ) -> None:
        self.engine = engine
        self._handler_engine = handler_engine  # SQLite: BEGIN DEFERRED
        self._business_engine = business_engine  # None: the inbox's database
        self._business = business
        self._attempts = attempts  # counts each start, writes each outcome
        self._locks = locks
        self._targets = targets
        self._max_payload = max_payload_bytes
        self.worker_id = worker_id
        self._clock = clock

    def _bound(self, event: Event, conn: Connection, side: BusinessSide) -> Event:
        """The event as its handler sees it: ``event.business`` is the attempt's business side and
        ``event.outbox`` writes into ``conn``, so the handler's messages commit with the status
        update, or roll back with it."""
        outbox = Outbox(
            partial(insert_message, conn),
            source=event.source,
            event_id=event.event_id,
            correlation_id=event.correlation_id,
            object_key=event.object_key,
            targets=self._targets,
            max_payload_bytes=self._max_payload,
        )
        return replace(event, outbox_writer=outbox, business_db=self._business.for_attempt(side))

    def apply(self, fn: Handler, event: Event, started: datetime, note: str | None = None) -> None:
        try:
            try:
                self._attempt(fn, event, started, self._handler_engine, note)
            except DatabaseBusy:
                # A deferred SQLite transaction that read first cannot take the write lock once
                # another writer committed: run the handler again holding the lock from the start.
                self._attempt(fn, event, started, self.engine, note)
        except _AppliedBefore:
            with self._attempts.transaction() as conn:
                note = "applied by an earlier attempt (its mark is in hookledger_applied)"
                self._attempts.finish(conn, event, EventStatus.PROCESSED, started, error=note)

    def _attempt(
        self,
        fn: Handler,
        event: Event,
        started: datetime,
        engine: Engine,
        note: str | None = None,
    ) -> None:
        """Run ``fn`` and commit what it wrote with the event's applied mark and its processed
        status, fenced by the lease (``inbox.applied`` has the order of the commits)."""
        own = BusinessSide(self._business_engine) if self._business_engine is not None else None
        try:
            with (
                self._watch_lock(event.source, fn) as listen,
                self._attempts.transaction(engine) as conn,
            ):
                listen(conn)
                side = own or BusinessSide(self.engine, shared=conn)
                fn(self._bound(event, conn, side), conn)
                mark = Mark(
                    event.source, event.event_id, event.replay, event.attempt, self.worker_id
                )
                if own is None:
                    if not insert_mark(conn, mark, self._clock()):
                        raise _AppliedBefore
                elif own.opened:
                    self._fence(conn, event)  # holds the event's row until the inbox side commits
                    if not own.commit(mark, self._clock()):
                        note = "its business writes were applied by an earlier attempt: rolled back"
                self._attempts.finish(conn, event, EventStatus.PROCESSED, started, error=note)
        finally:
            if own is not None:
                own.close()

    def _fence(self, conn: Connection, event: Event) -> None:
        """Check the lease in ``conn``'s transaction and hold the event's row until it ends."""
        if conn.execute(_FENCE, {"b_id": event.id, "b_owner": self.worker_id}).rowcount != 1:
            raise LeaseLost

    def _watch_lock(self, source: str, fn: Handler) -> Any:
        """SQLite: time the handler transaction's hold on the write lock (reconciler.inbox.write_lock)."""
        if self._locks is None:
            return nullcontext(lambda conn: None)
        return self._locks.watch(source, fn)

    def verify_then_apply(
        self, fn: Handler, verify: Verify, event: Event, started: datetime
    ) -> None:
        """The previous attempt was ambiguous: ask ``verify`` whether it took effect. Done: processed
        (with its applied mark) in the same transaction, the handler not run again; not done: the
        handler runs; unknown (or verify failed): an ambiguous failure, retried with backoff, dead
        after max_attempts."""
        previous = event.attempt - 1
        verdict = Verdict.UNKNOWN

        def ask(bound: Event, conn: Connection) -> None:
            nonlocal verdict
            verdict = verdict_of(verify(bound, conn))
            if verdict is not Verdict.DONE:
                raise _NotDone  # nothing of this transaction is kept

        note = f"verify: attempt {previous} took effect; the handler was not run again"
        try:
            self.apply(ask, event, started, note)
        except LeaseLost:
            raise
        except _NotDone:
            pass
        except Exception as exc:
            raise AmbiguousError(
                f"verify could not tell whether attempt {previous} took effect "
                f"({exc.__class__.__name__}: {exc})"
            ) from exc
        if verdict is Verdict.UNKNOWN:
            raise AmbiguousError(f"verify could not tell whether attempt {previous} took effect")
        if verdict is Verdict.NOT_DONE:
            self.apply(fn, event, started)
