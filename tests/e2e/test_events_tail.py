"""``hookledger events tail`` as a process against a real database (SQLite and PostgreSQL) and a
real receiver: it shows each new delivery of the sources asked for (not those before it started,
not other sources'), then each event's status as the worker moves it, errors masked; Ctrl-C ends
it with exit 0. A burst larger than a page is read page by page, in order; the watched events
stay bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from reconciler.cli.main import main
from reconciler.config import load_config
from reconciler.inbox.receiver import create_app
from reconciler.ops import tail as tail_module
from reconciler.ops.tail import DeliveryRow, EventState, Tail, follow
from reconciler.storage.models import DELIVERIES

HOOKLEDGER = Path(sys.executable).with_name("hookledger")
CARD = "4242 4242 4242 4242"

HANDLERS = f"""
from reconciler.errors import PermanentError
from reconciler.inbox.handlers import handler


@handler("shop", "invoice.paid")
def paid(event, conn):
    pass


@handler("shop", "invoice.payment_failed")
def failed(event, conn):
    raise PermanentError("card {CARD} was declined")
"""


def _config(tmp_path: Path, db_url: str) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "tail_handlers.py").write_text(HANDLERS)
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[database]
url = "{db_url}"

[worker]
handlers = ["tail_handlers"]
import_paths = ["code"]

[[sources]]
name = "shop"  # (not "stripe": other tests' handlers for stripe share this process)
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"

[[sources]]
name = "github"
kind = "github"
signing_secret_env = "T_GITHUB_SECRET"
"""
    )
    return path


class Lines:
    """A process's standard output, read line by line in a thread."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def join(self) -> None:
        self._thread.join(timeout=10)

    def wait_for(self, found: Callable[[list[str]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not found(list(self.lines)):
            assert time.monotonic() < deadline, self.lines
            time.sleep(0.05)


def _send(cfg: Path, to: str, source: str, *extra: str) -> str:
    return str(
        main(["send", source, "--to", f"{to}/webhooks/{source}", "--config", str(cfg), *extra])
    )


def test_tail_follows_new_deliveries_and_their_outcomes_until_ctrl_c(
    db_url: str,
    engine: Engine,
    serve: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = _config(tmp_path, db_url)
    receiver = serve(create_app(load_config(str(cfg)).settings, engine))
    assert _send(cfg, receiver.url, "shop", "--type", "customer.created") == "0"  # before

    argv = ["events", "tail", "--source", "shop", "--interval", "0.2", "--config", str(cfg)]
    with subprocess.Popen(
        [str(HOOKLEDGER), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    ) as proc:
        try:
            assert proc.stderr is not None
            assert "following new deliveries of shop" in proc.stderr.readline()
            out = Lines(proc.stdout)
            assert _send(cfg, receiver.url, "shop", "--type", "invoice.paid") == "0"
            assert _send(cfg, receiver.url, "shop", "--type", "invoice.payment_failed") == "0"
            assert _send(cfg, receiver.url, "github") == "0"  # another source: not shown
            monkeypatch.setenv("T_STRIPE_SECRET", "whsec_not_the_receivers")
            assert _send(cfg, receiver.url, "shop") == "1"  # refused: shown as rejected
            monkeypatch.undo()
            out.wait_for(lambda lines: len(lines) >= 3)
            assert main(["worker", "--once", "--config", str(cfg)]) == 0
            out.wait_for(lambda lines: len(lines) >= 5)
            time.sleep(0.5)  # nothing more is due
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
            out.join()
        finally:
            if proc.poll() is None:
                proc.kill()
    capsys.readouterr()
    lines = out.lines
    assert len(lines) == 5, lines
    accepted = [line for line in lines if "accepted (HTTP 200)" in line]
    assert [("invoice.paid" in a, "[pending]" in a) for a in accepted] == [(True, True)] * 1 + [
        (False, True)
    ]
    assert "invoice.payment_failed" in accepted[1]
    rejected = [line for line in lines if "rejected (HTTP 4" in line]
    assert len(rejected) == 1 and "signature" in rejected[0].lower(), lines
    changed = [line for line in lines if " event " in line]
    assert any("invoice.paid  processed (attempt 1)" in c for c in changed), changed
    dead = [c for c in changed if "invoice.payment_failed  dead (attempt 1)" in c]
    assert len(dead) == 1 and "was declined" in dead[0], changed
    text = "\n".join(lines)
    assert CARD not in text and "github" not in text and "customer.created" not in text


def test_a_burst_larger_than_a_page_is_read_page_by_page_in_order(
    db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tail_module, "PAGE", 3)
    seen: list[str] = []
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=follow,
        args=(engine, Tail(), seen.append),
        kwargs={"interval": 0.1, "stop": stop, "ready": ready.set},
    )
    thread.start()
    try:
        assert ready.wait(10)
        now = datetime.now(UTC)
        with engine.begin() as conn:
            conn.execute(
                insert(DELIVERIES),
                [
                    {
                        "source": "stripe",
                        "received_at": now,
                        "outcome": "rejected",
                        "status_code": 400,
                        "reason": f"bad signature {n}",
                    }
                    for n in range(8)
                ],
            )
        deadline = time.monotonic() + 10
        while len(seen) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert [line.rsplit(" ", 1)[1] for line in seen] == [str(n) for n in range(8)]


def _delivery(n: int, row: int) -> DeliveryRow:
    return DeliveryRow(
        n, datetime(2026, 12, 6, tzinfo=UTC), "stripe", "accepted", 200, f"evt_{n}", None, row,
        "invoice.paid", "pending",
    )  # fmt: skip


def test_the_watched_events_are_bounded_and_only_changes_print() -> None:
    tail = Tail(watched=2)
    lines = tail.deliveries([_delivery(1, 11), _delivery(2, 12), _delivery(3, 13)])
    assert len(lines) == 3 and tail.watched() == [12, 13]  # the oldest let go

    def state(row: int, status: str, error: str | None = None) -> EventState:
        return EventState(
            row, "stripe", f"evt_{row}", "invoice.paid", status, 1, "permanent", error
        )

    now = datetime(2026, 12, 6, 0, 0, 5, tzinfo=UTC)
    assert tail.states([state(12, "pending"), state(13, "pending")], now) == []
    moved = tail.states([state(12, "processed"), state(13, "dead", f"card {CARD}\nmore")], now)
    assert moved[0].endswith("evt_12  invoice.paid  processed (attempt 1)")
    assert "dead (attempt 1)  permanent: card" in moved[1] and CARD not in moved[1]
    assert "more" not in moved[1]
    assert tail.states([state(12, "processed")], now) == []  # already said
    # a poll that falls inside an attempt sees "processing": passed over, the outcome prints once
    assert tail.states([state(13, "processing")], now) == []
    again = tail.states([state(13, "pending")], now)
    assert len(again) == 1 and again[0].endswith("pending (attempt 1)")
