"""The publisher: claim due outbox messages with a lease, POST each to its target, record the outcome.

Each publisher thread claims as many messages as it sends at once (one) and records the attempt's
outcome in the message's row and in ``outbox_attempts``, in one transaction, only while it still
holds the lease; that transaction also claims its next message (one commit a message). A message is ``sent`` only after a 2xx. Failures are classified as the inbox's
forwarding classifies them (``reconciler.outgoing``): transient and ambiguous ones are retried with
the same ``Idempotency-Key`` after a full-jitter backoff (or the target's ``Retry-After``), up to the
target's ``max_attempts``; a permanent one, or the last attempt, makes the message ``dead`` with its
reason kept. A publisher killed mid-attempt leaves its message ``sending``: when the lease runs out
another publisher sends it again with the same key (the lost attempt is recorded as ambiguous), or
marks it dead if that was its last attempt. A paused target's messages are not claimed
(``store.claim``; ``hookledger outbox pause``): they wait, pending, until it is resumed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
from sqlalchemy import Connection, Engine

from connectors.retry import full_jitter
from reconciler.config import OutboxTargetSettings, Settings
from reconciler.outbox import store
from reconciler.outbox.request import USER_AGENT, TargetAuth, request_headers
from reconciler.outgoing import post
from reconciler.process import lease_owner
from reconciler.storage.models import ErrorClass, OutboxStatus
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)


def resolve_auth(
    target: OutboxTargetSettings, environ: Mapping[str, str] | None = None
) -> TargetAuth:
    """The target's secrets from the environment; a missing or malformed one is a ConfigError
    naming the target and the variable (the publisher refuses to start)."""
    return TargetAuth(target.signing_secrets(environ), target.bearer_token(environ))


def make_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """A publisher's HTTP client (each request gets its target's timeout)."""
    return httpx.Client(
        follow_redirects=False, headers={"User-Agent": USER_AGENT}, transport=transport
    )


@dataclass
class PublisherStats:
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, status: OutboxStatus | None) -> None:
        key = status.value if status else "lease_lost"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1


class Publisher:
    """One publishing loop (a thread of ``hookledger publish``) with an HTTP client of its own
    (``client`` when given, else one it makes and :meth:`close` closes): httpcore's sync connection
    pool, shared by threads, lost connections without closing them (a ``ResourceWarning`` per
    socket in the demo), and one sender per pool has no such race."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        client: httpx.Client | None = None,
        *,
        auth: Mapping[str, TargetAuth] | None = None,
        publisher_id: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.cfg = settings.outbox
        self.targets = {t.name: t for t in self.cfg.targets}
        self.ordered = [t.name for t in self.cfg.targets if t.order_by_object]
        self.auth = (
            dict(auth)
            if auth is not None
            else {n: resolve_auth(t) for n, t in self.targets.items()}
        )
        self._own_client = client is None
        self.client = client if client is not None else make_client()
        self.publisher_id = publisher_id or lease_owner()
        self._clock = clock
        self._rng = rng or random.Random()
        self.stats = PublisherStats()
        self._next: store.Claimed | None = None  # claimed with the previous outcome
        self._looping = False

    def claim(self) -> store.Claimed | None:
        with self.engine.begin() as conn:
            return self._claim(conn)

    def _claim(self, conn: Connection) -> store.Claimed | None:
        now = self._clock()
        claimed = store.claim(
            conn,
            now=now,
            lease_until=now + timedelta(seconds=self.cfg.lease_seconds),
            owner=self.publisher_id,
            limit=1,
            targets=list(self.targets),
            ordered=self.ordered,
        )
        self.stats.claimed += len(claimed)
        return claimed[0] if claimed else None

    def deliver(self, msg: store.Claimed) -> OutboxStatus | None:
        """One attempt at a claimed message; its new status (None: the lease was lost)."""
        target = self.targets[msg.target]
        started = self._clock()
        attempts: list[tuple[str, store.Outcome]] = []  # rows for outbox_attempts
        if msg.expired:
            previous = msg.attempt - 1
            note = (
                f"attempt {previous}: the lease expired before its publisher recorded an answer "
                "(it stopped; the message may have been sent)"
            )
            if previous >= target.max_attempts:
                dead = store.Outcome(
                    OutboxStatus.DEAD,
                    previous,
                    started,
                    started,
                    None,
                    ErrorClass.AMBIGUOUS,
                    f"{note}; it was the last of {target.max_attempts}",
                )
                return self._record(msg, dead, [("(lease expired)", dead)])
            lost = store.Outcome(
                OutboxStatus.FAILED, previous, started, started, None, ErrorClass.AMBIGUOUS, note
            )
            attempts.append(("(lease expired)", lost))
        outcome = self._send(msg, target, started)
        attempts.append((self.publisher_id, outcome))
        return self._record(msg, outcome, attempts)

    def _send(
        self, msg: store.Claimed, target: OutboxTargetSettings, started: datetime
    ) -> store.Outcome:
        headers = request_headers(
            key=msg.key,
            correlation_id=msg.correlation_id,
            content_type=msg.content_type,
            headers=msg.headers,
            body=msg.payload,
            attempt=msg.attempt,
            auth=self.auth[msg.target],
            timestamp=int(time.time()),
        )
        answer = post(self.client, target.url, msg.payload, headers, timeout=target.timeout_seconds)
        finished = self._clock()
        if answer.ok:
            return store.Outcome(
                OutboxStatus.SENT, msg.attempt, started, finished, answer.status_code
            )
        dead = answer.error_class is ErrorClass.PERMANENT or msg.attempt >= target.max_attempts
        next_at = None
        if not dead:
            delay = full_jitter(
                msg.attempt, self.cfg.backoff_base_seconds, self.cfg.backoff_max_seconds, self._rng
            )
            next_at = finished + timedelta(seconds=max(delay, answer.retry_after or 0.0))
        return store.Outcome(
            OutboxStatus.DEAD if dead else OutboxStatus.FAILED,
            msg.attempt,
            started,
            finished,
            answer.status_code,
            answer.error_class,
            answer.message[:8000],
            next_at,
        )

    def _record(
        self,
        msg: store.Claimed,
        outcome: store.Outcome,
        attempts: list[tuple[str, store.Outcome]],
    ) -> OutboxStatus | None:
        """The outcome on the message and its attempt rows, in one transaction, if the lease holds;
        in a loop, the next message is claimed in the same transaction (one commit a message)."""
        extra = {"target": msg.target, "correlation_id": msg.correlation_id}
        with self.engine.begin() as conn:
            if not store.finish(conn, msg, self.publisher_id, outcome):
                log.warning(
                    "outbox message %d: lease lost; another publisher owns it now",
                    msg.id,
                    extra=extra,
                )
                self.stats.add(None)
                return None
            for publisher, attempt in attempts:
                store.record_attempt(conn, msg, publisher, attempt.attempts, attempt)
            if self._looping:
                self._next = self._claim(conn)
        if outcome.status is not OutboxStatus.SENT:
            log.warning(
                "outbox message %d %s after attempt %d (%s)",
                msg.id,
                outcome.status.value,
                outcome.attempts,
                outcome.error_class.value if outcome.error_class else "-",
                extra=extra,
            )
        self.stats.add(outcome.status)
        return outcome.status

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    # -- loops ------------------------------------------------------------------------------------

    def run_once(self) -> int:
        """Send one due message (the one claimed with the previous outcome, else one claimed now);
        how many were sent (0 or 1). The next is claimed with this one's outcome."""
        msg, self._next = self._next or self.claim(), None
        if msg is None:
            return 0
        self._looping = True
        try:
            self.deliver(msg)
        finally:
            self._looping = False
        return 1

    def finish_held(self) -> None:
        """Send the message claimed with the last outcome, if any, and claim no other (stop)."""
        msg, self._next = self._next, None
        if msg is not None:
            self.deliver(msg)

    def drain(self) -> int:
        """Send until nothing is due (``hookledger publish --once``)."""
        total = 0
        while self.run_once():
            total += 1
        return total

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set; what it holds is sent first (at most two messages)."""
        while not stop.is_set():
            try:
                sent = self.run_once()
            except Exception:
                log.exception("publisher loop error; backing off")
                self._next, sent = None, 0  # a held message's lease runs out: it is sent again
            if not sent:
                stop.wait(self.cfg.poll_interval_seconds)
        self.finish_held()


def publishers(engine: Engine, settings: Settings, concurrency: int) -> list[Publisher]:
    """``concurrency`` publishers, each with its own client, sharing the targets' secrets (resolved
    once: a missing one stops here, before anything is claimed). Close each when done."""
    auth = {t.name: resolve_auth(t) for t in settings.outbox.targets}
    return [Publisher(engine, settings, auth=auth) for _ in range(concurrency)]
