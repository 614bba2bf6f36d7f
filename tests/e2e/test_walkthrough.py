"""The README's "Your first real source", followed as written on PostgreSQL: its files written, its
commands run in order as a person would (waiting for the receiver to answer before sending), with
``hookledger send`` standing in for ``stripe listen``/``stripe trigger``; the event ends processed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reconciler.storage.testing import scratch_postgres_schema

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent
PG_ENV = "HOOKLEDGER_TEST_POSTGRES_URL"


def block(name: str) -> str:
    match = re.search(
        rf"<!-- walkthrough: {re.escape(name)} -->\s*```\w*\n(.*?)\n```", README, re.S
    )
    assert match, f"README.md has no walkthrough block '{name}'"
    return match.group(1)


def test_the_walkthrough_names_what_the_test_replaces() -> None:
    """What the test does not run as written is what a clone cannot: the install (done already
    here) and the secret the Stripe CLI prints."""
    assert block("shell").splitlines()[0].startswith("python3 -m venv .venv && ")
    assert "whsec_..." in block("run")
    assert 'url = "postgresql+psycopg://postgres@127.0.0.1:5432/test"' in block("config.toml")


@pytest.fixture
def scratch_url() -> Iterator[str]:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    with scratch_postgres_schema(base, revision=None) as url:  # hookledger init migrates it
        yield url


def test_the_first_real_source_walkthrough_ends_with_a_processed_event(
    tmp_path: Path, scratch_url: str
) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for name in ("HOOKLEDGER_CONFIG", "PYTHONPATH"):  # only what the walk-through sets
        env.pop(name, None)
    shell = block("shell").splitlines()[1:]  # the install is this environment's already
    subprocess.run(["bash", "-ec", "\n".join(shell)], cwd=tmp_path, env=env, check=True)
    config = block("config.toml").replace(
        "postgresql+psycopg://postgres@127.0.0.1:5432/test", scratch_url
    )
    (tmp_path / "config.toml").write_text(config + "\n")
    (tmp_path / "myapp" / "handlers.py").write_text(block("myapp/handlers.py") + "\n")

    server: subprocess.Popen[bytes] | None = None
    outputs: list[str] = []
    try:
        for line in block("run").splitlines():
            command = line.split("#", 1)[0].strip()
            if command.startswith("export "):
                name, _, value = command.removeprefix("export ").partition("=")
                if value == "whsec_...":
                    value = "whsec_walkthrough_secret"  # what `stripe listen` would print
                env[name] = value.replace("$PWD", str(tmp_path))
                continue
            if command.endswith("&"):
                server = subprocess.Popen(
                    shlex.split(command.rstrip("& ")),
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                _wait_healthy("http://127.0.0.1:8000/healthz", server)
                continue
            done = subprocess.run(
                ["bash", "-ec", command], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            outputs.append(done.stdout)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    sent, worked, listed = outputs[-3], outputs[-2], outputs[-1]
    assert "HTTP 200 accepted" in sent
    assert "paid: in_" in worked and "processed 1" in worked
    rows = listed.strip().splitlines()
    assert "processed" in rows[0] and "invoice.paid" in rows[0]
    assert rows[-1] == "1 of 1"


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "hookledger serve exited"
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout:g} s")
