"""Prometheus metrics: delivery counters kept in process, inbox gauges read from the database at scrape."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from reconciler.states import OUTBOX_UNSENT
from reconciler.storage.models import (
    INBOX_EVENTS,
    NOTIFICATIONS,
    RECON_RUNS,
    EventStatus,
    NotificationStatus,
    OutboxStatus,
    RunStatus,
)
from reconciler.storage.queries import (
    failures_by_class,
    open_discrepancies,
    outbox_by_target,
    outbox_failures,
    waiting_for_a_person,
)
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)

UNPROCESSED = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED)
FAILURE_WINDOW = timedelta(hours=1)  # the failed-attempt gauges count the last hour


def status_counts(engine: Engine) -> list[tuple[str, str, int]]:
    t = INBOX_EVENTS
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.source, t.c.status, func.count()).group_by(t.c.source, t.c.status)
        ).all()
    return [(str(s), str(st), int(n)) for s, st, n in rows]


def oldest_unprocessed(engine: Engine) -> list[tuple[str, int, datetime | None]]:
    """Per source: unprocessed count and since when the oldest unprocessed event has been due
    (received, replayed or retried: a replay is not as old as its first receipt)."""
    t = INBOX_EVENTS
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.source, func.count(), func.min(t.c.queued_at))
            .where(t.c.status.in_(UNPROCESSED))
            .group_by(t.c.source)
        ).all()
    out = []
    for source, count, oldest in rows:
        if isinstance(oldest, str):  # MIN() on SQLite loses the column type
            oldest = datetime.fromisoformat(oldest)
        if oldest is not None and oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=UTC)
        out.append((str(source), int(count), oldest))
    return out


def last_runs(engine: Engine) -> dict[str, dict[str, Any]]:
    """Per source: when its newest successful run finished, how long its newest finished run took
    and whether it failed, and how many discrepancies the newest successful run found first."""
    r = RECON_RUNS
    finished = (RunStatus.SUCCEEDED, RunStatus.FAILED)
    newest = (
        select(r.c.source, func.max(r.c.started_at).label("started_at"))
        .where(r.c.status.in_(finished))
        .group_by(r.c.source)
    ).subquery()
    succeeded = (
        select(r.c.source, func.max(r.c.started_at).label("started_at"))
        .where(r.c.status == RunStatus.SUCCEEDED)
        .group_by(r.c.source)
    ).subquery()
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for source, status, started, ended in conn.execute(
            select(r.c.source, r.c.status, r.c.started_at, r.c.finished_at).join(
                newest, (r.c.source == newest.c.source) & (r.c.started_at == newest.c.started_at)
            )
        ):
            duration = (_aware(ended) - _aware(started)).total_seconds() if ended else 0.0
            out.setdefault(str(source), {}).update(
                duration=duration, failed=str(status) == RunStatus.FAILED.value
            )
        for source, ended, detail in conn.execute(
            select(r.c.source, r.c.finished_at, r.c.detail).join(
                succeeded,
                (r.c.source == succeeded.c.source) & (r.c.started_at == succeeded.c.started_at),
            )
        ):
            new = (detail or {}).get("new")
            out.setdefault(str(source), {}).update(
                success=_aware(ended).timestamp() if ended else None,
                new=int(new) if isinstance(new, int) else 0,
            )
    return out


def _aware(value: datetime | str) -> datetime:
    if isinstance(value, str):  # MAX() and joins on SQLite can lose the column type
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class ReconcileCollector(Collector):
    """Each source's reconciliation history at scrape time (sources never reconciled report 0)."""

    def __init__(self, engine: Engine, sources: Sequence[str] = ()) -> None:
        self._engine = engine
        self._sources = tuple(sources)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "hookledger_reconciliation_last_success_timestamp_seconds",
                "When the source's newest successful reconciliation finished (0: never)",
                labels=["source"],
            ),
            GaugeMetricFamily(
                "hookledger_reconciliation_last_duration_seconds",
                "How long the source's newest finished reconciliation took",
                labels=["source"],
            ),
            GaugeMetricFamily(
                "hookledger_reconciliation_last_failed",
                "1 if the source's newest finished reconciliation failed",
                labels=["source"],
            ),
            GaugeMetricFamily(
                "hookledger_reconciliation_last_new_discrepancies",
                "Discrepancies the source's newest successful reconciliation found first",
                labels=["source"],
            ),
        )

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        success, duration, failed, new = self._families()
        try:
            runs = last_runs(self._engine)
        except SQLAlchemyError as exc:
            log.warning("metrics: reconciliation query failed: %s", exc.__class__.__name__)
            return  # hookledger_database_up says why
        for source in sorted(set(self._sources) | set(runs)):
            run = runs.get(source, {})
            success.add_metric([source], run.get("success") or 0.0)
            duration.add_metric([source], run.get("duration", 0.0))
            failed.add_metric([source], 1.0 if run.get("failed") else 0.0)
            new.add_metric([source], run.get("new", 0))
        yield from (success, duration, failed, new)


class InboxCollector(Collector):
    def __init__(self, engine: Engine, sources: Sequence[str] = ()) -> None:
        self._engine = engine
        self._sources = tuple(sources)  # configured: their queue gauges report 0, never vanish

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "hookledger_database_up", "1 if the inbox database answered the scrape"
            ),
            GaugeMetricFamily(
                "hookledger_events",
                "Inbox events by source and status",
                labels=["source", "status"],
            ),
            GaugeMetricFamily(
                "hookledger_unprocessed_events",
                "Events pending, processing or awaiting a retry",
                labels=["source"],
            ),
            GaugeMetricFamily(
                "hookledger_oldest_unprocessed_age_seconds",
                "Age of the oldest unprocessed event",
                labels=["source"],
            ),
            GaugeMetricFamily(
                "hookledger_open_discrepancies",
                "Open reconciliation discrepancies by source and kind",
                labels=["source", "kind"],
            ),
            GaugeMetricFamily(
                "hookledger_failed_attempts_last_hour",
                "Processing attempts that failed in the last hour, by source and error class "
                "(transient, ambiguous, permanent)",
                labels=["source", "error_class"],
            ),
            GaugeMetricFamily(
                "hookledger_events_waiting_for_a_person",
                "Dead events (nothing retries them) by source and error class; ambiguous ones "
                "may or may not have taken effect",
                labels=["source", "error_class"],
            ),
        )

    def describe(self) -> Iterator[Metric]:
        # Without describe() the registry would call collect(), i.e. query the database, at start.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        up, events, pending, age, discrepancies, failed, waiting = self._families()
        now = utcnow()
        try:
            by_status = status_counts(self._engine)
            oldest = oldest_unprocessed(self._engine)
            with self._engine.connect() as conn:
                open_by_kind = open_discrepancies(conn)
                failures = failures_by_class(conn, now - FAILURE_WINDOW, now)
                dead = waiting_for_a_person(conn)
        except SQLAlchemyError as exc:
            log.warning("metrics: inbox query failed: %s", exc.__class__.__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        for source, status, count in by_status:
            events.add_metric([source, status], count)
        queued = {source: (count, first) for source, count, first in oldest}
        for source in sorted(set(self._sources) | set(queued)):
            count, first = queued.get(source, (0, None))
            pending.add_metric([source], count)
            age.add_metric([source], (now - first).total_seconds() if first else 0.0)
        present = {(source, status) for source, status, _ in by_status}
        for source in self._sources:  # "no dead events" is a 0, not an absent series
            if (source, EventStatus.DEAD.value) not in present:
                events.add_metric([source, EventStatus.DEAD.value], 0)
        for source, kinds in open_by_kind.items():
            for kind, count in kinds.items():
                discrepancies.add_metric([source, kind], count)
        for family, values in ((failed, failures), (waiting, dead)):
            for source, classes in values.items():
                for error_class, count in classes.items():
                    family.add_metric([source, error_class], count)
        yield from (up, events, pending, age, discrepancies, failed, waiting)


class OutboxCollector(Collector):
    """The outgoing side at scrape time, per target (configured targets report 0, never vanish)."""

    def __init__(self, engine: Engine, targets: Sequence[str] = ()) -> None:
        self._engine = engine
        self._targets = tuple(targets)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "hookledger_outbox_messages",
                "Outbox messages by target and status (pending, sending, sent, failed, dead)",
                labels=["target", "status"],
            ),
            GaugeMetricFamily(
                "hookledger_outbox_pending",
                "Outbox messages not sent yet (pending, sending or awaiting a retry)",
                labels=["target"],
            ),
            GaugeMetricFamily(
                "hookledger_outbox_oldest_pending_age_seconds",
                "Age of the oldest outbox message not sent yet (0 when there is none)",
                labels=["target"],
            ),
            GaugeMetricFamily(
                "hookledger_outbox_failed_attempts_last_hour",
                "Publisher attempts that failed in the last hour, by target and error class",
                labels=["target", "error_class"],
            ),
        )

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        messages, pending, age, failed = self._families()
        now = utcnow()
        try:
            with self._engine.connect() as conn:
                by_target = outbox_by_target(conn)
                failures = outbox_failures(conn, now - FAILURE_WINDOW, now)
        except SQLAlchemyError as exc:
            log.warning("metrics: outbox query failed: %s", exc.__class__.__name__)
            return  # hookledger_database_up says why
        for target in sorted(set(self._targets) | set(by_target)):
            counts, oldest = by_target.get(target, ({}, None))
            for status in OutboxStatus:
                messages.add_metric([target, status.value], counts.get(status.value, 0))
            pending.add_metric([target], sum(counts.get(s.value, 0) for s in OUTBOX_UNSENT))
            age.add_metric([target], (now - oldest).total_seconds() if oldest else 0.0)
        for target, classes in failures.items():
            for error_class, count in classes.items():
                failed.add_metric([target, error_class], count)
        yield from (messages, pending, age, failed)


class NotificationCollector(Collector):
    """Notifications by [[notify]] target and status at scrape time (configured targets report 0
    for each status, never vanish): a rise in ``failed`` is a target that gave one up."""

    def __init__(self, engine: Engine, targets: Sequence[str] = ()) -> None:
        self._engine = engine
        self._targets = tuple(targets)

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "hookledger_notifications",
            "Notifications by [[notify]] target and status (pending, sent, failed: given up, "
            "suppressed: over max_per_hour), as kept until hookledger prune",
            labels=["target", "status"],
        )

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        n = NOTIFICATIONS
        try:
            with self._engine.connect() as conn:
                rows = conn.execute(
                    select(n.c.target, n.c.status, func.count()).group_by(n.c.target, n.c.status)
                ).all()
        except SQLAlchemyError as exc:
            log.warning("metrics: notifications query failed: %s", exc.__class__.__name__)
            return  # hookledger_database_up says why
        counts = {(str(target), str(status)): int(c) for target, status, c in rows}
        for target in sorted(set(self._targets) | {t for t, _ in counts}):
            for status in NotificationStatus:
                family.add_metric([target, status.value], counts.get((target, status.value), 0))
        yield family


class ReceiverMetrics:
    def __init__(
        self,
        engine: Engine,
        targets: Sequence[str] = (),
        sources: Sequence[str] = (),
        notify_targets: Sequence[str] = (),
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # the process's CPU, memory, open files and start time (process_*), as the default
        # registry would have them
        ProcessCollector(registry=self.registry)
        self.ack_seconds = Histogram(
            "hookledger_ack_seconds",
            "Time from a delivery's arrival to its acknowledgement (stored and committed), by source",
            ["source"],
            registry=self.registry,
        )
        self.deliveries = Counter(
            "hookledger_deliveries",
            "Webhook deliveries received, by source and outcome",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "hookledger_rejected_deliveries",
            "Deliveries refused, by source and HTTP status (401: the signature did not verify, as "
            "after a secret was rotated on one side only)",
            ["source", "status"],
            registry=self.registry,
        )
        self.unlogged = Counter(
            "hookledger_rejected_deliveries_not_logged",
            "Rejected deliveries counted but not written to the deliveries table (over [receiver] "
            "unknown_source_log_per_minute or rejected_log_per_minute for their client address)",
            registry=self.registry,
        )
        self.busy = Counter(
            "hookledger_receiver_busy",
            "Webhook requests answered 503 with Retry-After: [receiver] limit_concurrency were in "
            "progress",
            registry=self.registry,
        )
        self.confirm_calls = Counter(
            "hookledger_confirm_calls",
            "Calls to a provider's API confirming a delivery (GoPay), by source: at most one per "
            "id per [receiver] confirm_window_seconds",
            ["source"],
            registry=self.registry,
        )
        self.confirm_busy = Counter(
            "hookledger_confirm_busy",
            "Deliveries to confirm answered 503 with Retry-After: [receiver] confirm_queue were "
            "waiting",
            ["source"],
            registry=self.registry,
        )
        self.disconnected = Counter(
            "hookledger_client_disconnects",
            "Deliveries whose client went away before sending the whole body (nothing stored)",
            ["source"],
            registry=self.registry,
        )
        self.registry.register(InboxCollector(engine, sources))
        self.registry.register(OutboxCollector(engine, targets))
        self.registry.register(ReconcileCollector(engine, sources))
        self.registry.register(NotificationCollector(engine, notify_targets))
