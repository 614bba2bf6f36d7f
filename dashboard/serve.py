"""``python -m dashboard.serve run dashboard/app.py …``: Streamlit's command line with the libraries
the pages use imported before the server starts, so the first page after a start does not wait
for them (about 1.3 s of that page's time; docs/benchmarks.md)."""

from __future__ import annotations

import importlib
import sys

from streamlit.web.cli import main

PRELOAD = (
    "pandas",
    "plotly.graph_objects",
    "sqlalchemy",
    "reconciler.config",
    "reconciler.storage.migrate",
    "reconciler.reconcile.export",
    "reconciler.ops.chain",
    "reconciler.ops.dead_letters",
    "reconciler.ops.discrepancies",
    "reconciler.ops.events",
    "reconciler.ops.frames",
    "reconciler.ops.health",
    "reconciler.ops.operator_actions",
    "reconciler.ops.outbox",
    "reconciler.ops.overview",
    "dashboard.charts",
)

if __name__ == "__main__":
    for name in PRELOAD:
        importlib.import_module(name)
    sys.argv[0] = "streamlit"
    sys.exit(main())
