"""Kill -9 in the middle of the outgoing side, on SQLite and PostgreSQL: whatever moment the publisher
or the worker dies at, every message reaches the receiver, and its effect happens once per key.

The receiver is a stand-in that honours ``Idempotency-Key`` (as the APIs an outbox calls do): a
message whose attempt was in flight when the publisher died is sent again with the same key, which
the receiver recognises. Delivery on the wire is at least once; the effect is exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from reconciler.outbox import add_message
from reconciler.storage.models import INBOX_EVENTS, OUTBOX
from tests.conftest import RunningServer, start_server
from tests.integration.test_worker import put
from tests.standin import StandIn

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def receiver() -> Iterator[tuple[StandIn, RunningServer]]:
    standin = StandIn(secret=SECRET, delay=0.01)
    server = start_server(standin.app)
    yield standin, server
    server.stop()


def _config(tmp_path: Path, db_url: str, url: str, handlers: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        textwrap.dedent(f"""
        [database]
        url = "{db_url}"

        [worker]
        handlers = [{handlers}]
        lease_seconds = 1.5
        backoff_base_seconds = 0.05
        backoff_max_seconds = 0.1
        poll_interval_seconds = 0.05

        [outbox]
        concurrency = 4
        lease_seconds = 1.5
        poll_interval_seconds = 0.05
        backoff_base_seconds = 0.05
        backoff_max_seconds = 0.1

        [[outbox.targets]]
        name = "crm"
        url = "{url}/in"
        timeout_seconds = 1.0
        signing_secret_env = "T_KILL_SECRET"

        [[sources]]
        name = "stripe"
        kind = "stripe"
        signing_secret_env = "T_STRIPE_SECRET"
        """)
    )
    return path


def _hookledger(
    config: Path, *args: str, extra_path: Path | None = None
) -> subprocess.Popen[bytes]:
    """``hookledger ARGS`` as a process of its own, its output in ``<config dir>/out.txt``."""
    path = os.pathsep.join([str(ROOT), *([str(extra_path)] if extra_path else [])])
    env = dict(os.environ, T_KILL_SECRET=SECRET, PYTHONPATH=path)
    with (config.parent / "out.txt").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli.main", *args, "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _finish(proc: subprocess.Popen[bytes], config: Path, timeout: float = 120) -> str:
    proc.wait(timeout=timeout)
    out = (config.parent / "out.txt").read_text()
    assert proc.returncode == 0, out
    return out


def _until(condition: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _unsent(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(OUTBOX).where(OUTBOX.c.status != "sent")
            ).scalar_one()
        )


def test_a_publisher_killed_mid_burst_loses_nothing_and_sends_each_key_once(
    engine: Engine, db_url: str, tmp_path: Path, receiver: tuple[StandIn, RunningServer]
) -> None:
    standin, server = receiver
    config = _config(tmp_path, db_url, server.url)
    n = 400
    with engine.begin() as conn:
        stored = {add_message(conn, "crm", {"n": i}, key=f"burst-{i}"): i for i in range(n)}
    for kill_after in (60, 200):  # twice, at two moments of the burst
        proc = _hookledger(config, "publish")
        try:
            _until(lambda k=kill_after: len(standin.effects) >= k, f"{kill_after} effects")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    with engine.connect() as conn:
        held = conn.execute(
            select(func.count()).select_from(OUTBOX).where(OUTBOX.c.status == "sending")
        ).scalar_one()
    # killed mid-burst, leases still held: up to 4 (the concurrency) a kill, and the first kill's
    # may not have run out yet when the second comes on a fast machine
    assert 0 < held <= 2 * 4 and 0 < _unsent(engine) < n
    time.sleep(1.6)  # the dead publisher's leases run out
    out = _finish(_hookledger(config, "publish", "--once"), config)
    assert "claimed" in out
    assert _unsent(engine) == 0
    assert set(standin.effects) == set(stored)  # none lost
    for key, body in standin.effects.items():  # each applied once, with the stored payload
        assert body == f'{{"n":{stored[key]}}}'.encode()
    resent = [k for k, times in standin.arrivals.items() if times > 1]
    # only what was in flight at a kill went out twice (4 at a time), with its own key; the
    # receiver's delay after each effect makes such an attempt all but certain at each kill
    assert 1 <= len(resent) <= 2 * 4, resent
    assert standin.refused == 0


HANDLERS = """
import pathlib
import time

from reconciler.inbox.handlers import handler

MARKER = pathlib.Path({marker!r})


@handler("stripe", "*")
def paid(event, conn):
    event.outbox.add("crm", {{"event": event.event_id}})
    if event.event_id == "evt_slow" and not MARKER.exists():
        MARKER.write_text(str(event.attempt))  # in the handler, its message written, not committed
        time.sleep(600)
"""


def test_a_worker_killed_mid_handler_sends_that_events_message_exactly_once(
    engine: Engine, db_url: str, tmp_path: Path, receiver: tuple[StandIn, RunningServer]
) -> None:
    standin, server = receiver
    marker = tmp_path / "in_handler"
    modules = tmp_path / "mods"
    modules.mkdir()
    (modules / "kill_handlers.py").write_text(HANDLERS.format(marker=str(marker)))
    config = _config(tmp_path, db_url, server.url, handlers='"kill_handlers"')
    events = [f"evt_{i:03d}" for i in range(30)] + ["evt_slow"]
    for event_id in events:
        put(engine, event_id)
    proc = _hookledger(config, "worker", "--publish", extra_path=modules)
    try:
        _until(marker.exists, "the worker to enter the slow handler")
        time.sleep(0.3)  # the other threads publish what was processed before it
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with engine.connect() as conn:
        slow = conn.execute(
            select(INBOX_EVENTS.c.status, INBOX_EVENTS.c.attempts).where(
                INBOX_EVENTS.c.event_id == "evt_slow"
            )
        ).one()
        assert tuple(slow) == ("processing", 1)
        assert (
            conn.execute(
                select(func.count()).select_from(OUTBOX).where(OUTBOX.c.event_id == "evt_slow")
            ).scalar_one()
            == 0
        )  # its message rolled back with the handler's transaction
    time.sleep(1.6)  # the dead worker's lease runs out
    out = _finish(_hookledger(config, "worker", "--once", "--publish", extra_path=modules), config)
    assert "outbox: claimed" in out
    expected = {f"stripe:{e}:crm" for e in events}
    assert set(standin.effects) == expected
    with engine.connect() as conn:
        rows = conn.execute(select(OUTBOX.c.key, OUTBOX.c.status)).all()
        statuses = dict(
            conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.status)).tuples().all()
        )
    assert sorted(k for k, _ in rows) == sorted(expected)  # one message per event, no second
    assert {s for _, s in rows} == {"sent"} and set(statuses.values()) == {"processed"}
