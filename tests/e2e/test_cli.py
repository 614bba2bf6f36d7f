"""The command line, in process and as real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from connectors.parsing import ParsedEvent
from connectors.providers.paddle.standin import API_KEY as PADDLE_KEY
from connectors.providers.stripe.signature import parse_stripe
from reconciler.cli.main import main
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS
from tests.deliveries import stripe_delivery
from tests.integration.test_worker import put

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(tmp_path: Path, db_url: str, port: int = 8000) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[database]
url = "{db_url}"

[receiver]
port = {port}

[worker]
handlers = ["tests.handlers_for_cli"]

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
"""
    )
    return path


def test_init_is_idempotent(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path, db_url)
    assert main(["init", "--config", str(cfg)]) == 0
    assert main(["init", "--config", str(cfg)]) == 0
    from reconciler.storage.migrate import head_revision

    head = head_revision()
    assert f"revision {head}" in capsys.readouterr().out


def test_commands_refuse_an_uninitialised_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path, f"sqlite:///{tmp_path / 'new.db'}")
    assert main(["worker", "--once", "--config", str(cfg)]) == 2
    assert "run 'hookledger init' first" in capsys.readouterr().err


def test_serve_refuses_to_start_without_its_secret(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("T_STRIPE_SECRET")
    cfg = write_config(tmp_path, db_url)
    assert main(["serve", "--config", str(cfg)]) == 2
    assert "T_STRIPE_SECRET" in capsys.readouterr().err


def test_worker_replay_and_events_show(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    put(engine, "evt_ok", obj={"id": "in_1", "object": "invoice", "status": "paid"})
    put(engine, "evt_broken", obj={"id": "in_2", "object": "invoice", "status": "broken"})
    assert main(["worker", "--once", "--config", cfg]) == 0
    assert "claimed 2: dead 1, processed 1" in capsys.readouterr().out

    assert main(["replay", "evt_nope", "--source", "stripe", "--config", cfg]) == 2
    assert "no event 'evt_nope' from source 'stripe'" in capsys.readouterr().err

    assert (
        main(
            [
                "replay",
                "evt_broken",
                "--source",
                "stripe",
                "--reason",
                "retry after fix",
                "--actor",
                "bob",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    assert "dead -> pending" in capsys.readouterr().out
    assert main(["replay", "evt_broken", "--source", "stripe", "--config", cfg]) == 2
    assert "is pending" in capsys.readouterr().err

    assert main(["events", "show", "evt_broken", "--source", "stripe", "--config", cfg]) == 0
    out = capsys.readouterr().out
    assert "status: pending" in out and "bob  replay  retry after fix" in out
    assert "permanent  PermanentError: invoice payload is broken" in out
    assert "dashboard: http://127.0.0.1:8501/events?source=stripe&event_id=evt_broken" in out

    assert (
        main(["events", "show", "evt_broken", "--source", "stripe", "--json", "--config", cfg]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert (
        data["event"]["event_id"] == "evt_broken" and data["event"]["origin"] == "webhook"
    )  # kept across the replay
    assert [a["outcome"] for a in data["attempts"]] == ["dead"]
    assert data["audit"][0]["actor"] == "bob"
    assert data["link"] == "http://127.0.0.1:8501/events?source=stripe&event_id=evt_broken"
    with engine.connect() as conn:
        assert conn.execute(select(AUDIT_LOG.c.action)).scalar_one() == "replay"


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.mark.slow
def test_serve_and_worker_as_real_processes(db_url: str, engine: Engine, tmp_path: Path) -> None:
    port = _free_port()
    cfg = str(write_config(tmp_path, db_url, port))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "reconciler.cli.main"]
    server = subprocess.Popen([*cli, "serve", "--config", cfg], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, "hookledger serve exited"
            assert time.monotonic() < deadline, "hookledger serve did not come up"
            time.sleep(0.1)
        headers, body = stripe_delivery("evt_cli")
        response = httpx.post(
            f"http://127.0.0.1:{port}/webhooks/stripe", content=body, headers=headers
        )
        assert response.json() == {"status": "accepted", "event_id": "evt_cli"}
    finally:
        server.terminate()
        # graceful shutdown, then uvicorn re-raises SIGTERM as its exit status
        assert server.wait(timeout=20) in (0, -15)
    done = subprocess.run(
        [*cli, "worker", "--once", "--config", cfg],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "processed 1" in done.stdout
    with engine.connect() as conn:
        assert conn.execute(select(INBOX_EVENTS.c.status)).scalar_one() == "processed"


@pytest.mark.slow
def test_long_running_worker_processes_then_stops_on_sigterm(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    import signal

    path = write_config(tmp_path, db_url)
    port = free_port()  # the worker's own /metrics
    path.write_text(
        path.read_text().replace(
            'handlers = ["tests.handlers_for_cli"]',
            f'handlers = ["tests.handlers_for_cli"]\nmetrics_port = {port}',
        )
    )
    cfg = str(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler.cli.main",
            "worker",
            "--concurrency",
            "2",
            "--config",
            cfg,
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        put(engine, "evt_live", obj={"id": "in_9", "object": "invoice", "status": "paid"})
        deadline = time.monotonic() + 30
        while True:
            with engine.connect() as conn:
                status = conn.execute(select(INBOX_EVENTS.c.status)).scalar_one()
            if status == "processed":
                break
            assert worker.poll() is None and time.monotonic() < deadline, status
            time.sleep(0.1)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0
    assert "processed 1" in out
    assert 'hookledger_worker_events_total{outcome="processed",source="stripe"} 1.0' in metrics
    assert 'hookledger_handler_seconds_count{source="stripe"} 1.0' in metrics
    assert "process_cpu_seconds_total" in metrics


@pytest.mark.slow
def test_sandbox_command_serves_the_apis_and_sends_webhooks_with_ground_truth(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    receiver_port, sandbox_port = _free_port(), _free_port()
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f"""
[database]
url = "{db_url}"
[receiver]
port = {receiver_port}
[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
[[sources]]
name = "github"
kind = "github"
signing_secret_env = "T_GITHUB_SECRET"
[[sources]]
name = "shopify"
kind = "shopify"
signing_secret_env = "T_SHOPIFY_SECRET"
"""
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "reconciler.cli.main"]
    report_path = tmp_path / "report.json"
    receiver = subprocess.Popen([*cli, "serve", "--config", str(cfg)], env=env, cwd=tmp_path)
    sandbox = None
    try:
        _wait(f"http://127.0.0.1:{receiver_port}/healthz", receiver)
        sandbox = subprocess.Popen(
            [
                *cli,
                "sandbox",
                "--config",
                str(cfg),
                "--port",
                str(sandbox_port),
                "--seed",
                "5",
                "--send",
                "--drop",
                "0.1",
                "--duplicate",
                "0.1",
                "--reorder",
                "0.1",
                "--delay",
                "0.1",
                "--report",
                str(report_path),
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
        )
        _wait(f"http://127.0.0.1:{sandbox_port}/_sandbox/health", sandbox)
        events = httpx.get(
            f"http://127.0.0.1:{sandbox_port}/v1/events?limit=3",
            headers={"Authorization": "Bearer sk_test_sandbox"},
        ).json()
        assert len(events["data"]) == 3 and events["has_more"] is True
        # every stand-in's list has a day of events (Paddle's, as one of them)
        paddle = httpx.get(
            f"http://127.0.0.1:{sandbox_port}/paddle/events?per_page=200",
            headers={"Authorization": f"Bearer {PADDLE_KEY}"},
        ).json()
        assert len(paddle["data"]) == 100 and paddle["meta"]["pagination"]["has_more"] is False
        deadline = time.monotonic() + 60
        while not report_path.exists():
            assert time.monotonic() < deadline and sandbox.poll() is None
            time.sleep(0.2)
        time.sleep(0.2)
        report = json.loads(report_path.read_text())
    finally:
        for proc in (sandbox, receiver):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=20)
    with engine.connect() as conn:
        stored = {
            (s, e) for s, e in conn.execute(select(INBOX_EVENTS.c.source, INBOX_EVENTS.c.event_id))
        }
    for name in ("stripe", "github", "shopify"):
        r = report[name]
        assert r["dropped"] and r["responses"] == {"200": r["requests"]}
        kept = {e for s, e in stored if s == name}
        assert len(kept) == r["planned"] - len(r["dropped"])
        assert not kept & set(r["dropped"])


def _wait(url: str, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, f"{proc.args} exited"
        assert time.monotonic() < deadline, f"{url} did not come up"
        time.sleep(0.1)


def test_export_to_a_reader_that_stops_early_ends_quietly(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """``hookledger export -o - | head``: the reader closes the pipe after a line; the command stops
    with the shell's SIGPIPE status (141) and no traceback."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from reconciler.cli.main import EXIT_BROKEN_PIPE
    from reconciler.storage.models import DISCREPANCIES

    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            insert(DISCREPANCIES),
            [
                {
                    "source": "stripe",
                    "kind": "missing",
                    "record_key": f"evt_{i:06d}",
                    "field": "",
                    "event_id": f"evt_{i:06d}",
                    "first_seen_at": now,
                    "last_seen_at": now,
                    "first_run_id": "r",
                    "last_run_id": "r",
                    "status": "open",
                    "cause": "not_received",
                }
                for i in range(3000)  # well over a pipe's 64 KiB buffer
            ],
        )
    cfg = str(write_config(tmp_path, db_url))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    export = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli.main", "export", "--config", cfg, "-o", "-"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert export.stdout is not None and export.stderr is not None
    assert export.stdout.readline().startswith(b"discrepancy_id,source,kind,")
    export.stdout.close()  # like `head -1`
    with export.stderr:
        assert export.wait(timeout=60) == EXIT_BROKEN_PIPE == 141
        assert export.stderr.read() == b""


def test_doctor_to_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    """``hookledger doctor | head``: the reader is gone before the verdicts are written; 141, no
    traceback (issue 34: a traceback and exit 1)."""
    from reconciler.cli.main import EXIT_BROKEN_PIPE

    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "x.db"}"\n')
    doctor = subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli.main", "doctor", "--offline", "--config", str(cfg)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert doctor.stdout is not None and doctor.stderr is not None
    doctor.stdout.close()  # like `head` that has already stopped
    with doctor.stderr:
        assert doctor.wait(timeout=60) == EXIT_BROKEN_PIPE
        assert doctor.stderr.read() == b""


def test_export_to_a_folder_that_does_not_exist_is_refused_and_creates_nothing(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    missing = tmp_path / "no" / "such"
    assert main(["export", "--config", cfg, "-o", str(missing / "x.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"hookledger: error: -o {missing / 'x.csv'}: the folder {missing} does not exist"
    ]
    assert not (tmp_path / "no").exists()


PLANTED = {
    "id": "ch_1",
    "object": "charge",
    "receipt_email": "jane@example.com",
    "client_secret": "pi_1_secret_abc",
    # free text (issue 34): the value check alone let these through
    "description": "card 5555-5555-5555-4444 exp 12/27, refund to IBAN GB82 WEST 1234 5698 7654 32 ok",
    "metadata": {"note": "4000 0566 5566 5556", "refund_to": "DE89 3704 0044 0532 0130 00"},
    "payment_method_details": {
        "card": {"number": "4242424242424242", "cvc": "123", "last4": "4242"}
    },
}
PLANTED_VALUES = [
    "jane@example.com",
    "pi_1_secret_abc",
    "4000 0566 5566 5556",
    "DE89 3704 0044 0532 0130 00",
    "4242424242424242",
    '"123"',
    "5555-5555-5555-4444",
    "GB82 WEST 1234 5698 7654 32",
]


def test_events_show_masks_the_payload_unless_raw(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    assert main(["init", "--config", cfg]) == 0
    put(engine, "evt_pii", "charge.succeeded", PLANTED)
    capsys.readouterr()
    for extra in ([], ["--json"]):
        assert (
            main(["events", "show", "evt_pii", "--source", "stripe", *extra, "--config", cfg]) == 0
        )
        out = capsys.readouterr().out
        assert "<masked>" in out and '"last4": "4242"' in out.replace('\\"', '"')
        assert [v for v in PLANTED_VALUES if v in out.replace('\\"', '"')] == []
    assert main(["events", "show", "evt_pii", "--source", "stripe", "--raw", "--config", cfg]) == 0
    raw = capsys.readouterr().out
    assert all(v in raw for v in PLANTED_VALUES)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=st.sampled_from(["x-customer-note", "x-forwarded-for", "user-agent", "x-ref"]),
    planted=st.sampled_from(
        [
            "4000 0566 5566 5556",
            "4242424242424242",
            "5555-5555-5555-4444",
            "4111.1111.1111.1111",
            "DE89 3704 0044 0532 0130 00",
            "GB82WEST12345698765432",
        ]
    ),
    around=st.text(st.characters(blacklist_categories=("Nd", "Nl", "No", "Lu", "Cs")), max_size=12),
)
def test_events_show_masks_card_numbers_and_ibans_in_the_stored_headers(
    db_url: str,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    header: str,
    planted: str,
    around: str,
) -> None:
    """Headers are kept as received: any one may carry a card number or an IBAN, shown masked
    as the body's are (``--json`` too), as received with ``--raw``."""
    cfg = str(write_config(tmp_path, db_url))
    assert main(["init", "--config", cfg]) == 0
    event_id = f"evt_h{abs(hash((header, planted, around)))}"
    _headers, body = stripe_delivery(event_id)
    item = IncomingEvent(
        "stripe",
        parse_stripe({}, body),
        body,
        {header: f"{around} {planted} {around}", "stripe-signature": "<masked>"},
        datetime.now(UTC),
        "application/json",
    )
    with engine.begin() as conn:
        store_items(conn, [item])
    capsys.readouterr()
    show = ["events", "show", event_id, "--source", "stripe", "--config", cfg]
    assert main([*show, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["event"]["headers"]
    # (a header that is the number alone is <masked> whole; the text around it stays)
    assert "<masked>" in shown[header] and not any(c.isdigit() for c in shown[header])
    assert shown[header].replace("<masked>", "").strip() == f"{around}  {around}".strip()
    assert main([*show, "--json", "--raw"]) == 0
    assert json.loads(capsys.readouterr().out)["event"]["headers"][header] == item.headers[header]


SMS = {
    "MessageSid": "SM9876543210fedcba9876543210fedcba",
    "AccountSid": "AC0123456789abcdef0123456789abcdef",
    "SmsStatus": "received",
    "Body": "my door code is 1234",
    "From": "+15005550001",
    "To": "+15005550006",
    "FromCity": "Springfield",
}


def test_twilio_phone_numbers_and_message_text_are_masked_unless_configured_shown(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, db_url)
    twilio = '\n[[sources]]\nname = "sms"\nkind = "twilio"\nsigning_secret_env = "T_TWILIO"\n'
    config.write_text(config.read_text() + twilio)
    cfg = str(config)
    assert main(["init", "--config", cfg]) == 0
    body = urlencode(SMS).encode()
    item = IncomingEvent(
        "sms",
        ParsedEvent(
            SMS["MessageSid"],
            event_type="message.received",
            object_type="message",
            object_id=SMS["MessageSid"],
        ),
        body,
        {},
        datetime.now(UTC),
        "application/x-www-form-urlencoded",
    )
    with engine.begin() as conn:
        store_items(conn, [item])
    show = ["events", "show", SMS["MessageSid"], "--source", "sms", "--json", "--config", cfg]
    capsys.readouterr()
    assert main(show) == 0
    payload = json.loads(json.loads(capsys.readouterr().out)["event"]["body"])
    assert {k: payload[k] for k in ("From", "To", "Body")} == dict.fromkeys(
        ("From", "To", "Body"), "<masked>"
    )
    assert payload["SmsStatus"] == "received" and payload["MessageSid"] == SMS["MessageSid"]

    # [dashboard] show_personal_fields = true: shown; configured PII keys stay masked
    config.write_text(
        config.read_text().replace(
            "[receiver]",
            '[dashboard]\nshow_personal_fields = true\nmask_fields = ["FromCity"]\n\n[receiver]',
        )
    )
    assert main(show) == 0
    payload = json.loads(json.loads(capsys.readouterr().out)["event"]["body"])
    assert {k: payload[k] for k in ("From", "To", "Body")} == {
        k: SMS[k] for k in ("From", "To", "Body")
    }
    assert payload["FromCity"] == "<masked>"
