"""The receiver at the edge, over real loopback sockets (uvicorn), on SQLite and PostgreSQL: half-sent
bodies are answered 408 within ``[receiver] body_timeout_seconds``, more webhook requests at once
than ``limit_concurrency`` get 503 with Retry-After while health checks still answer, and a client
that goes away mid-body is one log line, not a traceback."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import Engine, func, select

from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import make_settings
from tests.deliveries import stripe_delivery

SLOW_CLIENTS = 100  # the count a reviewer held open for 8 s, none answered (issue 34)


def half_sent(url: str, declared: int = 1000, sent: bytes = b'{"id": "evt_') -> socket.socket:
    """A connection that sends its headers and the start of its body, then nothing more."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10)
    head = (
        f"POST /webhooks/stripe HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + sent)
    return sock


def status_of(sock: socket.socket) -> tuple[int, str]:
    """The answer's status and its headers and body as lower-case text."""
    data = b""
    while b"\r\n\r\n" not in data or len(data) < _length(data):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\r\n")
    return int(line.split()[1]), rest.decode(errors="replace").lower()


def _length(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return 0


def rows(engine: Engine) -> tuple[int, list[tuple[int | None, str | None]]]:
    with engine.connect() as conn:
        events = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
        deliveries = conn.execute(select(DELIVERIES.c.status_code, DELIVERIES.c.reason)).all()
    return int(events), [(d[0], d[1]) for d in deliveries]


def metric(url: str, name: str) -> float:
    """One sample's value from the receiver's /metrics (0 when absent)."""
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def edge_receiver(db_url: str, engine: Engine, serve: Any, **receiver: Any) -> str:
    settings = make_settings(db_url, receiver=receiver)
    return str(serve(create_app(settings, engine)).url)


def test_half_sent_bodies_are_answered_408_within_the_body_timeout(
    db_url: str, engine: Engine, serve: Any
) -> None:
    url = edge_receiver(db_url, engine, serve, body_timeout_seconds=1.0, rejected_log_per_minute=40)
    started = time.monotonic()
    slow = [half_sent(url) for _ in range(SLOW_CLIENTS)]
    try:
        headers, body = stripe_delivery("evt_neighbour")
        # a whole delivery among them is not held up by them
        assert (
            httpx.post(f"{url}/webhooks/stripe", content=body, headers=headers).status_code == 200
        )
        answers = [status_of(sock) for sock in slow]
    finally:
        for sock in slow:
            sock.close()
    elapsed = time.monotonic() - started
    print(f"figures: {SLOW_CLIENTS} half-sent bodies all answered 408 after {elapsed:.2f} s")
    assert elapsed < 6
    assert {status for status, _ in answers} == {408}
    assert all("body not received in full within 1 s" in text for _, text in answers)
    events, deliveries = rows(engine)
    assert events == 1
    refused = [d for d in deliveries if d[0] == 408]
    # one address's refusals are logged up to rejected_log_per_minute; the rest only counted
    assert len(refused) == 40
    assert refused[0][1] == "body not received in full within 1 s"
    assert metric(url, "hookledger_rejected_deliveries_not_logged_total") == SLOW_CLIENTS - 40


def test_webhook_requests_past_the_limit_get_503_with_retry_after_and_health_still_answers(
    db_url: str, engine: Engine, serve: Any
) -> None:
    url = edge_receiver(db_url, engine, serve, body_timeout_seconds=2.0, limit_concurrency=3)
    slow = [half_sent(url) for _ in range(3)]
    try:
        time.sleep(0.3)  # the three are in the app, waiting for their bodies
        headers, body = stripe_delivery("evt_while_full")
        busy = httpx.post(f"{url}/webhooks/stripe", content=body, headers=headers)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert busy.json() == {
            "status": "error",
            "reason": "receiver busy: 3 requests in progress",
        }
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert "hookledger_receiver_busy_total 1.0" in httpx.get(f"{url}/metrics").text
        assert [status_of(sock)[0] for sock in slow] == [408, 408, 408]
    finally:
        for sock in slow:
            sock.close()
    # the provider's retry, once the slow ones are gone, is stored
    again = httpx.post(f"{url}/webhooks/stripe", content=body, headers=headers)
    assert again.status_code == 200 and again.json()["status"] == "accepted"
    events, deliveries = rows(engine)
    assert events == 1 and sorted(d[0] or 0 for d in deliveries) == [200, 408, 408, 408]


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    yield handler
    for name in ("uvicorn.error", "reconciler.inbox.receiver"):
        logging.getLogger(name).removeHandler(handler)


def listen(handler: Records) -> None:
    """Hear uvicorn's and the receiver's log lines. After the server has started: uvicorn's logging
    set-up replaces its loggers' handlers, and they do not propagate to caplog's root logger."""
    for name in ("uvicorn.error", "reconciler.inbox.receiver"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def test_a_client_gone_mid_body_is_one_log_line_and_nothing_stored(
    db_url: str, engine: Engine, serve: Any, records: Records
) -> None:
    url = edge_receiver(db_url, engine, serve)
    listen(records)
    sock = half_sent(url)
    time.sleep(0.2)
    sock.close()
    deadline = time.monotonic() + 5
    while not records.records and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # anything else it would log
    lines = [(r.name, r.getMessage(), r.exc_info is not None) for r in records.records]
    assert lines == [
        ("reconciler.inbox.receiver", "client disconnected before sending the whole body", False)
    ]
    assert rows(engine) == (0, [])
    assert 'hookledger_client_disconnects_total{source="stripe"} 1.0' in (
        httpx.get(f"{url}/metrics").text
    )
