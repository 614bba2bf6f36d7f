"""Triage from the terminal, on SQLite and PostgreSQL: ``hookledger events list`` (filters, pages with
a cursor) and the bulk ``hookledger replay --status dead`` (a dry run's count and ids; --yes; refused
when the count moved), the dashboard's bulk replay through the same code."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from reconciler.cli.main import main
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS
from tests.e2e.test_cli import write_config
from tests.integration.test_worker import put

T0 = datetime(2026, 12, 5, 8, tzinfo=UTC)


def _day(engine: Engine, cfg: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Seven invoice.paid events an hour apart; three of them (hours 1, 3, 5) dead letters."""
    for hour in range(7):
        status = "broken" if hour % 2 and hour < 6 else "paid"
        put(
            engine,
            f"evt_{hour}",
            obj={"id": f"in_{hour}", "object": "invoice", "status": status},
            at=T0 + timedelta(hours=hour),
        )
    assert main(["worker", "--once", "--config", cfg]) == 0
    capsys.readouterr()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_events_list_filters_and_pages_with_a_cursor(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    _day(engine, cfg, capsys)
    code, out, _ = _run(capsys, "events", "list", "--status", "dead", "--config", cfg)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == [
        *("RECEIVED", "(UTC)", "SOURCE", "STATUS", "TRIES", "TYPE", "EVENT", "ID", "LAST", "ERROR")
    ]  # a header row labels the columns
    assert [line.split()[6] for line in lines[1:-1]] == ["evt_5", "evt_3", "evt_1"]  # newest first
    assert lines[-1] == "3 of 3"
    assert "invoice payload is broken" in lines[1]

    code, out, _ = _run(capsys, "events", "list", "--limit", "3", "--config", cfg)
    first = out.strip().splitlines()
    assert first[-1].startswith("3 of 7; next page: --cursor ")
    cursor = first[-1].split("--cursor ")[1]
    code, out, _ = _run(
        capsys, "events", "list", "--limit", "3", "--cursor", cursor, "--config", cfg
    )
    second = out.strip().splitlines()
    assert [line.split()[6] for line in second[1:-1]] == ["evt_3", "evt_2", "evt_1"]

    code, out, _ = _run(
        capsys,
        "events",
        "list",
        "--error",
        "BROKEN",
        "--since",
        (T0 + timedelta(hours=2)).isoformat(),
        "--until",
        (T0 + timedelta(hours=5)).isoformat(),
        "--json",
        "--config",
        cfg,
    )
    data = json.loads(out)
    assert [e["event_id"] for e in data["events"]] == ["evt_3"]
    assert data["total"] == 1 and data["next_cursor"] is None

    code, _, err = _run(capsys, "events", "list", "--source", "nope", "--config", cfg)
    assert code == 2 and "--source 'nope'" in err and len(err.strip().splitlines()) == 1


def test_bulk_replay_counts_first_then_replays_the_same_selection_once_audited(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(write_config(tmp_path, db_url))
    _day(engine, cfg, capsys)
    base = ["replay", "--source", "stripe", "--status", "dead", "--config", cfg]
    code, out, _ = _run(
        capsys, *base, "--since", (T0 + timedelta(hours=2)).isoformat(), "--dry-run"
    )
    assert code == 0
    assert out.splitlines()[0].startswith("2 dead events with source stripe; received from")
    assert "evt_5" in out and "evt_3" in out and "evt_1" not in out
    assert "--yes --expect 2" in out
    with engine.connect() as conn:  # a dry run changes nothing
        dead = conn.execute(
            select(func.count()).select_from(INBOX_EVENTS).where(INBOX_EVENTS.c.status == "dead")
        ).scalar_one()
    assert dead == 3

    code, _, err = _run(capsys, *base)
    assert code == 2 and "needs --yes" in err
    code, _, err = _run(capsys, *base, "--yes", "--expect", "2")
    assert code == 2 and "now holds 3 events, not the 2 confirmed" in err
    code, _, err = _run(capsys, "replay", "evt_1", *base[1:], "--yes")
    assert code == 2 and "without EVENT_ID" in err
    code, _, err = _run(capsys, "replay", "--source", "stripe", "--config", cfg)
    assert code == 2 and "--status dead" in err

    code, out, _ = _run(capsys, *base, "--yes", "--expect", "3", "--actor", "oncall")
    assert code == 0 and "3 events put back to pending" in out
    with engine.connect() as conn:
        statuses = dict(conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.status)).all())
        audit = conn.execute(select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor)).all()
    assert {statuses[f"evt_{h}"] for h in (1, 3, 5)} == {"pending"}
    assert [tuple(a) for a in audit] == [("replay.bulk", "oncall")]  # one entry for the three
    code, _, err = _run(capsys, *base, "--yes")
    assert code == 2 and "nothing to replay" in err


@pytest.fixture(scope="module")
def quiet_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import upgrade

    path = tmp_path_factory.mktemp("triage")
    url = f"sqlite:///{path / 'db.sqlite'}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return str(write_config(path, url))


_options = st.sampled_from(["--since", "--until", "--cursor", "--limit", "--status", "--type"])


@given(pairs=st.lists(st.tuples(_options, st.text(max_size=30)), min_size=1, max_size=3))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_filter_is_a_page_or_one_line_and_exit_2(
    pairs: list[tuple[str, str]], quiet_config: str
) -> None:
    argv = ["events", "list", "--config", quiet_config]
    for option, value in pairs:
        argv += [option, value]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusal of a value
            code = exc.code if isinstance(exc.code, int) else 2
    assert code in (0, 2)
    if code == 2:
        assert "Traceback" not in err.getvalue()
        assert err.getvalue().strip(), argv
    else:
        assert out.getvalue().strip().splitlines()[-1].endswith(("no event matches", "of 0"))
