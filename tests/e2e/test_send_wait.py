"""``hookledger send --wait``: a receiver that starts listening after ``send`` has started (as
``serve &`` on the line before does) still gets the event, on SQLite and PostgreSQL; one that never
listens is one line and exit 2 once the wait is over, and ``--wait 0`` does not wait."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy import Engine, select

from reconciler.config import load_config
from reconciler.inbox.receiver import create_app
from reconciler.storage.models import INBOX_EVENTS

HOOKLEDGER = Path(sys.executable).with_name("hookledger")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(tmp_path: Path, db_url: str, port: int) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[database]
url = "{db_url}"

[receiver]
port = {port}

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
"""
    )
    return path


def _send(cfg: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(HOOKLEDGER), "send", "stripe", "--type", "invoice.paid", "--config", str(cfg), *extra],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_send_waits_for_a_receiver_that_starts_after_it(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    port = free_port()
    cfg = _config(tmp_path, db_url, port)
    sender = _send(cfg)  # the default --wait, as the README's run block uses it
    time.sleep(2.0)  # the sender is refused meanwhile: nothing listens on the port yet
    assert sender.poll() is None, sender.communicate()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(load_config(str(cfg)).settings, engine),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        out, err = sender.communicate(timeout=60)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert sender.returncode == 0, (out, err)
    assert "HTTP 200 accepted" in out, (out, err)
    with engine.connect() as conn:
        stored = conn.execute(select(INBOX_EVENTS.c.event_type)).scalars().all()
    assert stored == ["invoice.paid"]


@pytest.mark.parametrize("wait", ["1", "0"])
def test_a_receiver_that_never_listens_is_one_line_and_exit_2_after_the_wait(
    tmp_path: Path, wait: str
) -> None:
    cfg = _config(tmp_path, "sqlite://", free_port())
    started = time.monotonic()
    sender = _send(cfg, "--wait", wait)
    out, err = sender.communicate(timeout=60)
    elapsed = time.monotonic() - started
    assert sender.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cannot be reached" in lines[0], err
    assert "hookledger serve" in lines[0]  # what to do about it
    if wait == "1":
        assert "after waiting 1 s" in lines[0] and elapsed >= 1.0
    else:
        assert "waiting" not in lines[0]


def test_a_wait_out_of_range_is_refused_by_the_parser(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "sqlite://", free_port())
    _, err = _send(cfg, "--wait", "-1").communicate(timeout=60)
    assert "--wait" in err and "between 0 and 600" in err, err
