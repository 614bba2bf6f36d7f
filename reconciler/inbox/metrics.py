"""Prometheus metrics: delivery counters kept in process, inbox gauges read from the database at scrape."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from reconciler.storage.models import INBOX_EVENTS, EventStatus
from reconciler.storage.types import utcnow

UNPROCESSED = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED)


def status_counts(engine: Engine) -> list[tuple[str, str, int]]:
    t = INBOX_EVENTS
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.source, t.c.status, func.count()).group_by(t.c.source, t.c.status)
        ).all()
    return [(str(s), str(st), int(n)) for s, st, n in rows]


def oldest_unprocessed(engine: Engine) -> list[tuple[str, int, datetime | None]]:
    """Per source: unprocessed count and the receipt time of the oldest unprocessed event."""
    t = INBOX_EVENTS
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.source, func.count(), func.min(t.c.received_at))
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


class InboxCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        events = GaugeMetricFamily(
            "hookledger_events", "Inbox events by source and status", labels=["source", "status"]
        )
        for source, status, count in status_counts(self._engine):
            events.add_metric([source, status], count)
        yield events
        pending = GaugeMetricFamily(
            "hookledger_unprocessed_events",
            "Events pending, processing or awaiting a retry",
            labels=["source"],
        )
        age = GaugeMetricFamily(
            "hookledger_oldest_unprocessed_age_seconds",
            "Age of the oldest unprocessed event",
            labels=["source"],
        )
        now = utcnow()
        for source, count, oldest in oldest_unprocessed(self._engine):
            pending.add_metric([source], count)
            age.add_metric([source], (now - oldest).total_seconds() if oldest else 0.0)
        yield pending
        yield age


class ReceiverMetrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.deliveries = Counter(
            "hookledger_deliveries",
            "Webhook deliveries received, by source and outcome",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.registry.register(InboxCollector(engine))
