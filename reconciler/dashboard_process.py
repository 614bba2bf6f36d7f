"""How the dashboard runs as a process: Streamlit's command line and its sign-in secrets file
(shared by ``hookledger dashboard`` and the demo)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.config import Settings

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


DASHBOARD_PACKAGES = ("streamlit", "pandas", "plotly")


def missing_dashboard_packages(find_spec: Callable[[str], Any] | None = None) -> list[str]:
    """The dashboard's packages this environment lacks (found without importing them)."""
    find = find_spec or importlib.util.find_spec
    return [name for name in DASHBOARD_PACKAGES if find(name) is None]


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
        "dashboard.serve",  # Streamlit's command line, the pages' libraries imported first
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
