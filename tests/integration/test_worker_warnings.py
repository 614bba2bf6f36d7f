"""What the worker says about a trap, on SQLite and PostgreSQL: a handler that holds SQLite's write
lock (measured, exported, warned once per handler) and events nobody handles (logged with a count)."""

from __future__ import annotations

import logging
import time

import pytest
from sqlalchemy import Connection, Engine

from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.worker import Worker
from reconciler.inbox.worker_metrics import WorkerMetrics
from reconciler.inbox.write_lock import is_write
from tests.conftest import make_settings
from tests.integration.test_worker import put, row

WAIT = 0.4


def settings_for(engine: Engine) -> object:
    return make_settings(
        engine.url.render_as_string(hide_password=False),
        outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/in"}]},
        worker={"sqlite_lock_warn_seconds": 0.2},
    )


def lock_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "write lock" in r.getMessage()]


def histogram(metrics: WorkerMetrics) -> tuple[float, float]:
    count = metrics.registry.get_sample_value(
        "hookledger_handler_write_lock_seconds_count", {"source": "stripe"}
    )
    total = metrics.registry.get_sample_value(
        "hookledger_handler_write_lock_seconds_sum", {"source": "stripe"}
    )
    return count or 0.0, total or 0.0


def test_a_handler_that_writes_then_waits_is_measured_and_warned_about_once(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HandlerRegistry()

    def writes_then_waits(event: Event, conn: Connection) -> None:
        event.outbox.add("crm", {"invoice": event.event_id})
        time.sleep(WAIT)

    registry.register("stripe", "*", writes_then_waits)
    put(engine, "evt_a")
    put(engine, "evt_b")
    metrics = WorkerMetrics()
    worker = Worker(engine, settings_for(engine), registry, metrics=metrics)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="reconciler.inbox.write_lock"):
        worker.drain()
    worker.close()
    assert [row(engine, e).status for e in ("evt_a", "evt_b")] == ["processed", "processed"]
    count, total = histogram(metrics)
    lines = lock_lines(caplog)
    if engine.dialect.name == "sqlite":
        assert count == 2 and total >= 2 * WAIT
        assert len(lines) == 1  # once per handler, not once per event
        assert "writes_then_waits held SQLite's write lock for 0.4 s" in lines[0]
        assert "sqlite_lock_warn_seconds = 0.2" in lines[0]
    else:  # PostgreSQL has row locks: nothing to measure or warn about
        assert count == 0 and lines == []


def test_a_handler_that_waits_then_writes_holds_the_lock_only_briefly(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HandlerRegistry()

    def waits_then_writes(event: Event, conn: Connection) -> None:
        time.sleep(WAIT)
        event.outbox.add("crm", {"invoice": event.event_id})

    registry.register("stripe", "*", waits_then_writes)
    put(engine, "evt_c")
    metrics = WorkerMetrics()
    worker = Worker(engine, settings_for(engine), registry, metrics=metrics)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="reconciler.inbox.write_lock"):
        worker.drain()
    worker.close()
    count, total = histogram(metrics)
    assert lock_lines(caplog) == []
    if engine.dialect.name == "sqlite":
        assert count == 1 and total < WAIT / 2


def test_events_nobody_handles_are_logged_with_a_count_not_one_line_each(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(12):
        put(engine, f"evt_nobody_{i}")
    put(engine, "evt_other", event_type="customer.created")
    worker = Worker(engine, settings_for(engine), HandlerRegistry())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="reconciler.inbox.worker"):
        worker.drain()
    worker.close()
    lines = [r.getMessage() for r in caplog.records if "marked ignored" in r.getMessage()]
    assert sorted(lines) == sorted(
        [
            "1 stripe event(s) of type 'invoice.paid' marked ignored by this worker: no handler "
            "and no forward_url for them (a handler module in [worker] handlers, or forward_url)",
            "10 stripe event(s) of type 'invoice.paid' marked ignored by this worker: no handler "
            "and no forward_url for them (a handler module in [worker] handlers, or forward_url)",
            "1 stripe event(s) of type 'customer.created' marked ignored by this worker: no "
            "handler and no forward_url for them (a handler module in [worker] handlers, or "
            "forward_url)",
        ]
    )
    assert row(engine, "evt_other").status == "ignored"


@pytest.mark.parametrize(
    ("statement", "writes"),
    [
        ("INSERT INTO t VALUES (1)", True),
        ("  update t set a = 1", True),
        ("DELETE FROM t", True),
        ("SELECT 1", False),
        ("", False),
        ("\n  select * from t", False),
    ],
)
def test_which_statements_take_the_write_lock(statement: str, writes: bool) -> None:
    assert is_write(statement) is writes
