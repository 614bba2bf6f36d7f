"""``hookledger outbox pause|resume`` as real processes on SQLite and PostgreSQL: a paused target's
messages stay pending through ``publish --once`` and are sent after ``resume``; each is audited
with its reason; every refusal is one line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from reconciler.outbox import add_message
from reconciler.storage.models import AUDIT_LOG, OUTBOX
from tests.conftest import RunningServer, start_server
from tests.e2e.test_outbox_cli import SECRET, _config
from tests.standin import StandIn

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def receiver() -> Iterator[tuple[StandIn, RunningServer]]:
    standin = StandIn(secret=SECRET)
    server = start_server(standin.app)
    yield standin, server
    server.stop()


def _cli(cfg: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli.main", *argv, "--config", cfg],
        env=dict(os.environ, PYTHONPATH=str(ROOT), T_OUTBOX_SECRET=SECRET),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.slow
def test_pause_holds_a_targets_messages_until_resume_as_real_processes(
    db_url: str, engine: Engine, tmp_path: Path, receiver: tuple[StandIn, RunningServer]
) -> None:
    standin, server = receiver
    cfg = _config(tmp_path, db_url, server.url)
    said = _ok(
        _cli(cfg, tmp_path, "outbox", "pause", "crm", "--reason", "CRM upgrade", "--actor", "ada")
    )
    assert said == "outbox target crm paused: its messages wait until it is resumed"
    with engine.begin() as conn:
        add_message(conn, "crm", {"n": 1}, key="k-1")
    assert _ok(_cli(cfg, tmp_path, "publish", "--once")).startswith("claimed 0")
    with engine.connect() as conn:
        assert str(conn.execute(select(OUTBOX.c.status)).scalar_one()) == "pending"
    assert standin.arrivals == {}

    again = _one_line_error(_cli(cfg, tmp_path, "outbox", "pause", "crm", "--reason", "x"))
    assert again.startswith("hookledger: error: outbox target 'crm' is already paused (by ada at ")
    unknown = _one_line_error(_cli(cfg, tmp_path, "outbox", "pause", "erp", "--reason", "x"))
    assert unknown == "hookledger: error: TARGET 'erp': no such target (configured: crm)"
    no_reason = _cli(cfg, tmp_path, "outbox", "resume", "crm")
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    assert "Traceback" not in no_reason.stderr

    resumed = _ok(
        _cli(cfg, tmp_path, "outbox", "resume", "crm", "--reason", "done", "--actor", "bob")
    )
    assert resumed.startswith("outbox target crm resumed (paused by ada at ")
    assert _ok(_cli(cfg, tmp_path, "publish", "--once")).startswith("claimed 1")
    with engine.connect() as conn:
        assert str(conn.execute(select(OUTBOX.c.status)).scalar_one()) == "sent"
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.reason).order_by(
                AUDIT_LOG.c.id
            )
        ).all()
    assert standin.arrivals == {"k-1": 1}
    assert [tuple(a) for a in audit] == [
        ("outbox.pause", "ada", "CRM upgrade"),
        ("outbox.resume", "bob", "done"),
    ]
    not_paused = _one_line_error(_cli(cfg, tmp_path, "outbox", "resume", "crm", "--reason", "x"))
    assert not_paused == "hookledger: error: outbox target 'crm' is not paused"
