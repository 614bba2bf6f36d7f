"""Applied once, whatever happens (issue 44), with real ``hookledger worker`` processes on SQLite and
PostgreSQL, the business tables in the inbox's database or in a separate one:

- kill -9 of the worker process at every point of an attempt (before the handler's write, after
  the business commit, after the processed mark): every balance added exactly once;
- a handler three times slower than the lease, two workers: one run, one effect, processed;
- a handler that hangs for an hour on one event, 200 events behind it, two workers: the 200
  processed within handler_timeout_seconds and a few seconds, the hung event dead with class
  ``hung``, nothing applied twice;
- SIGTERM stops a worker within shutdown_grace_seconds whatever its handler does;
- kill -9 of the supervisor: its processes exit, and a new worker applies the rest once.

The handlers add to a balance (not idempotent on purpose): tests/handlers_for_applied.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from reconciler.storage.models import APPLIED, INBOX_EVENTS
from tests.balances import balances
from tests.integration.test_worker import put

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, db_url: str, business_url: str | None = None, **worker: float) -> Path:
    settings: dict[str, float] = {
        "lease_seconds": 2.0,
        "backoff_base_seconds": 0.05,
        "backoff_max_seconds": 0.1,
        "poll_interval_seconds": 0.05,
        "batch_size": 20,
        **worker,
    }
    path = tmp_path / "config.toml"
    path.write_text(
        textwrap.dedent(f"""
        [database]
        url = "{db_url}"
        """)
        + (f'[business]\nurl = "{business_url}"\n' if business_url else "")
        + '[worker]\nhandlers = ["tests.handlers_for_applied"]\n'
        + "".join(f"{key} = {value}\n" for key, value in settings.items())
        + textwrap.dedent("""
        [[sources]]
        name = "stripe"
        kind = "stripe"
        signing_secret_env = "T_STRIPE_SECRET"
        """)
    )
    (tmp_path / "runs.txt").write_text("")
    return path


def _worker(
    config: Path, *args: str, plan: dict[str, Any] | None = None
) -> subprocess.Popen[bytes]:
    plan_file = config.parent / "plan.json"
    plan_file.write_text(json.dumps(plan or {}))
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        HL_PLAN=str(plan_file),
        HL_RUNS=str(config.parent / "runs.txt"),
    )
    with (config.parent / f"out-{time.monotonic_ns()}.txt").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli.main", "worker", *args, "--config", str(config)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its processes in a group of their own, killed together
        )


def _output(config: Path) -> str:
    return "".join(p.read_text() for p in sorted(config.parent.glob("out-*.txt")))


def _statuses(engine: Engine) -> dict[str, tuple[str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.status, INBOX_EVENTS.c.error_class)
        )
        return {r.event_id: (str(r.status), r.error_class and str(r.error_class)) for r in rows}


def _balances(business: Engine) -> dict[str, int]:
    with business.connect() as conn:
        return {r.account: r.amount for r in conn.execute(select(balances))}


def _lines(config: Path) -> list[list[str]]:
    return [line.split() for line in (config.parent / "runs.txt").read_text().splitlines()]


def _runs(config: Path) -> list[str]:
    """The event of each handler run, in order."""
    return [words[0] for words in _lines(config) if words[0] != "DIES"]


def _died(config: Path) -> dict[str, str]:
    """Event -> the process that was to die on it, where that process ran nothing afterwards."""
    lines = _lines(config)
    died = {}
    for i, words in enumerate(lines):
        if words[0] == "DIES" and all(later[1] != words[2] for later in lines[i + 1 :]):
            died[words[1]] = words[2]
    return died


def _until(condition: Any, what: str, timeout: float, config: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(
                f"{what} did not happen within {timeout} s; worker output:\n{_output(config)}"
            )
        time.sleep(0.1)


def _group_runs(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie, waiting for its reaper, does not)."""
    procfs = Path("/proc")
    if not procfs.is_dir():  # no procfs: any member counts, zombies too
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in procfs.glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue  # it ended while being read
        if int(group) == pgid and state != "Z":
            return True
    return False


def _leased(engine: Engine) -> bool:
    """Whether an event's lease has not run out yet."""
    with engine.connect() as conn:
        leased = select(func.count()).where(INBOX_EVENTS.c.lease_expires_at > datetime.now(UTC))
        return conn.execute(leased).scalar_one() > 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker and every process it started (none may outlive its test)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_kill_9_at_every_point_of_an_attempt_applies_each_event_once(
    engine: Engine, db_url: str, business_url: str | None, business: Engine, tmp_path: Path
) -> None:
    ids = [f"evt_k{i:03d}" for i in range(200)]
    for event_id in ids:
        put(engine, event_id)
    points = ["before", "after_business", "after_processed"]
    plan = {event_id: {"kill": points[i % 3]} for i, event_id in enumerate(ids[::10])}
    config = _config(tmp_path, db_url, business_url)
    proc = _worker(config, "--concurrency", "2", plan=plan)
    try:
        _until(
            lambda: set(s for s, _ in _statuses(engine).values()) == {"processed"},
            "every event processed",
            150,
            config,
        )
    finally:
        _stop(proc)
    assert _balances(business) == {event_id: 100 for event_id in ids}  # each added exactly once
    runs = _runs(config)
    # Each planned death happened, once: a handler killed before its commit, or after the business
    # commit of a separate database, ran again (a lease lost under load may add a run, never an
    # effect: the balances above).
    assert set(_died(config)) == set(plan)  # each process planned to die ran nothing after
    again = {"before", "after_business"} if business_url else {"before"}
    for event_id, step in plan.items():
        assert runs.count(event_id) >= (2 if step["kill"] in again else 1), event_id
    with business.connect() as conn:
        marks = conn.execute(select(func.count()).select_from(APPLIED)).scalar_one()
    assert marks == 200  # the applied mark of each, in the database that holds its writes
    print(
        f"figures: 200 events, {len(plan)} worker processes killed, {len(runs)} handler runs, "
        f"200 balances of 100 each"
    )


def test_a_handler_slower_than_its_lease_runs_once_with_two_workers(
    engine: Engine, db_url: str, business_url: str | None, business: Engine, tmp_path: Path
) -> None:
    put(engine, "evt_slow")
    config = _config(tmp_path, db_url, business_url, lease_seconds=2.0)
    plan = {"evt_slow": {"sleep": 6.0}}  # three times the lease
    procs = [_worker(config, plan=plan), _worker(config, plan=plan)]
    try:
        _until(lambda: _statuses(engine)["evt_slow"][0] == "processed", "processed", 30, config)
        time.sleep(2.5)  # a second run, had one started, would have shown by now
    finally:
        for proc in procs:
            _stop(proc)
    assert _runs(config) == ["evt_slow"]
    assert _balances(business) == {"evt_slow": 100}


def test_a_hung_handler_is_abandoned_and_dead_as_hung_while_the_rest_flows(
    engine: Engine, db_url: str, business_url: str | None, business: Engine, tmp_path: Path
) -> None:
    put(engine, "evt_hang")
    ids = [f"evt_h{i:03d}" for i in range(200)]
    for event_id in ids:
        put(engine, event_id)
    config = _config(
        tmp_path, db_url, business_url, handler_timeout_seconds=3.0, max_hangs=2, lease_seconds=2.0
    )
    plan = {"evt_hang": {"sleep": 3600}}
    began = time.monotonic()
    procs = [_worker(config, plan=plan), _worker(config, plan=plan)]
    try:
        _until(
            lambda: all(_statuses(engine)[i][0] == "processed" for i in ids),
            "the 200 processed",
            3.0 + 15,
            config,
        )
        flowed = time.monotonic() - began
        _until(
            lambda: _statuses(engine)["evt_hang"][0] == "dead", "the hung event dead", 30, config
        )
    finally:
        for proc in procs:
            _stop(proc)
    assert flowed < 3.0 + 15
    print(f"figures: the 200 processed {flowed:.1f} s after the workers started, one hanging")
    assert _statuses(engine)["evt_hang"] == ("dead", "hung")
    assert _runs(config).count("evt_hang") == 2  # max_hangs attempts, each abandoned
    assert _balances(business) == {event_id: 100 for event_id in ids}
    with engine.connect() as conn:
        last = conn.execute(
            select(INBOX_EVENTS.c.last_error, INBOX_EVENTS.c.hangs).where(
                INBOX_EVENTS.c.event_id == "evt_hang"
            )
        ).one()
    assert last.hangs == 2 and "handler_timeout" in last.last_error
    assert "handler_timeout" in _output(config)


def test_sigterm_stops_a_worker_within_its_grace_whatever_the_handler_does(
    engine: Engine, db_url: str, inbox_tables: Engine, tmp_path: Path
) -> None:
    put(engine, "evt_stuck")
    config = _config(tmp_path, db_url, shutdown_grace_seconds=1.0)
    proc = _worker(config, plan={"evt_stuck": {"sleep": 3600}})
    try:
        _until(lambda: _runs(config) == ["evt_stuck"], "the handler started", 30, config)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        took = time.monotonic() - sent
    finally:
        _stop(proc)
    assert proc.returncode == 0, _output(config)
    assert took < 1.0 + 3.0  # the grace, and the time to kill and give the event back
    print(f"figures: stopped {took:.2f} s after SIGTERM (grace 1 s), the handler still sleeping")
    status = _statuses(engine)["evt_stuck"]
    assert status == ("pending", None)  # given back, due at once: a shutdown is not a hang
    assert _balances(inbox_tables) == {}


def test_kill_9_of_the_supervisor_stops_its_processes_and_nothing_applies_twice(
    engine: Engine, db_url: str, inbox_tables: Engine, tmp_path: Path
) -> None:
    ids = [f"evt_s{i:03d}" for i in range(60)]
    for event_id in ids:
        put(engine, event_id)
    config = _config(tmp_path, db_url, lease_seconds=1.0)
    plan = {event_id: {"sleep": 0.05} for event_id in ids}
    proc = _worker(config, "--concurrency", "2", plan=plan)
    try:
        _until(lambda: len(_runs(config)) >= 5, "some events applied", 30, config)
        proc.kill()  # the supervisor
        proc.wait(timeout=10)
        count = len(_runs(config))
        # its processes notice within half a second, and stop: then they can run nothing more
        _until(lambda: not _group_runs(proc.pid), "its processes stopped", 10, config)
        assert len(_runs(config)) <= count + 2  # at most the attempts that were running
    finally:
        _stop(proc)
    _until(lambda: not _leased(engine), "the dead processes' leases ran out", 10, config)
    again = _worker(config, "--once", plan=plan)
    again.wait(timeout=60)
    assert again.returncode == 0, _output(config)
    assert set(s for s, _ in _statuses(engine).values()) == {"processed"}
    assert _balances(inbox_tables) == {event_id: 100 for event_id in ids}
