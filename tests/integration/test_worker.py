"""The worker on SQLite and PostgreSQL: outcomes, retries, dead letters, replay, leases, forwarding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, Engine, func, insert, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connectors.providers.stripe.signature import parse_stripe
from connectors.testing import FakeClock as Clock
from reconciler.errors import ActionRefusedError, NoSuchRecordError, PermanentError, TransientError
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.replay import event_detail, replay_event
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS, PROCESSING_ATTEMPTS
from tests.business import business_tables, invoices, runs
from tests.conftest import make_settings
from tests.deliveries import stripe_delivery


def put(
    engine: Engine,
    event_id: str,
    event_type: str = "invoice.paid",
    obj: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> None:
    _headers, body = stripe_delivery(event_id, event_type, obj)
    item = IncomingEvent(
        source="stripe",
        parsed=parse_stripe({}, body),
        body=body,
        headers={},
        received_at=at or datetime.now(UTC),
        content_type="application/json",
    )
    with engine.begin() as conn:
        store_items(conn, [item])


def row(engine: Engine, event_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(INBOX_EVENTS).where(INBOX_EVENTS.c.event_id == event_id)).one()


def attempts(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(PROCESSING_ATTEMPTS).order_by(PROCESSING_ATTEMPTS.c.id)))


def registry_of(fn: Any) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("stripe", "*", fn)
    return registry


# -- outcomes ------------------------------------------------------------------------------------


def test_handler_writes_commit_with_the_status_and_roll_back_on_failure(
    engine: Engine, db_url: str
) -> None:
    with business_tables(engine):

        def handler(event: Event, conn: Connection) -> None:
            conn.execute(insert(runs).values(event_id=event.event_id, worker="w"))
            if event.event_id == "evt_bad":
                raise TransientError("downstream busy")

        put(engine, "evt_ok")
        put(engine, "evt_bad")
        worker = Worker(engine, make_settings(db_url), registry_of(handler))
        worker.run_once()
        assert row(engine, "evt_ok").status == "processed"
        bad = row(engine, "evt_bad")
        assert (
            bad.status == "failed"
            and bad.error_class == "transient"
            and "downstream busy" in bad.last_error
        )
        assert bad.next_attempt_at > datetime.now(UTC) - timedelta(seconds=1)
        with engine.connect() as conn:
            assert [r.event_id for r in conn.execute(select(runs))] == ["evt_ok"]


def test_transient_failures_retry_with_backoff_then_succeed(engine: Engine, db_url: str) -> None:
    clock = Clock()
    calls: list[int] = []

    def flaky(event: Event, conn: Connection) -> None:
        calls.append(event.attempt)
        if event.attempt < 3:
            raise TransientError("try again")

    settings = make_settings(
        db_url, worker={"backoff_base_seconds": 10.0, "backoff_max_seconds": 100.0}
    )
    put(engine, "evt_flaky", at=clock.now)
    worker = Worker(engine, settings, registry_of(flaky), clock=clock)
    assert worker.run_once() == 1
    assert worker.run_once() == 0  # not due before its backoff
    for _ in range(2):
        clock.advance(101)
        assert worker.run_once() == 1
    assert calls == [1, 2, 3]
    assert row(engine, "evt_flaky").status == "processed"
    assert [a.outcome for a in attempts(engine)] == ["failed", "failed", "processed"]


def test_permanent_error_goes_straight_to_dead(engine: Engine, db_url: str) -> None:
    def invalid(event: Event, conn: Connection) -> None:
        raise PermanentError("amount is negative")

    put(engine, "evt_perm")
    Worker(engine, make_settings(db_url), registry_of(invalid)).drain()
    r = row(engine, "evt_perm")
    assert (r.status, r.attempts, r.error_class) == ("dead", 1, "permanent")
    assert "amount is negative" in r.last_error and r.next_attempt_at is None


def test_dead_after_max_attempts(engine: Engine, db_url: str) -> None:
    clock = Clock()

    def always(event: Event, conn: Connection) -> None:
        raise TransientError("still down")

    put(engine, "evt_max", at=clock.now)
    worker = Worker(
        engine, make_settings(db_url, worker={"max_attempts": 3}), registry_of(always), clock=clock
    )
    for _ in range(5):
        worker.run_once()
        clock.advance(60)
    r = row(engine, "evt_max")
    assert (r.status, r.attempts, r.error_class) == ("dead", 3, "transient")
    assert [a.outcome for a in attempts(engine)] == ["failed", "failed", "dead"]


def test_no_handler_and_no_forward_target_is_ignored(engine: Engine, db_url: str) -> None:
    put(engine, "evt_nobody")
    Worker(engine, make_settings(db_url), HandlerRegistry()).drain()
    r = row(engine, "evt_nobody")
    assert r.status == "ignored" and r.processed_at is not None


# -- replay --------------------------------------------------------------------------------------


def test_replay_of_a_dead_event_processes_it_once_with_its_id(engine: Engine, db_url: str) -> None:
    fixed = threading.Event()
    seen: list[tuple[str, int]] = []

    def handler(event: Event, conn: Connection) -> None:
        if not fixed.is_set():
            raise PermanentError("bug in handler")
        seen.append((event.event_id, event.attempt))

    put(engine, "evt_replay")
    worker = Worker(engine, make_settings(db_url), registry_of(handler))
    worker.drain()
    assert row(engine, "evt_replay").status == "dead"
    fixed.set()
    with engine.begin() as conn:
        result = replay_event(
            conn, source="stripe", event_id="evt_replay", actor="alice", reason="handler fixed"
        )
    assert result.previous_status == "dead"
    r = row(engine, "evt_replay")
    assert (r.status, r.origin, r.attempts) == (
        "pending",
        "webhook",
        0,
    )  # the origin of first receipt
    worker.drain()
    worker.drain()
    assert seen == [("evt_replay", 1)]
    assert row(engine, "evt_replay").status == "processed"
    with engine.connect() as conn:
        audit = conn.execute(select(AUDIT_LOG)).one()
        detail = event_detail(conn, source="stripe", event_id="evt_replay")
    assert (audit.actor, audit.action, audit.reason, audit.event_id) == (
        "alice",
        "replay",
        "handler fixed",
        "evt_replay",
    )
    assert audit.detail["previous_status"] == "dead"
    assert [a["outcome"] for a in detail.attempts] == ["dead", "processed"]
    assert len(detail.audit) == 1


def test_replay_is_refused_for_unknown_or_in_flight_events(engine: Engine) -> None:
    put(engine, "evt_pending")
    with engine.begin() as conn, pytest.raises(NoSuchRecordError, match="evt_nope"):
        replay_event(conn, source="stripe", event_id="evt_nope", actor="a")
    with engine.begin() as conn, pytest.raises(ActionRefusedError, match="pending"):
        replay_event(conn, source="stripe", event_id="evt_pending", actor="a")
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(AUDIT_LOG)).scalar_one() == 0


# -- leases --------------------------------------------------------------------------------------


def test_expired_lease_is_taken_over_and_the_old_owner_cannot_complete(
    engine: Engine, db_url: str
) -> None:
    clock = Clock()
    with business_tables(engine):

        def handler(event: Event, conn: Connection) -> None:
            conn.execute(insert(runs).values(event_id=event.event_id, worker="x"))

        settings = make_settings(db_url, worker={"lease_seconds": 30})
        put(engine, "evt_lease", at=clock.now)
        slow = Worker(engine, settings, registry_of(handler), worker_id="slow", clock=clock)
        fast = Worker(engine, settings, registry_of(handler), worker_id="fast", clock=clock)
        [claimed] = slow.claim()
        assert fast.claim() == []  # leased
        clock.advance(31)
        [again] = fast.claim()
        assert again.attempt == 0  # slow claimed it but never started an attempt
        assert fast.process(again) == "processed"
        assert slow.process(claimed) is None  # lease lost: its writes roll back
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(runs)).scalar_one() == 1
        assert row(engine, "evt_lease").status == "processed"


def test_a_killed_worker_process_loses_its_lease_and_the_event_runs_once(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    with business_tables(engine):
        put(engine, "evt_killed")
        marker = tmp_path / "claimed"
        script = tmp_path / "victim.py"
        script.write_text(
            textwrap.dedent(f"""
            import pathlib, time
            from reconciler.inbox.handlers import HandlerRegistry
            from reconciler.inbox.worker import Worker
            from reconciler.storage.engine import make_engine
            from tests.conftest import make_settings

            def hang(event, conn):
                pathlib.Path({str(marker)!r}).write_text(event.event_id)
                time.sleep(600)

            registry = HandlerRegistry()
            registry.register("stripe", "*", hang)
            settings = make_settings({db_url!r}, worker={{"lease_seconds": 1.5}})
            Worker(make_engine({db_url!r}), settings, registry, worker_id="victim").drain()
        """)
        )
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ, PYTHONPATH=str(root))
        proc = subprocess.Popen([sys.executable, str(script)], cwd=root, env=env)
        try:
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert proc.poll() is None, "victim worker exited early"
                assert time.monotonic() < deadline, "victim never claimed the event"
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        r = row(engine, "evt_killed")
        assert (r.status, r.lease_owner, r.attempts) == ("processing", "victim", 1)

        def handler(event: Event, conn: Connection) -> None:
            conn.execute(insert(runs).values(event_id=event.event_id, worker="survivor"))

        survivor = Worker(engine, make_settings(db_url), registry_of(handler), worker_id="survivor")
        assert survivor.drain() == 0  # still leased
        time.sleep(1.6)
        assert survivor.drain() == 1
        assert survivor.drain() == 0
        r = row(engine, "evt_killed")
        assert (r.status, r.attempts) == ("processed", 2)
        with engine.connect() as conn:
            assert [x.worker for x in conn.execute(select(runs))] == ["survivor"]
        # the killed attempt has its row: recorded when its lease ran out and the event was taken
        # back, with the worker that ran it and when it started
        killed, done = attempts(engine)
        assert (killed.attempt, killed.worker, killed.outcome) == (1, "victim", "interrupted")
        assert "ran out" in killed.error and killed.started_at <= killed.finished_at
        assert (done.attempt, done.worker, done.outcome) == (2, "survivor", "processed")


def test_a_crash_loop_kills_only_the_poison_event(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    """A handler that kills the process on one event, the worker restarted each time (systemd
    ``Restart=always``): the poison event is dead after max_attempts, every other event processed."""
    base = datetime.now(UTC) - timedelta(minutes=5)
    for i in range(50):
        put(engine, f"evt_cl{i:02d}", at=base + timedelta(milliseconds=i))
    script = tmp_path / "crashy.py"
    script.write_text(
        textwrap.dedent(f"""
        import os
        from reconciler.inbox.handlers import HandlerRegistry
        from reconciler.inbox.worker import Worker
        from reconciler.storage.engine import make_engine
        from tests.conftest import make_settings

        def handle(event, conn):
            if event.event_id == "evt_cl07":
                os._exit(1)  # as a segfault or an OOM kill would

        registry = HandlerRegistry()
        registry.register("stripe", "*", handle)
        settings = make_settings({db_url!r}, worker={{"lease_seconds": 0.5, "max_attempts": 3}})
        Worker(make_engine({db_url!r}), settings, registry).drain()
    """)
    )
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    codes = []
    for _ in range(10):
        codes.append(subprocess.run([sys.executable, str(script)], cwd=root, env=env).returncode)
        if codes[-1] == 0:
            break
        time.sleep(0.6)  # the dead process's lease runs out
    assert codes == [1, 1, 1, 0]
    with engine.connect() as conn:
        statuses = dict(conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.status)).all())
    assert statuses.pop("evt_cl07") == "dead"
    assert set(statuses.values()) == {"processed"} and len(statuses) == 49
    poison = row(engine, "evt_cl07")
    assert poison.attempts == 3 and "lease expired after the last attempt" in poison.last_error
    with engine.connect() as conn:
        innocent = conn.execute(
            select(func.max(INBOX_EVENTS.c.attempts)).where(INBOX_EVENTS.c.event_id != "evt_cl07")
        ).scalar_one()
    assert innocent == 1


def test_concurrent_workers_never_run_one_event_twice(engine: Engine, db_url: str) -> None:
    with business_tables(engine):
        for i in range(120):
            put(engine, f"evt_c{i:03d}")

        def handler(event: Event, conn: Connection) -> None:
            conn.execute(
                insert(runs).values(event_id=event.event_id, worker=threading.current_thread().name)
            )
            time.sleep(0.001)

        settings = make_settings(db_url, worker={"batch_size": 7})
        workers = [Worker(engine, settings, registry_of(handler)) for _ in range(4)]
        threads = [threading.Thread(target=w.drain, name=f"w{i}") for i, w in enumerate(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(runs)).scalar_one()
            distinct = conn.execute(select(func.count(func.distinct(runs.c.event_id)))).scalar_one()
            used = conn.execute(select(func.count(func.distinct(runs.c.worker)))).scalar_one()
        assert (total, distinct) == (120, 120)
        if engine.dialect.name == "postgresql":
            assert used > 1  # the work was really shared


def test_release_on_shutdown_returns_unstarted_claims(engine: Engine, db_url: str) -> None:
    for i in range(3):
        put(engine, f"evt_r{i}")
    worker = Worker(engine, make_settings(db_url), HandlerRegistry())
    claimed = worker.claim()
    worker.release(claimed)
    r = row(engine, "evt_r0")
    assert (r.status, r.attempts, r.lease_owner) == ("pending", 0, None)


def test_release_gives_back_an_attempt_counted_with_the_previous_outcome(
    engine: Engine, db_url: str
) -> None:
    for i in range(2):
        put(engine, f"evt_n{i}")
    worker = Worker(engine, make_settings(db_url), registry_of(lambda event, conn: None))
    first, second = worker.claim()
    assert worker.process(first, then=second) == "processed"
    assert row(engine, second.event_id).attempts == 1  # counted in first's transaction
    worker.release([second])
    r = row(engine, second.event_id)
    assert (r.status, r.attempts, r.lease_owner) == ("pending", 0, None)


def test_sqlite_acks_stay_fast_while_a_handler_sleeps(tmp_path: Path, serve: Any) -> None:
    """The handler's transaction takes SQLite's write lock only when it first writes."""
    from reconciler.inbox.receiver import create_app
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'slow.db'}"
    engine = make_engine(url)
    upgrade(engine)
    put(engine, "evt_slow")
    sleeping = threading.Event()

    def slow(event: Event, conn: Connection) -> None:
        sleeping.set()
        time.sleep(8)

    worker = Worker(engine, make_settings(url), registry_of(slow))
    [claimed] = worker.claim()
    thread = threading.Thread(target=worker.process, args=(claimed,))
    thread.start()
    try:
        assert sleeping.wait(10)
        receiver = str(serve(create_app(make_settings(url), engine)).url)
        latencies = []
        with httpx.Client(base_url=receiver, timeout=30) as client:
            while thread.is_alive() and len(latencies) < 2000:
                headers, body = stripe_delivery()
                t = time.perf_counter()
                assert client.post("/webhooks/stripe", content=body, headers=headers).is_success
                latencies.append(time.perf_counter() - t)
    finally:
        thread.join()
        engine.dispose()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    print(
        f"figures: {len(latencies)} acks, p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms"
    )
    assert len(latencies) > 100 and p99 < 0.25, (len(latencies), p99, latencies[-1])
    assert row(engine, "evt_slow").status == "processed"


# -- the "only if newer" helper ------------------------------------------------------------------


def test_upsert_if_newer_ignores_older_versions(engine: Engine, db_url: str) -> None:
    from tests.business import apply_invoice_event

    with business_tables(engine):

        def ev(version: int, status: str) -> Event:
            body = json.dumps(
                {
                    "data": {
                        "object": {"id": "in_1", "status": status, "amount": 5, "version": version}
                    }
                }
            ).encode()
            return Event(
                0,
                "stripe",
                f"e{version}",
                "invoice.updated",
                None,
                None,
                None,
                body,
                None,
                {},
                1,
                "c",
            )

        def state() -> tuple[Any, ...]:
            with engine.connect() as conn:
                return tuple(conn.execute(select(invoices.c.status, invoices.c.version)).one())

        with engine.begin() as conn:
            apply_invoice_event(ev(2, "open"), conn)
            apply_invoice_event(ev(1, "draft"), conn)  # late and older: ignored
        # checked before anything newer or repeated arrives: a repeat of version 2 would restore
        # "open" and hide a lost version check
        assert state() == ("open", 2)
        with engine.begin() as conn:
            apply_invoice_event(ev(2, "open"), conn)  # repeated
        assert state() == ("open", 2)
        with engine.begin() as conn:
            apply_invoice_event(ev(3, "void"), conn)
        with engine.connect() as conn:
            assert conn.execute(select(invoices.c.status)).scalar_one() == "void"


# -- forwarding over loopback --------------------------------------------------------------------


class Target:
    """An application endpoint that answers from a script of status codes."""

    def __init__(self, script: list[tuple[int, dict[str, str]]]) -> None:
        self.script = script
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        self.requests.append((dict(request.headers), await request.body()))
        status, headers = self.script.pop(0) if self.script else (200, {})
        return JSONResponse({"ok": status < 300}, status_code=status, headers=headers)


def test_forward_posts_the_original_body_with_an_idempotency_key(
    engine: Engine, db_url: str, serve: Any
) -> None:
    clock = Clock()
    target = Target([(503, {}), (200, {})])
    url = serve(target.app).url + "/hook"
    put(engine, "evt_fwd", at=clock.now)
    worker = Worker(
        engine, make_settings(db_url, worker={"forward_url": url}), HandlerRegistry(), clock=clock
    )
    worker.run_once()
    assert row(engine, "evt_fwd").status == "failed"
    clock.advance(10)
    worker.run_once()
    assert row(engine, "evt_fwd").status == "processed"
    with engine.connect() as conn:
        original = conn.execute(select(INBOX_EVENTS.c.body)).scalar_one()
    assert len(target.requests) == 2
    for headers, body in target.requests:
        assert body == original
        assert headers["idempotency-key"] == "stripe:evt_fwd"
        assert headers["content-type"] == "application/json"
    worker.close()


def test_forward_4xx_is_permanent_and_429_honours_retry_after(
    engine: Engine, db_url: str, serve: Any
) -> None:
    target = Target([(429, {"Retry-After": "120"}), (422, {})])
    url = serve(target.app).url + "/hook"
    put(engine, "evt_429")
    worker = Worker(engine, make_settings(db_url, worker={"forward_url": url}), HandlerRegistry())
    before = datetime.now(UTC)
    worker.run_once()
    r = row(engine, "evt_429")
    assert r.status == "failed" and r.next_attempt_at >= before + timedelta(seconds=119)
    put(engine, "evt_422")
    worker.run_once()
    r = row(engine, "evt_422")
    assert (r.status, r.error_class) == ("dead", "permanent") and "HTTP 422" in r.last_error
    worker.close()


def test_forward_connection_refused_is_transient(engine: Engine, db_url: str) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    put(engine, "evt_refused")
    settings = make_settings(db_url, worker={"forward_url": f"http://127.0.0.1:{port}/hook"})
    worker = Worker(engine, settings, HandlerRegistry())
    worker.run_once()
    r = row(engine, "evt_refused")
    assert (r.status, r.error_class) == ("failed", "transient")
    worker.close()
