"""The worker's own metrics, served on ``[worker] metrics_port`` (off by default): what it applied,
how, and how long each event took. The receiver's /metrics has the queue as the database sees it;
these are per process (sum them over workers)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector

from reconciler.storage.models import EventStatus


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        self.events = Counter(
            "hookledger_worker_events",
            "Events a worker finished an attempt of, by source and outcome (processed, ignored, "
            "failed: a retry is due, dead, lease_lost)",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "hookledger_handler_seconds",
            "Time to apply one event: its handler (or forward) and its outcome's transaction",
            ["source"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )

        self.write_lock = _WriteLock(
            Histogram(
                "hookledger_handler_write_lock_seconds",
                "SQLite: how long a handler's transaction held the write lock (first write to "
                "commit); the receiver cannot store deliveries meanwhile",
                ["source"],
                buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30),
                registry=self.registry,
            )
        )

    def observe(self, source: str, status: EventStatus | None, seconds: float) -> None:
        self.events.labels(source, status.value if status else "lease_lost").inc()
        self.seconds.labels(source).observe(seconds)

    def serve(self, host: str, port: int) -> None:
        """Serve GET /metrics on ``host:port`` from a daemon thread."""
        from prometheus_client import start_http_server

        start_http_server(port, addr=host, registry=self.registry)


class _WriteLock:
    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram

    def observe(self, source: str, seconds: float) -> None:
        self.histogram.labels(source).observe(seconds)
