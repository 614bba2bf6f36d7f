"""Each arm of bench/reconcile.py runs in a process that imports only what the arm uses (issue 49:
every arm imported SQLAlchemy and the storage layer, which the floor and the hand-written checker
never use, so their whole-process time and peak memory were a handicapped arm's). Read from
``python -X importtime``, the interpreter's own record of every module it imported."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from tests.conftest import RunningServer, start_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningServer]:
    world = build_world(
        2, now=datetime.now(UTC), stripe_events=150, github_deliveries=0, shopify_orders=0
    )
    server = start_server(Sandbox(world, stand_ins=[]).app)
    yield server
    server.stop()


def imported(arm: str, url: str, *, runs: bool = True) -> set[str]:
    """The top-level packages the arm's process imported (``runs``: it must also finish its work;
    otherwise only its imports count, made before its work starts)."""
    db = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # the floor never opens it
    argv = ["bench/reconcile.py", "--arm", arm, "--db", db, "--sandbox", url]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 or not runs, done.stderr[-2000:]
    names = set()
    for line in done.stderr.splitlines():  # "import time: self [us] | cumulative | name"
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and not name.startswith("package"):
                names.add(name.split(".")[0])
    return names


@pytest.mark.parametrize("arm", ["bare", "bare_orjson"])
def test_the_floor_imports_no_database_layer(sandbox: RunningServer, arm: str) -> None:
    names = imported(arm, sandbox.url)
    assert "httpx" in names  # the one it pages with (the record is read)
    assert not names & {"sqlalchemy", "psycopg", "alembic", "pandas", "bench"}, sorted(names)
    assert ("orjson" in names) == (arm == "bare_orjson")


def test_the_hand_written_checker_imports_its_driver_and_no_sqlalchemy(
    sandbox: RunningServer,
) -> None:
    """The checker's work needs a populated database; its imports come first, and are its own."""
    names = imported("checker", sandbox.url, runs=False)
    assert {"psycopg", "orjson", "httpx"} <= names
    assert not names & {"sqlalchemy", "alembic", "pandas", "bench"}, sorted(names)
