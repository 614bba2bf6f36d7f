"""``hookledger dashboard``: serve the Streamlit operations dashboard on 127.0.0.1 by default."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from reconciler.cli.common import check_port, load, open_engine
from reconciler.config import Settings

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "dashboard", parents=[parent], help="serve the operations dashboard (Streamlit)"
    )
    p.add_argument("--host", help="bind address (default: [dashboard] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: [dashboard] port, 8501)")
    p.set_defaults(func=cmd_dashboard)


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_auth_secrets(settings: Settings, host: str, port: int, folder: Path) -> Path:
    """Streamlit reads ``st.login``'s OIDC settings from a secrets file: write one (mode 0600) from
    the configuration and the environment variables it names. Secrets never sit in config.toml."""
    auth = settings.dashboard.auth
    redirect = auth.redirect_uri or f"http://{host}:{port}/oauth2callback"
    lines = [
        "[auth]",
        f"redirect_uri = {_toml_str(redirect)}",
        f"cookie_secret = {_toml_str(auth.secret('cookie_secret_env'))}",
        f"client_id = {_toml_str(auth.client_id or '')}",
        f"client_secret = {_toml_str(auth.secret('client_secret_env'))}",
        f"server_metadata_url = {_toml_str(auth.server_metadata_url or '')}",
    ]
    path = folder / "secrets.toml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def streamlit_argv(host: str, port: int, secrets: Path | None) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]
    if secrets is not None:
        argv += ["--secrets.files", str(secrets)]
    return argv


def cmd_dashboard(args: argparse.Namespace) -> int:
    loaded = load(args)
    cfg = loaded.settings.dashboard
    host = args.host or cfg.host
    port = args.port or cfg.port
    check_port(host, port)
    open_engine(loaded).dispose()  # an unreachable database: one line now, not a blank page later
    env = dict(os.environ)
    if loaded.path is not None:
        env["HOOKLEDGER_CONFIG"] = str(loaded.path.resolve())
    with tempfile.TemporaryDirectory(prefix="hookledger-dashboard-") as tmp:
        secrets = (
            write_auth_secrets(loaded.settings, host, port, Path(tmp)) if cfg.auth.enabled else None
        )
        print(f"dashboard on http://{host}:{port}", file=sys.stderr, flush=True)
        proc = subprocess.Popen(streamlit_argv(host, port, secrets), env=env)
        previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(timeout=20)
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)
