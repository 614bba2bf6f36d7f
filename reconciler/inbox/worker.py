"""The worker: claim due events with a lease, apply them, record the outcome.

Claiming (``inbox.claims``) takes expired leases first, then due retries, then new events; an event
whose worker died is due again when its lease runs out. Completion is guarded by ``lease_owner``: a
worker that lost its lease cannot overwrite the new owner's result, and its handler's writes roll
back.

The worker claims, dispatches each event (to its handler, a forward URL, or nowhere) and loops.
An attempt's start and its outcome are ``inbox.attempts``': counted when it starts (committed before
its handler runs, with the previous event's outcome where there is one), its outcome guarded by the
lease owner. Applying it, and committing its writes with the event's applied mark, is
``inbox.applying``'s. While the worker loops, its leases are renewed (``inbox.leases``), unless a
supervisor does that (``inbox.supervisor``, the ``hookledger worker`` command: each worker a
process that can be abandoned when it hangs).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import Engine

from reconciler.config import Settings
from reconciler.inbox.applied import ensure_applied_table
from reconciler.inbox.applying import Applier
from reconciler.inbox.attempts import Attempts, LeaseLost
from reconciler.inbox.claims import claim_batch
from reconciler.inbox.current import CurrentObjects
from reconciler.inbox.forward import forward_event, make_forward_client
from reconciler.inbox.handlers import (
    Business,
    Event,
    HandlerRegistry,
    default_registry,
)
from reconciler.inbox.ignored import IgnoredLog
from reconciler.inbox.leases import LeaseKeeper
from reconciler.inbox.write_lock import WriteLockWatch
from reconciler.process import lease_owner
from reconciler.storage.dialect import single_writer
from reconciler.storage.engine import SQLITE_BEGIN_OPTION, make_engine
from reconciler.storage.failures import HANDLER_STATEMENTS
from reconciler.storage.models import ErrorClass, EventStatus
from reconciler.storage.types import utcnow

if TYPE_CHECKING:
    from reconciler.inbox.worker_metrics import WorkerMetrics

log = logging.getLogger(__name__)


@dataclass
class WorkerStats:
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, status: EventStatus | None) -> None:
        key = status.value if status else "lease_lost"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1


class Worker:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        registry: HandlerRegistry | None = None,
        *,
        worker_id: str | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        metrics: WorkerMetrics | None = None,
        renew_leases: bool = True,
        on_attempt: Callable[[Event | None], None] | None = None,
    ) -> None:
        """``renew_leases``: run a lease keeper while looping (off where a supervisor renews them,
        ``inbox.supervisor``); ``on_attempt``: told each event as its attempt starts, and None when
        it ends (the supervisor's clock for ``handler_timeout_seconds``)."""
        self.engine = engine
        self.metrics = metrics  # shared by the workers of a process
        self._renew_leases = renew_leases
        self._on_attempt = on_attempt
        # A handler's statements keep SQLAlchemy's refusals, which its code may catch
        # (reconciler.storage.failures); on SQLite its transaction takes the write lock at its first
        # write (module doc).
        handlers = engine.execution_options(**{HANDLER_STATEMENTS: True})
        self._handler_engine = engine.execution_options(
            **{HANDLER_STATEMENTS: True, SQLITE_BEGIN_OPTION: "DEFERRED"}
        )
        self._locks = (
            WriteLockWatch(
                settings.worker.sqlite_lock_warn_seconds,
                metrics.write_lock.observe if metrics is not None else None,
            )
            if single_writer(engine)
            else None
        )
        self._ignored = IgnoredLog()
        self._current = CurrentObjects(settings)  # thin notifications' look-ups
        self.settings = settings
        self.cfg = settings.worker
        self.registry = registry if registry is not None else default_registry
        self.worker_id = worker_id or lease_owner()
        self._client = client
        self._clock = clock
        self.stats = WorkerStats()
        self._attempts = Attempts(engine, self.cfg, self.worker_id, clock, rng or random.Random())
        self._forward_urls = {
            s.name: s.forward_url or self.cfg.forward_url for s in settings.sources
        }
        url = settings.business.url
        self._business_engine = make_engine(url) if url else None
        if self._business_engine is not None:
            ensure_applied_table(self._business_engine)  # (hookledger init creates it too)
        business = (
            self._business_engine.execution_options(**{HANDLER_STATEMENTS: True})
            if self._business_engine is not None
            else None
        )
        self._business = Business(business or handlers)
        self._applier = Applier(
            handlers,
            self._handler_engine,
            business,
            self._business,
            self._attempts,
            locks=self._locks,
            targets=frozenset(t.name for t in settings.outbox.targets),
            max_payload_bytes=settings.outbox.max_payload_bytes,
            worker_id=self.worker_id,
            clock=clock,
        )

    # -- claiming ---------------------------------------------------------------------------------

    def claim(self, limit: int | None = None) -> list[Event]:
        now = self._clock()
        lease_until = now + timedelta(seconds=self.cfg.lease_seconds)
        with self.engine.begin() as conn:
            claimed, expired = claim_batch(
                conn, now, lease_until, limit or self.cfg.batch_size, self.worker_id
            )
        self._attempts.claimed(expired)
        self.stats.claimed += len(claimed)
        return claimed

    # -- processing -------------------------------------------------------------------------------

    def process(self, event: Event, then: Event | None = None) -> EventStatus | None:
        """Apply one claimed event; return its new status (None if the lease was lost).

        ``then``: the event processed next, whose attempt is counted with this one's outcome.
        """
        began = time.perf_counter()
        status = self._process(event, then)
        self.stats.add(status)
        if self.metrics is not None:
            self.metrics.observe(event.source, status, time.perf_counter() - began)
        return status

    def _process(self, event: Event, then: Event | None) -> EventStatus | None:
        self._attempts.next_is(then)
        started = self._clock()
        extra = {
            "source": event.source,
            "event_id": event.event_id,
            "correlation_id": event.correlation_id,
        }
        if lost := self._attempts.lost_to_a_hang(event):
            # the last allowed attempt started and its lease ran out: the worker died or hung
            err, hung = lost
            return self._attempts.fail(event, err, started, force_dead=True, hung=hung)
        try:
            event = self._attempts.begin(event)
            if self._on_attempt is not None:
                self._on_attempt(event)
            outcome = self._dispatch(event, started)
        except LeaseLost:
            log.warning(
                "lease lost; the attempt's writes rolled back, another worker owns the event now",
                extra=extra,
            )
            return None
        except Exception as exc:
            return self._attempts.fail(event, exc, started)
        finally:
            if self._on_attempt is not None:
                self._on_attempt(None)
        log.debug("event %s", outcome.value, extra=extra)
        return outcome

    def _dispatch(self, event: Event, started: datetime) -> EventStatus:
        """Run the event's handler (its ``verify`` first after an ambiguous attempt), else forward
        it, else ignore it; the outcome is written with the lease checked."""
        fn = self.registry.find(event.source, event.event_type)
        if fn is not None:
            event = self._current.of(event)
            verify = self.registry.verifier(event.source, event.event_type)
            if verify is not None and event.error_class == ErrorClass.AMBIGUOUS:
                self._applier.verify_then_apply(fn, verify, event, started)
            else:
                self._applier.apply(fn, event, started)
            return EventStatus.PROCESSED
        if target := self._forward_urls.get(event.source) or self.cfg.forward_url:
            forward_event(self._http(), target, event)
            self._attempts.done(event, EventStatus.PROCESSED, started)
            return EventStatus.PROCESSED
        self._attempts.done(event, EventStatus.IGNORED, started)
        self._ignored.note(event)
        return EventStatus.IGNORED

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = make_forward_client(self.cfg.forward_timeout_seconds)
        return self._client

    # -- loops ------------------------------------------------------------------------------------

    def run_once(self) -> int:
        """Claim one batch and process it; return how many events were claimed."""
        events = self.claim()
        self._process_batch(events)
        return len(events)

    def _process_batch(self, events: list[Event], stop: threading.Event | None = None) -> None:
        for i, event in enumerate(events):
            if stop is not None and stop.is_set():
                self.release(events[i:])
                return
            self.process(event, events[i + 1] if i + 1 < len(events) else None)

    def drain(self) -> int:
        """Process until nothing is due (``hookledger worker --once``)."""
        total = 0
        with self._keeping_leases():
            while n := self.run_once():
                total += n
        return total

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set; claimed events not started by then are released at once."""
        with self._keeping_leases():
            while not stop.is_set():
                try:
                    events = self.claim()
                    self._process_batch(events, stop)
                except Exception:
                    log.exception("worker loop error; backing off")
                    events = []
                if not events:
                    stop.wait(self.cfg.poll_interval_seconds)

    def _keeping_leases(self) -> Any:
        if not self._renew_leases:
            return nullcontext()
        keeper = LeaseKeeper(self.engine, self.cfg.lease_seconds, self._clock)
        return keeper.holding(lambda: (self.worker_id,))

    def release(self, events: list[Event]) -> None:
        """Give claimed, unstarted events back (shutdown): due now, their attempts unchanged."""
        self._attempts.release(events)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._current.close()
        if self._business_engine is not None:
            self._business_engine.dispose()
