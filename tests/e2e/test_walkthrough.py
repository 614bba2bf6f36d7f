"""The README's "Your first real source", followed as written on PostgreSQL: its files written, its
run block pasted into bash as written (``send`` waiting for the receiver ``serve &`` starts), with
``hookledger send`` standing in for ``stripe listen``/``stripe trigger``; the event ends processed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
    """The run block goes to bash as one paste: ``send`` runs the moment ``serve &`` has started,
    before the receiver listens, and waits for it. Only the secret is filled in, and the receiver
    listens on a free port (the config block gains its ``[receiver] port``), not on whatever
    already answers on 8000."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for name in ("HOOKLEDGER_CONFIG", "PYTHONPATH"):  # only what the walk-through sets
        env.pop(name, None)
    shell = block("shell").splitlines()[1:]  # the install is this environment's already
    subprocess.run(["bash", "-ec", "\n".join(shell)], cwd=tmp_path, env=env, check=True)
    config = block("config.toml").replace(
        "postgresql+psycopg://postgres@127.0.0.1:5432/test", scratch_url
    )
    (tmp_path / "config.toml").write_text(f"{config}\n\n[receiver]\nport = {free_port()}\n")
    (tmp_path / "myapp" / "handlers.py").write_text(block("myapp/handlers.py") + "\n")

    # the secret filled in as `stripe listen` prints one
    run = block("run").replace("whsec_...", "whsec_walkthrough_secret")
    # the harness around the paste: stop at the first failure, and stop `serve &` at the end
    script = f"set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{run}\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    out = done.stdout
    assert "HTTP 200 accepted" in out, out
    assert "paid: in_" in out and "processed 1" in out, out
    rows = out.strip().splitlines()
    assert rows[-1] == "1 of 1", out  # events list: the one event, processed
    assert any("processed" in row and "invoice.paid" in row for row in rows), out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
