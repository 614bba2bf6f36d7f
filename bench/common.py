"""Helpers shared by the benchmarks: processes, ports, PostgreSQL scratch schemas, medians."""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx

from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.testing import scratch_postgres_schema

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get(
    "HOOKLEDGER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(cpu: int, argv: list[str]) -> list[str]:
    """Pin to one CPU where the machine has more than one (taskset), else run as is."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu), *argv]
    return argv


@contextmanager
def process(
    argv: list[str],
    health_url: str,
    env: dict[str, str] | None = None,
    start_timeout: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, cwd=ROOT)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                httpx.get(health_url, timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv} did not start") from None
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def pg_schema() -> AbstractContextManager[str]:
    """A migrated scratch schema on the local PostgreSQL, dropped afterwards."""
    return scratch_postgres_schema(PG_URL, prefix="hl_bench")


@contextmanager
def sqlite_db(directory: Path, name: str) -> Iterator[str]:
    url = f"sqlite:///{directory / name}"
    eng = make_engine(url)
    upgrade(eng)
    eng.dispose()
    yield url


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


PYTHON = sys.executable
