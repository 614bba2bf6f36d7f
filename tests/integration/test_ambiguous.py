"""Ambiguous outcomes: the request was sent and no answer came. The worker asks the handler's
``verify`` before it runs the handler again (on SQLite and PostgreSQL, over real loopback HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, Engine, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.errors import AmbiguousError, TransientError
from reconciler.inbox.handlers import Event, HandlerRegistry, Verdict
from reconciler.inbox.worker import Worker
from reconciler.storage.models import PROCESSING_ATTEMPTS
from tests.conftest import make_settings
from tests.integration.test_worker import Clock, put, row

TIMEOUT = 0.3  # the client's read timeout; the stand-in's slow answers take longer


class External:
    """A stand-in for a CRM or payment API: ``POST /charges`` applies an effect keyed by
    ``Idempotency-Key`` (once per key), then answers as scripted: ``ok``, ``slow`` (applies, then
    does not answer within the client's timeout), ``fail_before`` (500 without applying).
    ``GET /charges/{key}`` says whether the effect exists (404 if not, 503 when ``lookups_fail``)."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.effects: dict[str, int] = {}  # key -> how many times the effect was applied
        self.requests: list[dict[str, str]] = []
        self.lookups_fail = False
        self.app = Starlette(
            routes=[
                Route("/charges", self.charge, methods=["POST"]),
                Route("/charges/{key}", self.lookup, methods=["GET"]),
            ]
        )

    async def charge(self, request: Request) -> Response:
        await request.body()
        self.requests.append(dict(request.headers))
        key = request.headers["idempotency-key"]
        step = self.script.pop(0) if self.script else "ok"
        if step == "fail_before":
            return JSONResponse({"error": "down"}, status_code=500)
        self.effects[key] = self.effects.get(key, 0) + 1
        if step == "slow":
            await asyncio.sleep(TIMEOUT * 4)
        return JSONResponse({"id": key})

    async def lookup(self, request: Request) -> Response:
        if self.lookups_fail:
            return JSONResponse({"error": "lookups down"}, status_code=503)
        key = request.path_params["key"]
        return JSONResponse({"id": key}, status_code=200 if key in self.effects else 404)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=TIMEOUT) as c:
        yield c


def charge_handler(client: httpx.Client, url: str, *, idempotent: bool) -> tuple[Any, Any]:
    """A handler that charges through the stand-in (a fresh key per call when not ``idempotent``:
    the case where only ``verify`` prevents a second charge) and its verify function."""
    calls = {"n": 0}

    def key_of(event: Event) -> str:
        return event.event_id

    def charge(event: Event, conn: Connection) -> None:
        calls["n"] += 1
        key = key_of(event) if idempotent else f"{event.event_id}-{calls['n']}"
        try:
            response = client.post(
                f"{url}/charges", json={"event": event.event_id}, headers={"Idempotency-Key": key}
            )
        except httpx.ReadTimeout as exc:
            raise AmbiguousError("the charge was sent, no answer came") from exc
        if response.status_code >= 500:
            raise TransientError(f"HTTP {response.status_code}")

    def verify(event: Event, conn: Connection) -> Verdict:
        answer = client.get(
            f"{url}/charges/{event.event_id}-1"
            if not idempotent
            else f"{url}/charges/{key_of(event)}"
        )
        if answer.status_code == 200:
            return Verdict.DONE
        if answer.status_code == 404:
            return Verdict.NOT_DONE
        return Verdict.UNKNOWN

    return charge, verify


def attempts_of(engine: Engine) -> list[tuple[Any, ...]]:
    a = PROCESSING_ATTEMPTS
    with engine.connect() as conn:
        return [
            (r.attempt, str(r.outcome), str(r.error_class) if r.error_class else None)
            for r in conn.execute(select(a).order_by(a.c.id))
        ]


def worker_for(
    engine: Engine, db_url: str, registry: HandlerRegistry, clock: Clock, **cfg: Any
) -> Worker:
    return Worker(
        engine, make_settings(db_url, worker={"max_attempts": 3, **cfg}), registry, clock=clock
    )


def test_applied_then_timed_out_is_verified_done_and_not_charged_again(
    engine: Engine, db_url: str, serve: Any, client: httpx.Client
) -> None:
    external = External(["slow"])
    url = serve(external.app).url
    charge, verify = charge_handler(client, url, idempotent=False)
    registry = HandlerRegistry()
    registry.register("stripe", "*", charge, verify=verify)
    clock = Clock()
    put(engine, "evt_amb", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    worker.run_once()
    r = row(engine, "evt_amb")
    assert (r.status, r.error_class) == ("failed", "ambiguous")
    clock.advance(60)
    worker.run_once()
    r = row(engine, "evt_amb")
    assert (r.status, r.error_class) == ("processed", None)
    assert sum(external.effects.values()) == 1  # exactly one effect, though no key was reused
    assert len(external.requests) == 1  # the handler did not run again
    assert attempts_of(engine) == [(1, "failed", "ambiguous"), (2, "processed", None)]
    worker.close()


def test_failed_before_applying_is_applied_once_after_the_retry(
    engine: Engine, db_url: str, serve: Any, client: httpx.Client
) -> None:
    external = External(["fail_before", "ok"])
    url = serve(external.app).url
    charge, verify = charge_handler(client, url, idempotent=True)
    registry = HandlerRegistry()
    registry.register("stripe", "*", charge, verify=verify)
    clock = Clock()
    put(engine, "evt_500", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    worker.run_once()
    assert (row(engine, "evt_500").error_class) == "transient"
    clock.advance(60)
    worker.run_once()
    assert row(engine, "evt_500").status == "processed"
    assert external.effects == {"evt_500": 1}
    worker.close()


def test_verified_not_done_runs_the_handler_again(
    engine: Engine, db_url: str, serve: Any, client: httpx.Client
) -> None:
    external = External(["slow", "ok"])
    url = serve(external.app).url
    charge, _ = charge_handler(client, url, idempotent=True)
    registry = HandlerRegistry()
    registry.register("stripe", "*", charge, verify=lambda event, conn: Verdict.NOT_DONE)
    clock = Clock()
    put(engine, "evt_nd", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    worker.run_once()
    clock.advance(60)
    worker.run_once()
    assert row(engine, "evt_nd").status == "processed"
    assert len(external.requests) == 2  # run again, with the same key
    assert external.effects == {"evt_nd": 2}  # (the stand-in counts; a real API dedupes by key)
    worker.close()


def test_unknown_stays_ambiguous_and_dies_as_ambiguous(
    engine: Engine, db_url: str, serve: Any, client: httpx.Client
) -> None:
    external = External(["slow"])
    external.lookups_fail = True
    url = serve(external.app).url
    charge, verify = charge_handler(client, url, idempotent=True)
    registry = HandlerRegistry()
    registry.register("stripe", "*", charge, verify=verify)
    clock = Clock()
    put(engine, "evt_unk", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    for _ in range(3):
        worker.run_once()
        clock.advance(3600)
    r = row(engine, "evt_unk")
    assert (r.status, r.error_class) == ("dead", "ambiguous")
    assert "verify could not tell" in r.last_error
    assert len(external.requests) == 1  # never charged twice while unknown
    assert attempts_of(engine) == [
        (1, "failed", "ambiguous"),
        (2, "failed", "ambiguous"),
        (3, "dead", "ambiguous"),
    ]
    worker.close()


def test_a_verify_that_raises_counts_as_unknown(engine: Engine, db_url: str) -> None:
    calls: list[str] = []

    def handler(event: Event, conn: Connection) -> None:
        calls.append(event.event_id)
        raise AmbiguousError("sent, no answer")

    def verify(event: Event, conn: Connection) -> Verdict:
        raise RuntimeError("the status API is down")

    registry = HandlerRegistry()
    registry.register("stripe", "*", handler, verify=verify)
    clock = Clock()
    put(engine, "evt_vr", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    worker.run_once()
    clock.advance(3600)
    worker.run_once()
    r = row(engine, "evt_vr")
    assert (r.status, r.error_class) == ("failed", "ambiguous") and "RuntimeError" in r.last_error
    assert calls == ["evt_vr"]
    worker.close()


def test_without_verify_an_ambiguous_event_is_retried_as_usual(engine: Engine, db_url: str) -> None:
    calls: list[int] = []

    def handler(event: Event, conn: Connection) -> None:
        calls.append(event.attempt)
        if event.attempt == 1:
            raise AmbiguousError("sent, no answer")

    registry = HandlerRegistry()
    registry.register("stripe", "*", handler)
    clock = Clock()
    put(engine, "evt_nv", at=clock.now)
    worker = worker_for(engine, db_url, registry, clock)
    worker.run_once()
    clock.advance(3600)
    worker.run_once()
    assert calls == [1, 2] and row(engine, "evt_nv").status == "processed"
    worker.close()


@pytest.mark.parametrize("step", ["slow", "reset"])
def test_forwarder_no_answer_is_ambiguous_and_retries_with_the_same_key(
    engine: Engine, db_url: str, serve: Any, step: str
) -> None:
    external = External(["slow"] if step == "slow" else [])
    url = serve(external.app).url + "/charges"
    clock = Clock()
    put(engine, "evt_fw", at=clock.now)
    settings = {"forward_url": url, "forward_timeout_seconds": TIMEOUT}
    transport = None
    if step == "reset":
        # a connection reset after the body was written: a server cannot produce it on demand
        def reset(request: httpx.Request) -> httpx.Response:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

        transport = httpx.MockTransport(reset)
    client = httpx.Client(timeout=TIMEOUT, transport=transport) if transport else None
    worker = Worker(
        engine,
        make_settings(db_url, worker={"max_attempts": 3, **settings}),
        HandlerRegistry(),
        clock=clock,
        client=client,
    )
    worker.run_once()
    r = row(engine, "evt_fw")
    assert (r.status, r.error_class) == ("failed", "ambiguous"), r.last_error
    if step == "reset":
        worker.close()
        return
    clock.advance(3600)
    worker.run_once()
    assert row(engine, "evt_fw").status == "processed"
    keys = [h["idempotency-key"] for h in external.requests]
    assert keys == ["stripe:evt_fw", "stripe:evt_fw"]  # the receiving app dedupes on it
    worker.close()


def test_forwarder_connect_failure_is_transient_not_ambiguous(engine: Engine, db_url: str) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    put(engine, "evt_cf")
    worker = Worker(
        engine,
        make_settings(db_url, worker={"forward_url": "http://127.0.0.1:9/x"}),
        HandlerRegistry(),
        client=httpx.Client(transport=httpx.MockTransport(refuse)),
    )
    worker.run_once()
    assert row(engine, "evt_cf").error_class == "transient"
    worker.close()


def test_metrics_and_overview_show_failure_shares_and_who_waits_for_a_person(
    engine: Engine, db_url: str, serve: Any
) -> None:
    from datetime import timedelta

    from reconciler.inbox.receiver import create_app
    from reconciler.ops.overview import kpis, load_overview
    from reconciler.ops.timerange import TimeRange
    from reconciler.storage.types import utcnow

    def flaky(event: Event, conn: Connection) -> None:
        if event.event_id.startswith("evt_amb"):
            raise AmbiguousError("sent, no answer")
        if event.event_id == "evt_tr" and event.attempt == 1:
            raise TransientError("HTTP 503")

    registry = HandlerRegistry()
    registry.register("stripe", "*", flaky, verify=lambda event, conn: Verdict.UNKNOWN)
    # the attempts happen within the last half hour: the metrics count the last hour
    clock = Clock(utcnow() - timedelta(minutes=30))
    for event_id in ("evt_amb1", "evt_tr", "evt_ok"):
        put(engine, event_id, at=clock.now)
    worker = worker_for(engine, db_url, registry, clock, max_attempts=2)
    for _ in range(3):
        worker.run_once()
        clock.advance(60)
    worker.close()
    assert row(engine, "evt_amb1").status == "dead" and row(engine, "evt_tr").status == "processed"
    # attempts: evt_amb1 failed + dead (2, ambiguous), evt_tr failed (transient) + processed, evt_ok
    text = httpx.get(f"{serve(create_app(make_settings(db_url), engine)).url}/metrics").text
    assert (
        'hookledger_events_waiting_for_a_person{error_class="ambiguous",source="stripe"} 1.0'
        in text
    )
    assert (
        'hookledger_failed_attempts_last_hour{error_class="ambiguous",source="stripe"} 2.0' in text
    )
    assert (
        'hookledger_failed_attempts_last_hour{error_class="transient",source="stripe"} 1.0' in text
    )

    now = utcnow()
    with engine.connect() as conn:
        ov = load_overview(
            conn,
            TimeRange(now - timedelta(hours=1), now + timedelta(seconds=1)),
            60,
            now,
            ("stripe",),
        )
    [k] = kpis(ov, 3600)
    assert k.attempts == 5
    assert (k.failure_share("ambiguous"), k.failure_share("transient")) == (0.4, 0.2)
    assert k.waiting_for_a_person == {"ambiguous": 1}
