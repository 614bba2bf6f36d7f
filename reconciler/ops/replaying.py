"""Applying an event in process as a replay applies it: the handler (or its ``verify``) run in the
worker's transactions, attempts and retries included, with no inbox and no applied mark to stop
it. ``hookledger drill`` applies each delivery this way, and ``hookledger.testing`` too: a handler
that is right only because the inbox deduplicates shows it here.

``event.business`` is a business database the caller chose; ``conn`` (the worker's inbox
transaction) is a transaction on ``conn_engine``: the business one, as in production where the
business tables are the inbox's, or a database of its own as when ``[business] url`` is set.
``event.outbox`` records into a :class:`RecordedOutbox`: nothing is sent.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import StrEnum

from sqlalchemy import Engine

from reconciler.inbox.applied import BusinessSide
from reconciler.inbox.handlers import (
    Business,
    Event,
    Handler,
    HandlerRegistry,
    Verdict,
    Verify,
    verdict_of,
)
from reconciler.inbox.retry import classify_exception
from reconciler.outbox.writer import Message, Outbox
from reconciler.storage.engine import SQLITE_BEGIN_OPTION
from reconciler.storage.failures import HANDLER_STATEMENTS
from reconciler.storage.models import ErrorClass
from reconciler.storage.types import utcnow


class RecordedOutbox:
    """The messages handlers would send, by target and key, kept when the handler's transaction
    commits (as in production, one per key); nothing is written or sent."""

    def __init__(self) -> None:
        self.messages: dict[tuple[str, str], bytes] = {}
        self._pending: dict[tuple[str, str], bytes] = {}

    def write(self, msg: Message) -> bool:
        key = (msg.target, msg.key)
        if key in self.messages or key in self._pending:
            return False
        self._pending[key] = msg.payload
        return True

    def commit(self) -> None:
        self.messages.update(self._pending)
        self._pending.clear()

    def rollback(self) -> None:
        self._pending.clear()


class Status(StrEnum):
    PROCESSED = "processed"
    DEAD = "dead"  # failed permanently, or on every attempt allowed
    UNHANDLED = "unhandled"  # no handler for its source and type: the worker forwards or ignores it


@dataclass(frozen=True)
class Applied:
    """What became of one application of an event."""

    event: Event
    status: Status
    attempts: int
    error: BaseException | None = None  # the last attempt's failure, when it ended dead

    @property
    def ok(self) -> bool:
        return self.status is not Status.DEAD


class ReplayApplier:
    """Applies events as the module says; ``max_attempts`` as ``[worker] max_attempts``, with no
    wait between attempts; ``targets`` are the outbox targets a handler may name (None: any)."""

    def __init__(
        self,
        registry: HandlerRegistry,
        business: Engine,
        conn_engine: Engine,
        *,
        max_attempts: int,
        targets: Collection[str] | None,
        max_payload_bytes: int,
    ) -> None:
        self.registry = registry
        self.separate = business is not conn_engine  # the databases are apart
        # as the worker's: a handler's statements keep SQLAlchemy's refusals (storage.failures)
        self.business = Business(business.execution_options(**{HANDLER_STATEMENTS: True}))
        # as the worker's: the write lock is taken at the first write, not at BEGIN
        self.engine = conn_engine.execution_options(
            **{SQLITE_BEGIN_OPTION: "DEFERRED", HANDLER_STATEMENTS: True}
        )
        self.max_attempts = max_attempts
        self.targets = targets
        self.max_payload = max_payload_bytes
        self.outbox = RecordedOutbox()

    def _prepared(self, event: Event, attempt: int, side: BusinessSide) -> Event:
        outbox = Outbox(
            self.outbox.write,
            source=event.source,
            event_id=event.event_id,
            correlation_id=event.correlation_id,
            object_key=event.object_key,
            targets=self.targets,
            max_payload_bytes=self.max_payload,
        )
        return replace(
            event,
            attempt=attempt,
            business_db=self.business.for_attempt(side),
            outbox_writer=outbox,
            error_class=None,
        )

    def apply(self, event: Event) -> Applied:
        fn = self.registry.find(event.source, event.event_type)
        if fn is None:
            return Applied(event, Status.UNHANDLED, 0)
        verify = self.registry.verifier(event.source, event.event_type)
        previous: ErrorClass | None = None
        error: BaseException | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                if self._attempt(fn, verify, event, attempt, previous):
                    self.outbox.commit()
                    return Applied(event, Status.PROCESSED, attempt)
                previous = ErrorClass.AMBIGUOUS  # verify could not tell: asked again
                self.outbox.rollback()
            except Exception as exc:
                self.outbox.rollback()
                error = exc
                previous = classify_exception(exc)
                if previous is ErrorClass.PERMANENT:
                    return Applied(event, Status.DEAD, attempt, exc)
        return Applied(event, Status.DEAD, self.max_attempts, error)

    def _attempt(
        self,
        fn: Handler,
        verify: Verify | None,
        event: Event,
        attempt: int,
        previous: ErrorClass | None,
    ) -> bool:
        """One attempt as the worker makes it: every business block of the attempt commits when
        it succeeds, nothing of a failed one (``inbox.applied``). False: verify could not tell."""
        own = BusinessSide(self.business.engine) if self.separate else None
        try:
            with self.engine.begin() as conn:
                side = own or BusinessSide(self.business.engine, shared=conn)
                current = self._prepared(event, attempt, side)
                if previous is ErrorClass.AMBIGUOUS and verify is not None:
                    verdict = verdict_of(verify(current, conn))
                    if verdict is Verdict.UNKNOWN:
                        conn.rollback()
                        return False
                    if verdict is Verdict.DONE:
                        return True
                fn(current, conn)
                if own is not None:
                    own.commit(None, utcnow())
            return True
        finally:
            if own is not None:
                own.close()
