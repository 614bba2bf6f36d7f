"""Scale-out on PostgreSQL: 2 receivers, 2 workers and 2 schedulers, as real processes, against one
database, under a burst of signed deliveries with duplicates: every event stored once and applied
exactly once, and one reconciliation per source per scheduled slot (the other scheduler's run of
the slot skips on the source's lease)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, func, select, text

from connectors.sandbox.app import Sandbox
from connectors.sandbox.sender import DeliveryFaults, Report, plan, send, stripe_webhooks
from connectors.sandbox.world import build_world
from reconciler.storage.models import INBOX_EVENTS, RECON_RUNS
from reconciler.storage.testing import scratch_postgres_schema
from tests.conftest import SECRETS, start_server

ROOT = Path(__file__).resolve().parents[2]
HOOKLEDGER = Path(sys.executable).with_name("hookledger")
EVENTS = 200


@pytest.fixture
def database() -> Iterator[str]:
    base = os.environ.get("HOOKLEDGER_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("HOOKLEDGER_TEST_POSTGRES_URL is not set")
    with scratch_postgres_schema(base, prefix="hl_scale") as url:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE scaleout_effects (event_id VARCHAR(255) NOT NULL)"))
        engine.dispose()
        yield url


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_of_each_on_one_postgresql(database: str, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    world = build_world(
        11,
        now=now - timedelta(minutes=10),
        stripe_events=EVENTS,
        github_deliveries=0,
        shopify_orders=0,
        span=timedelta(hours=2),
    )
    sandbox = start_server(Sandbox(world).app)
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f"""
[worker]
handlers = ["tests.handlers_for_scaleout"]
poll_interval_seconds = 0.2

[reconcile]
schedule = "* * * * *"
grace_seconds = 0
snapshot_interval_seconds = 5

[[sources]]
name = "stripe"
kind = "stripe"
base_url = "{sandbox.url}"
api_key_env = "SCALE_STRIPE_KEY"
signing_secret_env = "T_STRIPE_SECRET"
max_concurrency = 1
"""
    )
    env = dict(
        os.environ,
        HOOKLEDGER_DATABASE_URL=database,
        SCALE_STRIPE_KEY="sk_test_sandbox",
        T_STRIPE_SECRET=SECRETS["stripe"],
        PYTHONPATH=str(ROOT),
    )
    ports = [free_port(), free_port()]
    commands = [
        *(["serve", "--port", str(port)] for port in ports),
        ["worker"],
        ["worker"],
        ["schedule"],
        ["schedule"],
    ]
    processes = [
        subprocess.Popen(
            [str(HOOKLEDGER), *command, "--config", str(cfg)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for command in commands
    ]
    engine = create_engine(database)
    try:
        for port in ports:  # both receivers up
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "a receiver did not start"
                time.sleep(0.2)
        # the burst: every event, a third of them twice, reordered, split over both receivers and
        # sent from four threads at once
        hooks, report = plan(
            stripe_webhooks(world.stripe_events, SECRETS["stripe"]),
            DeliveryFaults(duplicate=0.3, reorder=0.2),
            seed=5,
        )
        assert not report.dropped
        parts = [hooks[i::4] for i in range(4)]
        reports = [Report() for _ in parts]

        def burst(i: int) -> None:
            with httpx.Client(timeout=30) as client:
                url = f"http://127.0.0.1:{ports[i % 2]}/webhooks/stripe"
                send(client, url, parts[i], reports[i])

        threads = [threading.Thread(target=burst, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = Counter[str]()
        for r in reports:
            statuses.update(r.responses)
        assert statuses == Counter({"200": len(hooks)}) and len(hooks) > EVENTS
        # every event stored once, and applied exactly once by the two workers
        deadline = time.monotonic() + 90
        while True:
            with engine.connect() as conn:
                stored = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
                pending = conn.execute(
                    select(func.count()).where(INBOX_EVENTS.c.status != "processed")
                ).scalar_one()
            if stored == EVENTS and pending == 0:
                break
            assert time.monotonic() < deadline, (stored, pending)
            time.sleep(0.5)
        with engine.connect() as conn:
            applied = Counter(
                conn.execute(text("SELECT event_id FROM scaleout_effects")).scalars().all()
            )
        assert len(applied) == EVENTS and set(applied.values()) == {1}
        # one reconciliation per scheduled slot: wait for a slot both schedulers fired in
        deadline = time.monotonic() + 150
        while True:
            with engine.connect() as conn:
                runs = conn.execute(
                    select(RECON_RUNS.c.started_at, RECON_RUNS.c.status).where(
                        RECON_RUNS.c.source == "stripe"
                    )
                ).all()
            finished = [r for r in runs if str(r.status) != "running"]
            slots = Counter(r.started_at.replace(second=0, microsecond=0) for r in finished)
            if any(n == 2 for n in slots.values()):
                break
            assert time.monotonic() < deadline, runs
            time.sleep(1)
        by_slot: dict[datetime, list[str]] = {}
        for r in finished:
            by_slot.setdefault(r.started_at.replace(second=0, microsecond=0), []).append(
                str(r.status)
            )
        for slot, statuses_of_slot in by_slot.items():
            if len(statuses_of_slot) == 2:
                assert sorted(statuses_of_slot) == ["skipped", "succeeded"], (slot, by_slot)
            assert statuses_of_slot.count("succeeded") <= 1, (slot, by_slot)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        outputs = []
        for process in processes:
            try:
                outputs.append(process.communicate(timeout=60)[0])
            except subprocess.TimeoutExpired:
                process.kill()
                outputs.append(process.communicate()[0])
        engine.dispose()
        sandbox.stop()
    assert all("Traceback" not in out for out in outputs), outputs
