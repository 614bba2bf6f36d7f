"""A worker's attempts: each counted when it starts, and its outcome written, guarded by the lease.

An attempt counts when it starts, not when it is claimed: the event's ``attempts`` is raised and
committed before its handler runs. A worker that dies on one event of a batch therefore leaves the
batch's other events as they were, and only the event whose handler keeps killing the process
reaches ``max_attempts``.

A transaction of its own for each start costs a commit an event (a fifth to a third of the worker's
rate, docs/benchmarks.md), so a batch's next event is counted in the current event's outcome
transaction instead, and known started once that commits (:class:`Starts`).

Every outcome (processed, ignored, failed, dead) is one statement guarded by ``lease_owner``: a
worker that lost its lease cannot overwrite the new owner's result (:class:`LeaseLost`), and the
attempt's row in ``processing_attempts`` is written in the same transaction.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, Engine, bindparam, insert, update

from reconciler.config import WorkerSettings
from reconciler.errors import TransientError
from reconciler.inbox.claims import release_unstarted
from reconciler.inbox.handlers import Event
from reconciler.inbox.retry import failure_of
from reconciler.storage.models import INBOX_EVENTS as EVENTS
from reconciler.storage.models import PROCESSING_ATTEMPTS as ATTEMPTS
from reconciler.storage.models import ErrorClass, EventStatus

log = logging.getLogger(__name__)

# Built once: per-event statements built per call spend most of their time in SQLAlchemy's
# coercion and cache-key code.
_OWNED = (
    EVENTS.c.id == bindparam("b_id"),
    EVENTS.c.lease_owner == bindparam("b_owner"),
    EVENTS.c.status == EventStatus.PROCESSING,
)
_FINISH = update(EVENTS).where(*_OWNED)  # SET columns come from the parameter names
_START = (
    update(EVENTS)
    .where(*_OWNED)
    .values(attempts=EVENTS.c.attempts + 1, attempt_started_at=bindparam("b_now"))
    .returning(EVENTS.c.attempts)
)
_RECORD_ATTEMPT = insert(ATTEMPTS)

Count = Callable[[Connection, Event], "int | None"]  # the start statement: attempts, None if lost


class LeaseLost(Exception):
    """Another worker holds the event now: this attempt's writes rolled back."""


class Starts:
    """When each start is counted (see the module). ``count``: raise the event's attempts in
    ``conn`` and return them (None: the lease is lost); ``will_run``: whether the event will run
    when its turn comes (not when its last attempt's lease ran out)."""

    def __init__(self, count: Count, will_run: Callable[[Event], bool]) -> None:
        self._count, self._will_run = count, will_run
        self._counted: dict[int, int] = {}  # event id -> attempts, committed
        self._next: Event | None = None  # counted by the next outcome transaction
        self._pending: int | None = None  # its count, until that transaction commits

    def next_is(self, event: Event | None) -> None:
        """The event processed after the current one (None: the batch's last)."""
        self._next = event

    def start(self, engine: Engine, event: Event) -> int | None:
        """The event's attempts with this attempt counted (None: its lease is lost): counted
        already, or now in a transaction of its own (a batch's first event, or one whose
        predecessor's outcome never committed)."""
        attempts = self._counted.pop(event.id, None)
        if attempts is not None:
            return attempts
        with engine.begin() as conn:
            return self._count(conn, event)

    @contextlib.contextmanager
    def transaction(self, engine: Engine) -> Iterator[Connection]:
        """An outcome transaction: the next event's start it counted holds once it commits."""
        self._pending = None
        with engine.begin() as conn:
            yield conn
        if self._next is not None and self._pending is not None:
            self._counted[self._next.id] = self._pending
            self._next = None

    def count_next(self, conn: Connection) -> None:
        """In an outcome transaction: count the next event's start with it."""
        if self._next is not None and self._will_run(self._next):
            self._pending = self._count(conn, self._next)

    def unstarted(self, events: list[Event]) -> set[int]:
        """Of these released events, those whose start was counted (their count goes back)."""
        return {e.id for e in events if self._counted.pop(e.id, None) is not None}

    def __repr__(self) -> str:  # (for a debugger: what is counted)
        return f"Starts(counted={self._counted!r}, next={getattr(self._next, 'id', None)})"


class Attempts:
    """One worker's attempts on ``engine`` (the inbox's database) as ``worker_id``."""

    def __init__(
        self,
        engine: Engine,
        cfg: WorkerSettings,
        worker_id: str,
        clock: Callable[[], datetime],
        rng: random.Random,
    ) -> None:
        self.engine = engine
        self._cfg = cfg
        self.worker_id = worker_id
        self._clock = clock
        self._rng = rng
        self._expired: set[int] = set()  # claimed after their lease ran out
        self._starts = Starts(self._count, self._will_run)

    def claimed(self, expired: set[int]) -> None:
        """Of the events just claimed, those whose last lease had run out."""
        self._expired.update(expired)

    def lost_to_a_hang(self, event: Event) -> tuple[TransientError, bool] | None:
        """Why an event claimed after its lease ran out must not run again, and whether it hung;
        None when it may run (its worker died or hung before its allowed attempts were spent)."""
        if event.id not in self._expired:
            return None
        self._expired.discard(event.id)
        if event.attempt >= self._cfg.max_attempts:
            err = TransientError("lease expired after the last attempt (worker died or timed out)")
            return err, False
        if event.hangs >= self._cfg.max_hangs:
            err = TransientError(
                f"hung: {event.hangs} attempts never came back (timed out or their worker died; "
                f"[worker] max_hangs = {self._cfg.max_hangs}), the last one's lease ran out"
            )
            return err, True
        return None

    def begin(self, event: Event) -> Event:
        """The event with this attempt counted, committed before anything of it runs."""
        attempts = self._starts.start(self.engine, event)
        if attempts is None:
            raise LeaseLost
        return replace(event, attempt=attempts)

    def next_is(self, event: Event | None) -> None:
        """The event processed after the current one: its start is counted with this outcome."""
        self._starts.next_is(event)

    def transaction(
        self, engine: Engine | None = None
    ) -> contextlib.AbstractContextManager[Connection]:
        """A transaction that writes an outcome (on ``engine``: the handler's own, where it runs
        in that transaction)."""
        return self._starts.transaction(engine or self.engine)

    def finish(
        self,
        conn: Connection,
        event: Event,
        status: EventStatus,
        started: datetime,
        *,
        error_class: ErrorClass | None = None,
        error: str | None = None,
        next_attempt_at: datetime | None = None,
    ) -> None:
        """Write the attempt's outcome in ``conn``'s transaction, if the lease is still ours."""
        now = self._clock()
        done = status in (EventStatus.PROCESSED, EventStatus.IGNORED)
        result = conn.execute(
            _FINISH,
            {
                "b_id": event.id,
                "b_owner": self.worker_id,
                "status": status,
                "lease_owner": None,
                "lease_expires_at": None,
                "attempt_started_at": None,
                "next_attempt_at": next_attempt_at,
                "error_class": error_class,
                "last_error": error,
                **({"processed_at": now} if done else {}),
            },
        )
        if result.rowcount != 1:
            raise LeaseLost
        self._starts.count_next(conn)
        conn.execute(
            _RECORD_ATTEMPT,
            {
                "inbox_event_id": event.id,
                "source": event.source,
                "attempt": event.attempt,
                "worker": self.worker_id[:128],
                "started_at": started,
                "finished_at": now,
                "outcome": status,
                "error_class": error_class,
                "error": error,
            },
        )

    def done(self, event: Event, status: EventStatus, started: datetime) -> None:
        """An outcome with nothing else to commit (forwarded, ignored)."""
        with self.transaction() as conn:
            self.finish(conn, event, status, started)

    def fail(
        self,
        event: Event,
        exc: BaseException,
        started: datetime,
        *,
        force_dead: bool = False,
        hung: bool = False,
    ) -> EventStatus | None:
        """The attempt failed with ``exc``: retried with backoff or dead (``inbox.retry``); the
        new status, None if the lease was lost meanwhile."""
        cfg = self._cfg
        failure = failure_of(
            exc,
            event.attempt,
            max_attempts=cfg.max_attempts,
            backoff_base=cfg.backoff_base_seconds,
            backoff_max=cfg.backoff_max_seconds,
            now=self._clock(),
            rng=self._rng,
            force_dead=force_dead,
            hung=hung,
        )
        extra = {
            "source": event.source,
            "event_id": event.event_id,
            "correlation_id": event.correlation_id,
            "error_class": failure.error_class.value,
        }
        try:
            with self.transaction() as conn:
                self.finish(
                    conn,
                    event,
                    failure.status,
                    started,
                    error_class=failure.error_class,
                    error=failure.message,
                    next_attempt_at=failure.next_attempt_at,
                )
        except LeaseLost:
            log.warning("lease lost while recording a failure", extra=extra)
            return None
        log.warning(
            "event %s after attempt %d: %s",
            failure.status.value,
            event.attempt,
            exc.__class__.__name__,
            extra=extra,
        )
        return failure.status

    def release(self, events: list[Event]) -> None:
        """Give claimed, unstarted events back (shutdown): due now, their attempts unchanged."""
        if not events:
            return
        self._expired.difference_update(e.id for e in events)
        counted = self._starts.unstarted(events)  # their count goes back
        with self.engine.begin() as conn:
            for ids, given_back in (
                ([e.id for e in events if e.id not in counted], 0),
                (counted, 1),
            ):
                release_unstarted(conn, sorted(ids), self.worker_id, self._clock(), given_back)

    def _count(self, conn: Connection, event: Event) -> int | None:
        params = {"b_id": event.id, "b_owner": self.worker_id, "b_now": self._clock()}
        value = conn.execute(_START, params).scalar()
        return None if value is None else int(value)

    def _will_run(self, event: Event) -> bool:
        return not (event.id in self._expired and event.attempt >= self._cfg.max_attempts)
