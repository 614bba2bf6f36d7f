"""A new user's first hour, each stumble of issue 46 as a check: a read command on a database that
does not exist says so and creates nothing; a ``postgresql://`` URL is told the driver to write; a
fresh database's ``doctor`` says to run ``init`` first; ``reconcile`` says which sources it leaves
out; a port from the configuration file is named as that; and the shipped files say what exists."""

from __future__ import annotations

import importlib.util
import re
import socket
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.cli.reconcile_cmds import _not_reconciled
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, url: str, extra: str = "") -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[database]
url = "{url}"

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
{extra}
"""
    )
    return str(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["events", "list"],
        ["deliveries", "list"],
        ["events", "tail"],
        ["export", "-o", "-"],
        ["worker", "--once"],
    ],
)
def test_a_read_command_on_a_database_that_does_not_exist_creates_nothing(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "var" / "hookledger.db"
    cfg = _config(tmp_path, f"sqlite:///{db}")
    assert main([*argv, "--config", cfg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"hookledger: error: the database {db} does not exist: run 'hookledger init' first (or "
        "check [database] url, HOOKLEDGER_DATABASE_URL and the working directory)"
    ]
    assert not db.parent.exists()


@pytest.mark.skipif(
    importlib.util.find_spec("psycopg2") is not None, reason="psycopg2 is installed here"
)
def test_a_postgresql_url_without_the_driver_is_told_the_url_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, "postgresql://postgres@127.0.0.1:5432/test")
    assert main(["events", "list", "--config", cfg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "write 'postgresql+psycopg://'" in err[0], err


def test_doctor_on_a_fresh_database_says_to_run_init_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'fresh.db'}")
    assert main(["doctor", "--offline", "--config", cfg]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    hint = "doctor: the database is not initialised: run 'hookledger init' first, then doctor"
    assert lines.count(hint) == 1 and lines[-2] == hint
    assert main(["init", "--config", cfg]) == 0
    capsys.readouterr()
    main(["doctor", "--offline", "--config", cfg])
    assert hint not in capsys.readouterr().out


def test_reconcile_says_which_sources_a_run_of_everything_leaves_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(
        sources=[
            {"name": "stripe", "kind": "stripe", "signing_secret_env": "T_STRIPE_SECRET"},
            {"name": "chat", "kind": "slack", "signing_secret_env": "T_STRIPE_SECRET"},
            {
                "name": "off",
                "kind": "stripe",
                "signing_secret_env": "T_STRIPE_SECRET",
                "enabled": False,
            },
            {
                "name": "gh",
                "kind": "github",
                "signing_secret_env": "T_GITHUB_SECRET",
                "api_key_env": "T_GITHUB_TOKEN",
                "repository": "acme/shop",
                "hook_id": 1,
            },
        ]
    )
    assert _not_reconciled(settings) == [
        "stripe: skipped, not reconciled: no API credentials: set api_key_env in its [[sources]] "
        "entry",
        "chat: skipped, not reconciled: hookledger cannot read a 'slack' API (it only receives)",
    ]
    # said by the command before the run (here the one source it runs cannot be reached)
    cfg = _config(
        tmp_path,
        f"sqlite:///{tmp_path / 'r.db'}",
        '[[sources]]\nname = "gh"\nkind = "github"\nsigning_secret_env = "T_GITHUB_SECRET"\n'
        'api_key_env = "T_GITHUB_TOKEN"\nrepository = "acme/shop"\nhook_id = 1\nbase_url = "http://127.0.0.1:9"\n'
        "\n[reconcile]\nmax_wait_seconds = 1\n",
    )
    monkeypatch.setenv("T_GITHUB_TOKEN", "ghp_test")
    assert main(["init", "--config", cfg]) == 0
    capsys.readouterr()
    main(["reconcile", "--config", cfg])
    err = capsys.readouterr().err
    assert "hookledger: stripe: skipped, not reconciled: no API credentials" in err
    main(["reconcile", "--source", "gh", "--config", cfg])  # a source named: nothing else said
    assert "stripe" not in capsys.readouterr().err


def test_a_port_from_the_configuration_file_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'p.db'}", f"\n[receiver]\nport = {port}\n")
        assert main(["init", "--config", cfg]) == 0
        capsys.readouterr()
        assert main(["serve", "--config", cfg]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookledger: error: [receiver] port {port}: cannot listen on "), err


def test_the_dashboards_port_from_the_configuration_file_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'd.db'}", f"\n[dashboard]\nport = {port}\n")
        assert main(["init", "--config", cfg]) == 0
        capsys.readouterr()
        assert main(["dashboard", "--config", cfg]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"hookledger: error: [dashboard] port {port}: cannot listen on "), err
    assert "--port" not in err


def test_the_shipped_config_points_to_sections_that_exist() -> None:
    text = (ROOT / "config.toml").read_text()
    cited = re.findall(r"(README(?:\.md)?|docs/[\w-]+\.md)(?: \(| )\"([^\"]+)\"", text)
    files = re.findall(r"(?:README\.md|docs/[\w-]+\.md)", text)
    assert files, "config.toml cites no document"
    for name in files:
        assert (ROOT / name).is_file(), name
    for name, section in cited:
        doc = (ROOT / (name if name.endswith(".md") else "README.md")).read_text()
        assert re.search(rf"^#+ {re.escape(section)}$", doc, re.M), (name, section)


def test_the_cli_reference_renders_every_exit_status_whole() -> None:
    statuses = re.findall(r"^- `([^`]*)` ", (ROOT / "docs" / "cli.md").read_text(), re.M)
    assert "141" in statuses and all(s.isdigit() for s in statuses)
    assert "`1` 41" not in (ROOT / "docs" / "cli.md").read_text()


def test_the_systemd_steps_install_the_timer_and_enable_the_publisher() -> None:
    ops = (ROOT / "docs" / "operations.md").read_text()
    steps = ops[ops.index("## systemd units") : ops.index("### A cron alternative")]
    copy = next(line for line in steps.splitlines() if "deploy/systemd/" in line and " cp " in line)
    kinds = {p.suffix for p in (ROOT / "deploy" / "systemd").iterdir()}
    assert all(f"deploy/systemd/*{kind}" in copy for kind in kinds), (copy, kinds)
    enable = next(line for line in steps.splitlines() if "systemctl enable" in line)
    assert "hookledger-publisher" in enable and "hookledger-worker@" in enable
    lines = [line for line in steps.splitlines() if line.startswith("sudo ")]
    init = next(i for i, line in enumerate(lines) if "hookledger init" in line)
    doctor = next(i for i, line in enumerate(lines) if "hookledger doctor" in line)
    assert init < doctor  # doctor checks an initialised database
