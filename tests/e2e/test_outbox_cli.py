"""``hookledger publish``, ``worker --publish`` and ``hookledger outbox``, in process, against a
receiving stand-in over loopback; and every bad input as one line with exit code 2."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select, update

from reconciler.cli.main import main
from reconciler.outbox import add_message
from reconciler.storage.models import AUDIT_LOG, OUTBOX
from tests.conftest import RunningServer, start_server
from tests.integration.test_worker import put
from tests.standin import StandIn

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def receiver() -> Iterator[tuple[StandIn, RunningServer]]:
    standin = StandIn(secret=SECRET)
    server = start_server(standin.app)
    yield standin, server
    server.stop()


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_OUTBOX_SECRET", SECRET)


def _config(
    tmp_path: Path, db_url: str, url: str = "http://127.0.0.1:9", handlers: str = ""
) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f"""
[database]
url = "{db_url}"

[worker]
handlers = [{handlers}]

[outbox]
backoff_base_seconds = 0.01
backoff_max_seconds = 0.02

[[outbox.targets]]
name = "crm"
url = "{url}/in"
max_attempts = 2
signing_secret_env = "T_OUTBOX_SECRET"

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
"""
    )
    return str(path)


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_publish_list_show_replay_and_reconcile_the_outbox(
    engine: Engine,
    db_url: str,
    tmp_path: Path,
    receiver: tuple[StandIn, RunningServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    standin, server = receiver
    standin.statuses = {"k-bad": [400]}
    cfg = _config(tmp_path, db_url, server.url)
    with engine.begin() as conn:
        add_message(conn, "crm", {"email": "ada@example.com", "n": 1}, key="k-good")
        add_message(conn, "crm", {"n": 2}, key="k-bad")
    assert main(["publish", "--once", "--config", cfg]) == 0
    assert capsys.readouterr().out.strip() == "claimed 2: dead 1, sent 1"
    assert main(["outbox", "list", "--status", "dead", "--config", cfg]) == 0
    listed = capsys.readouterr().out
    assert "k-bad" in listed and "k-good" not in listed and "HTTP 400" in listed
    assert main(["outbox", "list", "--json", "--config", cfg]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["key"], r["status"]) for r in rows] == [("k-bad", "dead"), ("k-good", "sent")]
    good = rows[1]["id"]
    assert main(["outbox", "show", str(good), "--config", cfg]) == 0
    shown = capsys.readouterr().out
    assert '"email": "<masked>"' in shown and "ada@example.com" not in shown
    assert "#1" in shown and "sent" in shown and "202" in shown
    assert main(["outbox", "show", str(good), "--raw", "--json", "--config", cfg]) == 0
    assert json.loads(capsys.readouterr().out)["message"]["payload"] == (
        '{"email":"ada@example.com","n":1}'
    )
    # the nightly check reports the dead one; export has it; a replay with the same key fixes it
    assert main(["reconcile", "--source", "outbox:crm", "--json", "--config", cfg]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert (run["source"], run["found"]) == ("outbox:crm", {"outbox_dead": 1})
    assert main(["export", "--kind", "outbox_dead", "-o", "-", "--config", cfg]) == 0
    [row] = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (row["source"], row["kind"], row["object_id"], row["cause"]) == (
        "outbox:crm",
        "outbox_dead",
        str(rows[0]["id"]),
        "permanent",
    )
    standin.statuses = {}
    argv = ["outbox", "replay", str(rows[0]["id"]), "--reason", "fixed", "--actor", "ada"]
    assert main([*argv, "--config", cfg]) == 0
    assert "1 outbox message back to pending (same keys)" in capsys.readouterr().out
    assert main(["publish", "--once", "--config", cfg]) == 0
    assert main(["reconcile", "--json", "--config", cfg]) == 0  # every target by default
    [run] = json.loads(capsys.readouterr().out.split("\n", 1)[1])["runs"]
    assert (run["source"], run["found"], run["resolved"]) == ("outbox:crm", {}, 1)
    assert standin.arrivals["k-bad"] == 2 and set(standin.effects) == {"k-good", "k-bad"}
    with engine.connect() as conn:
        assert conn.execute(select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor)).all() == [
            ("outbox.replay", "ada")
        ]


def test_worker_publish_applies_then_sends(
    engine: Engine,
    db_url: str,
    tmp_path: Path,
    receiver: tuple[StandIn, RunningServer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    standin, server = receiver
    cfg = _config(tmp_path, db_url, server.url, handlers='"tests.handlers_for_outbox"')
    for event_id in ("evt_a", "evt_b"):
        put(engine, event_id, "customer.updated")
    assert main(["worker", "--once", "--publish", "--config", cfg]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["claimed 2: processed 2", "outbox: claimed 2: sent 2"]
    assert set(standin.effects) == {"stripe:evt_a:crm", "stripe:evt_b:crm"}
    assert main(["events", "show", "evt_a", "--source", "stripe", "--config", cfg]) == 0
    assert "outgoing messages (1):" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, extra, expected",
    [
        (["publish", "--once"], None, "no [[outbox.targets]]: there is nothing to publish to"),
        (["outbox", "show", "99"], "", "no outbox message 99"),
        (["outbox", "replay", "99", "--reason", "r"], "", "no outbox message 99"),
        (["outbox", "list", "--limit", "0"], "", "--limit must be between 1 and 1000"),
        (["reconcile", "--source", "outbox:nope"], "", "--source 'outbox:nope': no source"),
        (["publish", "--concurrency", "0"], "", "--concurrency must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    db_url: str,
    tmp_path: Path,
    argv: list[str],
    extra: str | None,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = _config(tmp_path, db_url)
    if extra is None:  # no target configured at all
        path = Path(cfg)
        path.write_text(path.read_text().split("[[outbox.targets]]")[0])
    assert main([*argv, "--config", cfg]) == 2
    assert expected in _one_line(capsys.readouterr().err)


def test_a_missing_secret_or_replaying_a_sent_message_is_refused(
    engine: Engine,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = _config(tmp_path, db_url)
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="k")
        conn.execute(update(OUTBOX).values(status="sent"))
        message_id = conn.execute(select(OUTBOX.c.id)).scalar_one()
    assert main(["outbox", "replay", str(message_id), "--reason", "r", "--config", cfg]) == 2
    assert "is sent: only dead or failed messages can be replayed" in _one_line(
        capsys.readouterr().err
    )
    monkeypatch.delenv("T_OUTBOX_SECRET")
    assert main(["publish", "--once", "--config", cfg]) == 2
    assert _one_line(capsys.readouterr().err) == (
        "hookledger: error: outbox target 'crm': environment variable T_OUTBOX_SECRET (named by "
        "signing_secret_env) is not set"
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.lists(
        st.one_of(
            st.sampled_from(
                ["--status", "--target", "--limit", "--before", "--json", "dead", "crm", "0", "-1"]
            ),
            st.text(max_size=12),
        ),
        max_size=6,
    )
)
def test_any_outbox_list_arguments_answer_or_fail_cleanly(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'fuzz.db'}")
    assert main(["init", "--config", cfg]) == 0
    capsys.readouterr()
    try:
        code = main(["outbox", "list", *args, "--config", cfg])
    except SystemExit as exc:  # argparse's own refusal: usage and one error line, exit 2
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code in (0, 2), captured
    assert "Traceback" not in captured.err


def test_recover_since_replays_a_targets_dead_messages_counted_first(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Svix's "recover since": the messages of one target that went dead since a time back to
    pending with their keys, counted first, one audit entry; older ones and sent ones stay."""
    from datetime import UTC, datetime, timedelta

    cfg = _config(tmp_path, db_url)
    t0 = datetime(2026, 12, 5, 8, tzinfo=UTC)
    with engine.begin() as conn:
        for n in range(5):
            add_message(conn, "crm", {"n": n}, key=f"k-{n}")
        rows = list(conn.execute(select(OUTBOX.c.id).order_by(OUTBOX.c.id)).scalars())
        for n, message_id in enumerate(rows):  # died at hours 0..3; the last one was sent
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.id == message_id)
                .values(
                    dead_at=None if n == 4 else t0 + timedelta(hours=n),
                    status="sent" if n == 4 else "dead",
                    attempts=2,
                    last_error="HTTP 503",
                )
            )
    since = (t0 + timedelta(hours=2)).isoformat()
    base = ["outbox", "recover", "--target", "crm", "--since", since, "--config", cfg]
    assert main([*base, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 dead messages of crm since") and "--yes --expect 2" in out
    assert main([*base, "--yes", "--expect", "3", "--reason", "CRM back"]) == 2
    assert "not the 3 confirmed" in _one_line(capsys.readouterr().err)
    assert main([*base, "--yes"]) == 2
    assert "--reason" in _one_line(capsys.readouterr().err)
    assert (
        main(
            [
                "outbox",
                "recover",
                "--target",
                "nope",
                "--since",
                since,
                "--dry-run",
                "--config",
                cfg,
            ]
        )
        == 2
    )
    assert "--target 'nope'" in _one_line(capsys.readouterr().err)
    assert main([*base, "--yes", "--expect", "2", "--reason", "CRM back", "--actor", "ada"]) == 0
    assert "2 dead messages of crm back to pending" in capsys.readouterr().out
    with engine.connect() as conn:
        states = [
            (r.key, str(r.status), r.attempts)
            for r in conn.execute(select(OUTBOX).order_by(OUTBOX.c.id))
        ]
        audit = conn.execute(select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor)).all()
    assert states == [
        ("k-0", "dead", 2),
        ("k-1", "dead", 2),
        ("k-2", "pending", 0),
        ("k-3", "pending", 0),
        ("k-4", "sent", 2),
    ]
    assert [tuple(a) for a in audit] == [("outbox.recover", "ada")]
