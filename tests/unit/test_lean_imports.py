"""The receiver, the worker, the reconciler, the scheduler and the doctor import nothing of the
dashboard's stack (Streamlit, pandas, plotly, pyarrow): a host that runs only them could install
without it (docs/operations.md, "Install footprint"), and their start-up does not pay for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = (
    "reconciler.cli.main",
    "reconciler.inbox.receiver",
    "reconciler.inbox.worker",
    "reconciler.reconcile.run",
    "reconciler.schedule",
    "reconciler.ops.doctor",
    "reconciler.outbox.publisher",
)
DASHBOARD_STACK = ("streamlit", "pandas", "plotly", "pyarrow", "altair")


def test_core_modules_do_not_import_the_dashboard_stack() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in {DASHBOARD_STACK!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
