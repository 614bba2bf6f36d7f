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

from reconciler.cli.common import Command, check_port
from reconciler.dashboard_process import (
    missing_dashboard_packages,
    streamlit_argv,
    write_auth_secrets,
)
from reconciler.errors import HookledgerError


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "dashboard", parents=[parent], help="serve the operations dashboard (Streamlit)"
    )
    p.add_argument("--host", help="bind address (default: [dashboard] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: [dashboard] port, 8501)")
    p.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    missing = missing_dashboard_packages()
    if missing:  # one line saying what to install, not the child's traceback
        raise HookledgerError(
            f"the dashboard needs {', '.join(missing)}, not installed here: "
            "pip install 'hookledger[dashboard]'"
        )
    with Command(args) as cmd:
        loaded = cmd.loaded
        cfg = loaded.settings.dashboard
        host = args.host or cfg.host
        port = args.port or cfg.port
        check_port(host, port, "--port" if args.port else "[dashboard] port")
        cmd.check_database()  # an unreachable database: one line now, not a blank page later
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
