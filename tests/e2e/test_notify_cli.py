"""``hookledger notify`` and ``hookledger reconcile`` with [[notify]] targets, as an operator runs
them (main() in process): a test message, a pass that sends what is due, and a target that cannot
be told, which is a warning line and never the reconciliation's exit status."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from reconciler.cli.main import main
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import RECON_RUNS
from tests.notify_sinks import free_port, http_sink
from tests.scenario import Scenario, write_config


def _config(tmp_path: Path, url: str, targets: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[database]\nurl = "{url}"\n[dashboard]\npublic_url = "https://hl.example.com"\n{targets}'
    )
    return str(path)


def _slack(url: str, name: str = "ops") -> str:
    return f'[[notify]]\nname = "{name}"\nkind = "slack"\nurl = "{url}"\n'


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'hl.db'}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def test_a_test_message_says_sent_or_not_in_one_line_each(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/nobody"
    with http_sink() as (sink, server):
        cfg = _config(tmp_path, sqlite_url, _slack(f"{server.url}/slack") + _slack(dead, "gone"))
        assert main(["notify", "--test", "--config", cfg, "--target", "ops"]) == 0
        assert capsys.readouterr().out == "ops: test sent\n"
        [body] = sink.bodies("/slack")
        assert "this target works" in json.loads(body)["text"]
        assert main(["notify", "--test", "--config", cfg]) == 2
    out, err = capsys.readouterr()
    assert out == "ops: test sent\ngone: test NOT sent\n"
    [line] = err.splitlines()
    assert line.startswith(f"  error: {dead} failed: ConnectError")


@pytest.mark.parametrize(
    ("args", "targets", "message"),
    [
        (["notify"], "", "hookledger: error: no [[notify]] target is configured"),
        (
            ["notify", "--target", "nope"],
            _slack("http://127.0.0.1:9/x"),
            "hookledger: error: --target 'nope': no such [[notify]] target (configured: ops)",
        ),
    ],
)
def test_a_wrong_target_is_one_line_and_exit_2(
    tmp_path: Path,
    sqlite_url: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    targets: str,
    message: str,
) -> None:
    assert main([*args, "--config", _config(tmp_path, sqlite_url, targets)]) == 2
    assert capsys.readouterr().err.strip() == message


def test_a_pass_sends_what_is_due_once(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with http_sink() as (sink, server):
        cfg = _config(tmp_path, sqlite_url, _slack(f"{server.url}/slack"))
        assert main(["notify", "--config", cfg]) == 0  # first seen: nothing before this is told
        assert capsys.readouterr().out == "ops: 0 new; nothing due\n"
        engine = make_engine(sqlite_url)
        now = datetime.now(UTC)
        with engine.begin() as conn:
            conn.execute(
                insert(RECON_RUNS).values(
                    run_id="run-9",
                    source="stripe",
                    trigger="schedule",
                    status="failed",
                    started_at=now,
                    finished_at=now + timedelta(seconds=1),
                    records_scanned=0,
                    counts={},
                    error="HTTP 401 from the API",
                )
            )
        engine.dispose()
        assert main(["notify", "--config", cfg, "--json"]) == 0
        [ops] = json.loads(capsys.readouterr().out)["targets"].values()
        assert (ops["recorded"], ops["outcomes"], ops["errors"]) == (1, {"sent": 1}, [])
        assert main(["notify", "--config", cfg]) == 0
        assert capsys.readouterr().out == "ops: 0 new; nothing due\n"
        [body] = sink.bodies("/slack")
        assert "stripe: reconciliation failed" in json.loads(body)["text"]


def test_reconcile_tells_the_targets_and_a_failing_one_is_only_a_warning(
    scenario: Scenario, db_url: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with http_sink() as (sink, server):
        cfg = Path(write_config(tmp_path / "c.toml", scenario, db_url))
        dead = f"http://127.0.0.1:{free_port()}/nobody"
        cfg.write_text(cfg.read_text() + _slack(f"{server.url}/slack") + _slack(dead, "gone"))
        assert main(["notify", "--config", str(cfg)]) == 0  # the targets are seen from now on
        capsys.readouterr()
        assert main(["reconcile", "--config", str(cfg), "--no-notify"]) == 0
        assert sink.received == []
        assert main(["reconcile", "--config", str(cfg), "--full"]) == 0  # nothing new: no message
        assert sink.received == []
        with scenario.engine.begin() as conn:  # a fresh problem for the next run to find
            conn.execute(RECON_RUNS.delete())
            from reconciler.storage.models import DISCREPANCIES

            conn.execute(DISCREPANCIES.delete())
        capsys.readouterr()
        assert main(["reconcile", "--config", str(cfg), "--full"]) == 0
        out, err = capsys.readouterr()
        assert "stripe: succeeded" in out
        [warning] = [line for line in err.splitlines() if "WARNING" in line]
        assert "notify target 'gone': discrepancies:" in warning
        assert f"(attempt 1, will retry): {dead} failed: ConnectError" in warning
        [body] = sink.bodies("/slack")
        assert f"stripe: {len(scenario.expected)} new discrepancies" in json.loads(body)["text"]
