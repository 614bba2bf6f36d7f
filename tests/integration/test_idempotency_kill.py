"""What a crash does to a request with an Idempotency-Key, measured with SIGKILL on SQLite and
PostgreSQL: a uvicorn process (tests/idempotency_app.py) on a loopback socket the test holds, whose
endpoint adds to a balance (not idempotent), is killed at a chosen point of one request, restarted
on the same socket, and the client retries with the same key.

- Writes through the middleware's transaction: killed after the write or at the COMMIT (the key's
  completion has run), neither the write nor the response is kept, and the retry, once the lease has
  run out, runs the request once; killed after the COMMIT, the retry replays the stored response.
- Writes through the app's own engine, killed between its commit and the key's record: the retry
  runs the app again (at-least-once): the balance is added twice, as docs/outbox.md says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from tests.idempotency_app import balance, drop_balances, reset_balances

ROOT = Path(__file__).resolve().parents[2]
BODY = {"account": "a", "cents": 100}


@dataclass
class Crash:
    first: Exception | None  # what the killed request's client got
    retry: httpx.Response  # the retry with the same key, against the restarted process
    again: httpx.Response  # one more, once the retry was answered
    balance: int


@pytest.fixture(autouse=True)
def _no_balances_left(engine: Engine) -> Iterator[None]:
    yield
    drop_balances(engine)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """One listening socket for the process and its restart: the port never changes hands."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


def crash(
    engine: Engine, db_url: str, listener: socket.socket, tmp_path: Path, *, writes: str, at: str
) -> Crash:
    reset_balances(engine, a=0)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    marker = tmp_path / "stopped"
    failures: list[Exception] = []
    answers: list[httpx.Response] = []

    def first() -> None:
        try:
            answers.append(post(url))
        except httpx.TransportError as exc:  # the process died under it
            failures.append(exc)

    proc = _serve(listener, db_url, writes, at, marker)
    client = threading.Thread(target=first)
    try:
        client.start()
        deadline = time.monotonic() + 20
        while not marker.exists():
            assert not answers, f"answered before {at}: {answers[0].status_code} {answers[0].text}"
            assert time.monotonic() < deadline and proc.poll() is None, f"never reached {at}"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        _stop(proc)
    client.join(timeout=20)
    restarted = _serve(listener, db_url, writes, "none", marker)
    try:
        retry = post(url)  # waits (wait_seconds) for the dead request's lease to run out
        again = post(url)
    finally:
        _stop(restarted)
    return Crash(failures[0] if failures else None, retry, again, balance(engine, "a"))


def post(url: str) -> httpx.Response:
    return httpx.post(f"{url}/add", json=BODY, headers={"Idempotency-Key": "pay-1"}, timeout=30)


def _serve(
    sock: socket.socket, db_url: str, writes: str, crash_at: str, marker: Path
) -> subprocess.Popen[bytes]:
    fd = sock.fileno()
    command = [sys.executable, "-m", "tests.idempotency_app", str(fd), db_url, writes, crash_at]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([*command, str(marker)], cwd=ROOT, env=env, pass_fds=(fd,))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.parametrize("at", ["after-write", "at-commit"])
def test_killed_before_the_commit_the_retry_runs_the_request_once(
    engine: Engine, db_url: str, listener: socket.socket, tmp_path: Path, at: str
) -> None:
    done = crash(engine, db_url, listener, tmp_path, writes="middleware", at=at)
    assert done.first is not None  # the killed request was never answered
    assert done.retry.status_code == 201 and "idempotent-replayed" not in done.retry.headers
    assert done.retry.json() == {"balance": 100, "key": "pay-1"}
    assert done.again.headers["idempotent-replayed"] == "true"
    assert done.again.json() == done.retry.json()
    assert done.balance == 100  # added once


def test_killed_after_the_commit_the_retry_replays_the_stored_response(
    engine: Engine, db_url: str, listener: socket.socket, tmp_path: Path
) -> None:
    done = crash(engine, db_url, listener, tmp_path, writes="middleware", at="after-commit")
    assert done.first is not None
    assert done.retry.status_code == 201 and done.retry.headers["idempotent-replayed"] == "true"
    assert done.retry.json() == {"balance": 100, "key": "pay-1"}  # the killed request's answer
    assert done.balance == 100


def test_with_its_own_engine_a_kill_after_its_commit_applies_the_effect_twice(
    engine: Engine, db_url: str, listener: socket.socket, tmp_path: Path
) -> None:
    """At-least-once, as documented: the app's commit is not the key's, so the retry runs it."""
    done = crash(engine, db_url, listener, tmp_path, writes="own", at="after-write")
    assert done.first is not None
    assert done.retry.status_code == 201 and "idempotent-replayed" not in done.retry.headers
    assert done.retry.json() == {"balance": 200, "key": "pay-1"}
    assert done.balance == 200  # one request, two applications
    assert (
        done.again.headers["idempotent-replayed"] == "true" and done.again.json()["balance"] == 200
    )
