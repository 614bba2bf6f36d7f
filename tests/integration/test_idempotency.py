"""The Idempotency-Key middleware on SQLite and PostgreSQL, through a real Starlette app over
loopback: repeats, concurrent twins, reuse with other parameters, a crash mid-request, expiry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.idempotency import IdempotencyMiddleware
from reconciler.storage.models import IDEMPOTENCY_KEYS
from tests.conftest import RunningServer, start_server

ROOT = Path(__file__).resolve().parents[2]


class Orders:
    """The team's own API: creating an order is not idempotent by itself."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def create(self, request: Request) -> Response:
        body = await request.json()
        self.created.append(body)
        await asyncio.sleep(float(body.get("sleep", 0)))
        if body.get("fail") == "exception":
            raise RuntimeError("the order service crashed")
        if body.get("fail") == "503" and len(self.created) == 1:
            return JSONResponse({"error": "busy"}, 503)
        n = len(self.created)
        return JSONResponse({"order": n, **body}, 201, headers={"Location": f"/orders/{n}"})

    def app(self, engine: Engine, **options: Any) -> Starlette:
        return Starlette(
            routes=[
                Route("/orders", self.create, methods=["POST"]),
                Route("/orders/{n}", self.create, methods=["PUT"]),
            ],
            middleware=[Middleware(IdempotencyMiddleware, engine=engine, **options)],
        )


@pytest.fixture
def api(engine: Engine) -> Any:
    servers: list[RunningServer] = []

    def start(**options: Any) -> tuple[Orders, str]:
        orders = Orders()
        server = start_server(orders.app(engine, **options))
        servers.append(server)
        return orders, server.url

    yield start
    for server in servers:
        server.stop()


def post(url: str, body: dict[str, Any], key: str | None = "k1", **headers: str) -> httpx.Response:
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f"{url}/orders", json=body, headers=headers, timeout=30)


def test_a_repeat_gets_the_stored_response_without_running_the_app(api: Callable[..., Any]) -> None:
    orders, url = api()
    first = post(url, {"item": "book"})
    again = post(url, {"item": "book"})
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() == {"order": 1, "item": "book"}
    assert again.headers["location"] == "/orders/1"
    assert (
        again.headers["idempotent-replayed"] == "true"
        and "idempotent-replayed" not in first.headers
    )
    assert len(orders.created) == 1
    # without the header, or another method than the guarded ones, nothing is remembered
    post(url, {"item": "book"}, key=None)
    assert len(orders.created) == 2


def test_concurrent_identical_requests_run_the_app_once(api: Callable[..., Any]) -> None:
    orders, url = api(wait_seconds=5)
    answers: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: answers.append(post(url, {"item": "pen", "sleep": 0.5})))
        for _ in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(orders.created) == 1
    assert {a.status_code for a in answers} == {201}
    assert {json.dumps(a.json(), sort_keys=True) for a in answers} == {
        json.dumps({"order": 1, "item": "pen", "sleep": 0.5}, sort_keys=True)
    }
    assert sorted(a.headers.get("idempotent-replayed", "") for a in answers) == ["", *["true"] * 4]


def test_a_twin_that_waits_too_long_gets_409_then_the_stored_response(
    api: Callable[..., Any],
) -> None:
    orders, url = api(wait_seconds=0.3)
    slow = threading.Thread(target=lambda: post(url, {"item": "car", "sleep": 1.5}))
    slow.start()
    time.sleep(0.3)
    busy = post(url, {"item": "car", "sleep": 1.5})
    slow.join()
    assert busy.status_code == 409 and busy.headers["content-type"] == "application/problem+json"
    assert "still being processed" in busy.json()["detail"]
    later = post(url, {"item": "car", "sleep": 1.5})
    assert later.status_code == 201 and later.headers["idempotent-replayed"] == "true"
    assert len(orders.created) == 1


def test_the_same_key_with_other_parameters_is_refused_and_the_app_does_not_run(
    api: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    orders, url = api()
    assert post(url, {"item": "book"}).status_code == 201
    other_body = post(url, {"item": "lamp"})
    other_path = httpx.put(
        f"{url}/orders/9", json={"item": "book"}, headers={"Idempotency-Key": "k1"}
    )
    assert (other_body.status_code, other_path.status_code) == (422, 422)
    problem = other_body.json()
    assert problem["title"] == "Idempotency key reused" and problem["key"] == "k1"
    assert "first used for POST /orders with other parameters" in problem["detail"]
    assert "this request is PUT /orders/9" in other_path.json()["detail"]
    assert len(orders.created) == 1
    assert any("reused" in r.getMessage() for r in caplog.records)
    # the key is the client's: another client (another Authorization) has a key space of its own
    assert post(url, {"item": "lamp"}, Authorization="Bearer other-client").status_code == 201


def test_answers_that_ask_for_a_retry_and_exceptions_keep_nothing(
    api: Callable[..., Any], engine: Engine
) -> None:
    orders, url = api()
    assert post(url, {"fail": "503"}, key="k-503").status_code == 503
    assert post(url, {"fail": "503"}, key="k-503").status_code == 201  # ran again
    assert post(url, {"fail": "exception"}, key="k-boom").status_code == 500
    assert post(url, {"fail": "exception"}, key="k-boom").status_code == 500  # ran again
    assert len(orders.created) == 4
    with engine.connect() as conn:
        kept = conn.execute(select(IDEMPOTENCY_KEYS.c.key, IDEMPOTENCY_KEYS.c.status)).all()
    assert [tuple(r) for r in kept] == [("k-503", "completed")]


def test_hostile_keys_and_large_bodies_are_refused_with_a_problem(api: Callable[..., Any]) -> None:
    orders, url = api(max_body_bytes=1000)
    for key in (b"", b" ", b"x" * 256, "é-key".encode("latin-1"), b"k\x01ey", b"\xff\xfe"):
        status, body = _raw_post(url, key)
        assert status == 400, key
        assert "Idempotency-Key must appear once" in json.loads(body)["detail"]
    twice = httpx.post(
        f"{url}/orders", content=b"{}", headers=[("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    )
    assert twice.status_code == 400
    big = post(url, {"pad": "x" * 2000})
    assert big.status_code == 413 and big.json()["title"] == "Request body too large"
    assert orders.created == []


def test_a_key_is_forgotten_after_its_retention(api: Callable[..., Any], engine: Engine) -> None:
    from datetime import UTC, datetime

    from reconciler.idempotency.store import prune_expired

    orders, url = api(retention=timedelta(seconds=0.5))
    assert post(url, {"item": "a"}).status_code == 201
    time.sleep(0.6)
    reused = post(url, {"item": "b"})  # a new request now, not a conflict
    assert reused.status_code == 201 and reused.json()["item"] == "b"
    assert len(orders.created) == 2
    time.sleep(0.6)
    with engine.begin() as conn:
        assert prune_expired(conn, datetime.now(UTC)) == 1


SERVER = """
import asyncio, pathlib, sys
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from reconciler.idempotency import IdempotencyMiddleware
from reconciler.storage.engine import make_engine

async def create(request):
    pathlib.Path({marker!r}).write_text("running")
    await asyncio.sleep(600)  # killed here, mid-request
    return JSONResponse({{}}, 201)

app = Starlette(
    routes=[Route("/orders", create, methods=["POST"])],
    middleware=[Middleware(IdempotencyMiddleware, engine=make_engine({url!r}), lease_seconds=1.5)],
)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def test_a_request_whose_process_died_can_be_retried_after_its_lease(
    api: Callable[..., Any], db_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "running"
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(SERVER.format(marker=str(marker), url=db_url)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(script), str(port)], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 30
        client = threading.Thread(
            target=lambda: _swallow(lambda: post(f"http://127.0.0.1:{port}", {"item": "x"}))
        )
        while True:  # the server may still be starting
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=0.5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        client.start()
        while not marker.exists():
            assert time.monotonic() < deadline, "the request never reached the app"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    client.join()
    orders, url = api(wait_seconds=0)
    assert post(url, {"item": "x"}).status_code == 409  # the dead request's lease still holds
    time.sleep(1.6)
    retried = post(url, {"item": "x"})
    assert retried.status_code == 201 and "idempotent-replayed" not in retried.headers
    assert len(orders.created) == 1


def _swallow(fn: Callable[[], object]) -> None:
    with contextlib.suppress(httpx.TransportError):  # the server was killed under it
        fn()


def _raw_post(url: str, key: bytes) -> tuple[int, bytes]:
    """A POST with a header value no well-behaved client sends (httpx refuses to)."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        b"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\nConnection: close\r\nIdempotency-Key: " + key + b"\r\n\r\n{}"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_route_can_require_the_key_and_keep_it_for_its_own_retention(
    api: Callable[..., Any], engine: Engine
) -> None:
    """Per-route policy: POST /orders requires the key (the draft's 400, naming the header) and
    keeps it 30 days; PUT /orders/* keeps the middleware's default."""
    from datetime import UTC, datetime

    from reconciler.idempotency import RoutePolicy

    orders, url = api(
        policies=[("POST /orders", RoutePolicy(required=True, retention=timedelta(days=30)))]
    )
    refused = post(url, {"item": "book"}, key=None)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/problem+json"
    assert "POST /orders needs an Idempotency-Key header" in refused.json()["detail"]
    assert orders.created == []
    assert post(url, {"item": "book"}, key="k-pay").status_code == 201
    put = httpx.put(f"{url}/orders/1", json={"n": 1}, headers={"Idempotency-Key": "k-put"})
    assert put.status_code == 201
    with engine.connect() as conn:
        kept = dict(
            conn.execute(select(IDEMPOTENCY_KEYS.c.key, IDEMPOTENCY_KEYS.c.expires_at)).all()
        )
    now = datetime.now(UTC).replace(tzinfo=None)

    def days(at: datetime) -> float:
        return ((at.replace(tzinfo=None) if at.tzinfo else at) - now).total_seconds() / 86400

    assert 29.9 < days(kept["k-pay"]) <= 30 and 6.9 < days(kept["k-put"]) <= 7
    httpx.put(f"{url}/orders/2", json={"n": 2})  # not required there: runs, remembers nothing
    assert len(orders.created) == 3


def test_a_quoted_key_is_the_bare_key_and_re_serialised_json_is_the_same_request(
    api: Callable[..., Any],
) -> None:
    """The draft's header is a structured-field string: "abc" and abc are one key. A JSON body is
    compared as canonical JSON, so a client that re-serialises it (other key order, spacing) gets
    the stored answer, not 422; with fingerprint = "bytes" it is another request."""
    from reconciler.idempotency import RoutePolicy

    orders, url = api()
    first = httpx.post(
        f"{url}/orders",
        content=b'{"item": "book", "qty": 1}',
        headers={"Idempotency-Key": '"abc"', "Content-Type": "application/json"},
    )
    again = httpx.post(
        f"{url}/orders",
        content=b'{"qty":1,"item":"book"}',
        headers={"Idempotency-Key": "abc", "Content-Type": "application/json"},
    )
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["idempotent-replayed"] == "true" and len(orders.created) == 1
    bad = httpx.post(f"{url}/orders", json={}, headers={"Idempotency-Key": '"unterminated'})
    assert bad.status_code == 400

    strict_orders, strict = api(policies=[("* /orders", RoutePolicy(fingerprint="bytes"))])
    httpx.post(
        f"{strict}/orders",
        content=b'{"item": "pen"}',
        headers={"Idempotency-Key": "bytes-key", "Content-Type": "application/json"},
    )
    other = httpx.post(
        f"{strict}/orders",
        content=b'{"item":"pen"}',
        headers={"Idempotency-Key": "bytes-key", "Content-Type": "application/json"},
    )
    assert other.status_code == 422 and len(strict_orders.created) == 1


def test_another_query_string_or_content_type_is_another_request(api: Callable[..., Any]) -> None:
    """The key's first request was ``POST /orders?dry_run=1``: the same body without the query (or
    the same bytes sent as another type) is another request, refused with 422, and the app does not
    run it."""
    orders, url = api()
    body, json_type = b'{"item": "book"}', {"Content-Type": "application/json"}
    first = httpx.post(
        f"{url}/orders?dry_run=1", content=body, headers={"Idempotency-Key": "q1", **json_type}
    )
    same = httpx.post(
        f"{url}/orders?dry_run=1", content=body, headers={"Idempotency-Key": "q1", **json_type}
    )
    no_query = httpx.post(
        f"{url}/orders", content=body, headers={"Idempotency-Key": "q1", **json_type}
    )
    assert (first.status_code, same.status_code, no_query.status_code) == (201, 201, 422)
    assert same.headers["idempotent-replayed"] == "true" and len(orders.created) == 1

    canonical = b'{"item":"book"}'  # (so that only the type differs, not the compared bytes)
    httpx.post(f"{url}/orders", content=canonical, headers={"Idempotency-Key": "t1", **json_type})
    as_text = httpx.post(
        f"{url}/orders",
        content=canonical,
        headers={"Idempotency-Key": "t1", "Content-Type": "text/plain"},
    )
    assert as_text.status_code == 422 and len(orders.created) == 2


def test_a_json_body_naming_a_key_twice_is_refused_not_read_by_its_last_value(
    api: Callable[..., Any], engine: Engine
) -> None:
    """``{"amount": 1, "amount": 1000}``: one parser reads 1, another 1000; a repeat that changed
    the first value would otherwise pass as the same request."""
    orders, url = api()
    twice = httpx.post(
        f"{url}/orders",
        content=b'{"item": "book", "amount": 1, "amount": 1000}',
        headers={"Idempotency-Key": "dup", "Content-Type": "application/json"},
    )
    assert twice.status_code == 400
    assert twice.headers["content-type"] == "application/problem+json"
    assert "'amount' more than once" in twice.json()["detail"]
    assert orders.created == []
    with engine.connect() as conn:
        assert conn.execute(select(IDEMPOTENCY_KEYS)).all() == []  # nothing kept: not begun
    nested = httpx.post(
        f"{url}/orders",
        content=b'{"item": {"sku": 1, "sku": 2}}',
        headers={"Idempotency-Key": "dup2", "Content-Type": "application/json"},
    )
    assert nested.status_code == 400 and orders.created == []
