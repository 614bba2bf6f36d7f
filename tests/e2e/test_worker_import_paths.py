"""``[worker] import_paths``: handler code that is not installed reaches the worker through the
configuration (as a systemd unit or a container runs it: another working directory, no PYTHONPATH),
relative paths from the configuration file's directory; a handler module that cannot be imported,
or raises while it is, is one line naming it and the error, exit 2, for the worker and ``doctor``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from reconciler.cli.main import main
from reconciler.config import load_config
from reconciler.errors import ConfigError
from reconciler.inbox.handlers import load_handler_modules
from reconciler.inbox.receiver import create_app
from reconciler.storage.models import INBOX_EVENTS

HOOKLEDGER = Path(sys.executable).with_name("hookledger")

HANDLERS = """
from reconciler.inbox.handlers import handler


@handler("stripe", "invoice.paid")
def invoice_paid(event, conn):
    print(f"handled {event.event_id}", flush=True)
"""


def _deployment(root: Path, db_url: str, module: str, code: str, import_paths: str) -> Path:
    """/etc/hookledger-like: the configuration in a directory of its own, the code in ``app``."""
    etc = root / "etc"
    (etc / "app" / "shop").mkdir(parents=True)
    (etc / "app" / "shop" / "__init__.py").write_text("")
    (etc / "app" / "shop" / f"{module}.py").write_text(code)
    cfg = etc / "config.toml"
    cfg.write_text(
        f"""
[database]
url = "{db_url}"

[worker]
handlers = ["shop.{module}"]
import_paths = {import_paths}

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
"""
    )
    return cfg


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HOOKLEDGER_CONFIG")}
    return subprocess.run(
        [str(HOOKLEDGER), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_relative_import_path_from_the_config_file_lets_the_worker_apply_the_event(
    db_url: str, engine: Engine, serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _deployment(tmp_path, db_url, "handlers", HANDLERS, '["app"]')
    receiver = serve(create_app(load_config(str(cfg)).settings, engine))
    to = f"{receiver.url}/webhooks/stripe"
    assert main(["send", "stripe", "--type", "invoice.paid", "--to", to, "--config", str(cfg)]) == 0
    capsys.readouterr()
    elsewhere = tmp_path / "var"  # a service's working directory: nothing importable there
    elsewhere.mkdir()
    done = _run("worker", "--once", "--config", str(cfg), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "handled evt_" in done.stdout and "processed 1" in done.stdout, done.stdout
    with engine.connect() as conn:
        assert conn.execute(select(INBOX_EVENTS.c.status)).scalars().all() == ["processed"]


def test_without_the_import_path_the_module_not_found_says_where_to_put_it(
    tmp_path: Path,
) -> None:
    cfg = _deployment(tmp_path, f"sqlite:///{tmp_path / 'h.db'}", "handlers", HANDLERS, "[]")
    assert _run("init", "--config", str(cfg), cwd=tmp_path).returncode == 0
    done = _run("worker", "--once", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "hookledger: error: [worker] handlers: cannot import module 'shop.handlers': No module "
        "named 'shop' (put the directory that holds it in [worker] import_paths)"
    ]


def test_a_handler_module_that_raises_when_imported_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    code = HANDLERS + "\nRATES = {'usd': 1}\nDEFAULT = RATES['eur']\n"
    app = tmp_path / "etc" / "app"
    cfg = _deployment(tmp_path, f"sqlite:///{tmp_path / 'h.db'}", "broken", code, f'["{app}"]')
    assert _run("init", "--config", str(cfg), cwd=tmp_path).returncode == 0
    done = _run("worker", "--once", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(
        "hookledger: error: [worker] handlers: module 'shop.broken' raised KeyError when imported "
        f"at {app / 'shop' / 'broken.py'}:"
    )
    assert lines[0].endswith(": 'eur'")

    doctor = _run("doctor", "--offline", "--config", str(cfg), cwd=tmp_path)
    assert doctor.returncode == 2
    assert "module 'shop.broken' raised KeyError" in doctor.stdout, doctor.stdout


def test_doctor_warns_about_an_import_path_that_is_not_a_directory(tmp_path: Path) -> None:
    cfg = _deployment(tmp_path, f"sqlite:///{tmp_path / 'h.db'}", "handlers", HANDLERS, "[]")
    cfg.write_text(cfg.read_text().replace("import_paths = []", 'import_paths = ["app", "gone"]'))
    assert _run("init", "--config", str(cfg), cwd=tmp_path).returncode == 0
    doctor = _run("doctor", "--offline", "--config", str(cfg), cwd=tmp_path)
    warned = [line for line in doctor.stdout.splitlines() if "import_paths" in line]
    assert len(warned) == 1 and f"{tmp_path / 'etc' / 'gone'} is not a directory" in warned[0]
    assert warned[0].startswith("WARN"), doctor.stdout


def test_relative_paths_are_anchored_at_the_file_and_bad_ones_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "conf" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text('[worker]\nimport_paths = ["app", "../lib", "/srv/code"]\n')
    paths = load_config(str(cfg)).settings.worker.import_paths
    assert paths == (str(tmp_path / "conf" / "app"), str(tmp_path / "lib"), "/srv/code")
    cfg.write_text('[worker]\nimport_paths = [""]\n')
    with pytest.raises(ConfigError, match=r"\[worker\], key 'import_paths'.*not a directory path"):
        load_config(str(cfg))


def test_the_first_listed_import_path_is_searched_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "hl_import_order_probe.py").write_text(f"WHERE = {name!r}\n")
    monkeypatch.delitem(sys.modules, "hl_import_order_probe", raising=False)
    load_handler_modules(
        ["hl_import_order_probe"], [str(tmp_path / "first"), str(tmp_path / "second")]
    )
    assert sys.modules["hl_import_order_probe"].WHERE == "first"
    monkeypatch.delitem(sys.modules, "hl_import_order_probe")
