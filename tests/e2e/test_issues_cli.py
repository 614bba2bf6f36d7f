"""``hookledger issues``: events that die for one cause are one issue, listed (--json: id, status,
count), shown, acknowledged, retried (counted first, one audit entry) and resolved from the command
line, run as real processes on SQLite and PostgreSQL; any issue id typed is an answer or one line
and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from reconciler.cli.issue_cmds import issue_id
from reconciler.cli.main import main
from reconciler.errors import ConfigError
from reconciler.storage.models import AUDIT_LOG
from reconciler.storage.types import utcnow
from tests.e2e.test_cli import write_config
from tests.integration.test_issues import dead_event

ROOT = Path(__file__).resolve().parents[2]


def _cli(cfg: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli.main", *argv, "--config", cfg],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.slow
def test_an_issue_from_list_to_resolved_as_real_processes(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    now = utcnow()
    for k in range(3):
        dead_event(engine, now - timedelta(minutes=10 - k), f"no plan 'p{k}' for cus_{k}9")
    dead_event(engine, now - timedelta(minutes=2), "ledger timeout after 30s", event_type="x")

    done = _cli(cfg, tmp_path, "issues", "list", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(i["status"], i["count"]) for i in listed] == [("open", 1), ("open", 3)]
    plan = listed[1]["id"]

    done = _cli(cfg, tmp_path, "issues", "list")
    header, *rows = done.stdout.splitlines()
    assert header.split()[:3] == ["ID", "STATUS", "KIND"] and len(rows) == 2

    done = _cli(cfg, tmp_path, "issues", "show", str(plan))
    assert done.returncode == 0 and "no plan <str> for <n>" in done.stdout
    assert "per hour, last 24 h:" in done.stdout and done.stdout.count("(dead)") == 3

    assert (
        "acknowledged by oncall"
        in _cli(cfg, tmp_path, "issues", "ack", f"#{plan}", "--actor", "oncall").stdout
    )
    assert "already acknowledged" in _one_line_error(
        _cli(cfg, tmp_path, "issues", "ack", str(plan))
    )

    assert "needs --yes" in _one_line_error(_cli(cfg, tmp_path, "issues", "retry", str(plan)))
    done = _cli(cfg, tmp_path, "issues", "retry", str(plan), "--dry-run")
    assert done.stdout.splitlines()[0] == f"3 dead events of issue {plan}"
    assert "not the 2 confirmed" in _one_line_error(
        _cli(cfg, tmp_path, "issues", "retry", str(plan), "--yes", "--expect", "2")
    )
    done = _cli(
        cfg, tmp_path, "issues", "retry", str(plan), "--yes", "--expect", "3", "--actor", "oncall"
    )
    assert done.returncode == 0 and "3 events put back to pending" in done.stdout, done.stderr

    done = _cli(
        cfg,
        tmp_path,
        "issues",
        "resolve",
        str(plan),
        "--reason",
        "plans loaded",
        "--actor",
        "oncall",
    )
    assert done.returncode == 0, done.stderr
    done = _cli(cfg, tmp_path, "issues", "list", "--status", "resolved", "--json")
    assert [(i["id"], i["status"], i["resolved_reason"]) for i in json.loads(done.stdout)] == [
        (plan, "resolved", "plans loaded")
    ]
    with engine.connect() as conn:
        actions = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor).order_by(AUDIT_LOG.c.id)
        ).all()
    assert [tuple(a) for a in actions] == [
        ("issue.acknowledge", "oncall"),
        ("replay.bulk", "oncall"),
        ("issue.resolve", "oncall"),
    ]

    assert _one_line_error(_cli(cfg, tmp_path, "issues", "show", "abc")).endswith(
        "issue id 'abc': not an issue number (see hookledger issues list)"
    )
    assert "no issue 999" in _one_line_error(_cli(cfg, tmp_path, "issues", "resolve", "999"))


@pytest.fixture(scope="module")
def issues_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import upgrade

    path = tmp_path_factory.mktemp("issues")
    url = f"sqlite:///{path / 'db.sqlite'}"
    engine = make_engine(url)
    upgrade(engine)
    dead_event(engine, utcnow(), "boom 1")
    engine.dispose()
    return str(write_config(path, url))


@given(
    command=st.sampled_from(["show", "ack", "resolve", "retry"]),
    text=st.text(max_size=30).filter(lambda t: not t.startswith("-")),
)
@example(command="show", text="1")
@example(command="show", text="#1")
@example(command="ack", text="0")
@example(command="resolve", text="99999999999999999999999")
@example(command="show", text="\uff11")  # a full-width digit is not an issue number
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_issue_id_is_an_answer_or_one_line_and_exit_2(
    command: str, text: str, issues_config: str
) -> None:
    argv = ["issues", command, text, "--config", issues_config]
    if command == "retry":
        argv.append("--dry-run")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 2)
    if code == 2:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("hookledger: error: "), err.getvalue()
    else:
        assert issue_id(text) == 1 and out.getvalue().strip()


@pytest.mark.parametrize("text", ["", " ", "1.5", "-", "0", "1e3", "12a", "١٢"])
def test_what_is_not_an_issue_number(text: str) -> None:
    with pytest.raises(ConfigError, match="not an issue number"):
        issue_id(text)
