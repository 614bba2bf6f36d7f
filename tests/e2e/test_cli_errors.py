"""Every command: one clear line naming what was wrong, and the documented exit code (2)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from reconciler.cli.main import main
from reconciler.config import parse_settings
from reconciler.errors import ConfigError

SOURCE = """
[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
api_key_env = "T_KEY"
"""

# Commands that touch the database, with arguments that are otherwise valid.
DATABASE_COMMANDS = [
    ["init"],
    ["worker", "--once"],
    ["replay", "evt_1", "--source", "stripe"],
    ["events", "show", "evt_1", "--source", "stripe"],
    ["export", "-o", "-"],
    ["discrepancies", "resolve", "1", "--reason", "r"],
    ["reconcile", "--source", "stripe", "--json"],
    ["backfill", "evt_1", "--source", "stripe"],
    ["snapshot"],
    ["prune"],
    ["serve", "--port", "0"],
    ["dashboard", "--port", "0"],
]


def _config(tmp_path: Path, url: str, extra: str = SOURCE) -> str:
    path = tmp_path / "c.toml"
    path.write_text(f'[database]\nurl = "{url}"\nconnect_timeout_seconds = 3\n{extra}')
    return str(path)


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]  # bound, never listening: connections are refused


@pytest.mark.parametrize("argv", DATABASE_COMMANDS, ids=lambda a: a[0])
def test_an_unreachable_database_is_one_line_naming_it_with_the_password_masked(
    tmp_path: Path,
    refused_port: int,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("T_KEY", "sk_test_x")
    url = f"postgresql+psycopg://ops:s3cr3t@127.0.0.1:{refused_port}/hookledger"
    cfg = _config(tmp_path, url)
    assert main([*argv, "--config", cfg]) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert line.startswith(
        f"hookledger: error: database postgresql+psycopg://ops:***@127.0.0.1:{refused_port}/hookledger: "
    )
    assert "refused" in line.lower()
    assert "s3cr3t" not in captured.err + captured.out


def test_a_nonexistent_database_names_the_drivers_reason(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_url(pg_url).set(database="hookledger_no_such_database", query={})
    url = url.render_as_string(hide_password=False)
    assert main(["export", "-o", "-", "--config", _config(tmp_path, url)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert 'database "hookledger_no_such_database" does not exist' in line


def test_a_sqlite_database_that_cannot_be_created_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cfg = _config(tmp_path, f"sqlite:///{blocker}/sub/hookledger.db")
    assert main(["init", "--config", cfg]) == 2
    assert "cannot create its folder" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "-o", "-", "--source", "strpe"],
        ["replay", "evt_1", "--source", "strpe"],
        ["events", "show", "evt_1", "--source", "strpe"],
        ["backfill", "evt_1", "--source", "strpe"],
        ["reconcile", "--source", "strpe"],
        ["discrepancies", "ignore", "--reason", "r", "--source", "strpe"],
    ],
    ids=lambda a: a[0],
)
def test_an_unknown_source_is_exit_2_with_the_same_message_everywhere(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert main(["init", "--config", cfg]) == 0
    capsys.readouterr()
    assert main([*argv, "--config", cfg]) == 2
    captured = capsys.readouterr()
    assert _one_line(captured.err) == (
        "hookledger: error: --source 'strpe': no source of that name in the configuration "
        "(configured: stripe)"
    )
    assert captured.out == ""  # no empty CSV


@pytest.mark.parametrize("command", ["serve", "sandbox", "dashboard"])
def test_a_port_in_use_is_exit_2_naming_the_port(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert main(["init", "--config", cfg]) == 0
    capsys.readouterr()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main([command, "--port", str(port), "--config", cfg]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"hookledger: error: --port {port}: cannot listen on 127.0.0.1:{port}")


def test_without_a_configuration_file_it_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKLEDGER_CONFIG", raising=False)
    monkeypatch.setenv("HOOKLEDGER_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert main(["init"]) == 0
    err = capsys.readouterr().err
    assert f"no configuration file at {tmp_path / 'config.toml'}" in err
    assert main(["serve"]) == 2  # and the receiver refuses to start with no source
    assert "no enabled source in [[sources]]" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["init"], ["export", "-o", "-"], ["schedule"], ["prune"]])
def test_an_invalid_cron_is_refused_by_every_command_at_load(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[reconcile]\nschedule = "0 25 * * *"\n')
    assert main([*argv, "--config", str(path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "table [reconcile], key 'schedule'" in line and "'0 25 * * *'" in line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule=st.one_of(
        st.text(max_size=30),
        st.lists(
            st.sampled_from(["*", "0", "5", "59", "60", "*/5", "1-3", "mon", "jan", ",", "?"]),
            min_size=1,
            max_size=7,
        ).map(" ".join),
    ),
    timezone=st.one_of(
        st.sampled_from(["UTC", "Europe/Paris", "Nowhere/City", ""]), st.text(max_size=20)
    ),
)
def test_any_schedule_and_timezone_load_or_fail_with_a_config_error(
    schedule: str, timezone: str
) -> None:
    try:
        settings_ = parse_settings(
            {"reconcile": {"schedule": schedule, "timezone": timezone}}, "<fuzz>"
        )
    except ConfigError as exc:
        # one line per problem, each naming the table and the key
        assert all(
            line.startswith("<fuzz>: table [reconcile], key ") for line in str(exc).splitlines()
        )
        return
    from reconciler.schedule import trigger_for

    trigger_for(settings_)  # what loads is what the scheduler accepts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flag=st.sampled_from(["--latency-ms", "--rate-limit"]),
    value=st.one_of(
        st.floats(max_value=-1e-9),
        st.floats(min_value=100_000.001),
        st.just("nan"),
        st.just("0"),
        st.text(alphabet="abcxyz-+,", min_size=1, max_size=6),
    ),
)
def test_a_sandbox_latency_or_rate_limit_out_of_range_is_one_line_and_exit_2(
    flag: str, value: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Values the sandbox cannot use (negative, too large, not a number; a rate of 0) are refused
    before it listens: exit 2, the last line naming the flag (argparse's usage line comes first
    for a value that is not a number at all), no traceback."""
    import contextlib
    import io

    if flag == "--latency-ms" and value == "0":
        return  # no latency is a valid setting
    cfg = _config(tmp_path_factory.mktemp("c"), "sqlite:///:memory:")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(["sandbox", "--port", "0", flag, str(value), "--config", cfg])
        except SystemExit as exc:  # argparse's own refusal
            code = exc.code
    assert code == 2
    text = err.getvalue()
    assert "Traceback" not in text and flag in text.strip().splitlines()[-1]


def test_the_dashboard_without_its_packages_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def without_plotly(name: str, *args: object) -> object:
        return None if name == "plotly" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", without_plotly)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "x.db"}"\n')
    assert main(["dashboard", "--config", str(cfg)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "hookledger: error: the dashboard needs plotly, not installed here: "
        "pip install 'hookledger[dashboard]'"
    ]
