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


def _imported_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    script = (
        "import sys\n"
        f"{code}\n"
        f"print(sorted({{m for m in sys.modules if m.startswith({prefixes!r})}}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return list(eval(out.stdout.strip()))  # a printed list of names


def test_the_parser_imports_neither_the_models_nor_sqlalchemy() -> None:
    """--version, --help and a wrong option build the parser only: they start in ~0.06 s (bench
    /startup.py), not the 0.4 s the configuration's models, SQLAlchemy and the providers cost."""
    code = "from reconciler.cli.main import build_parser\nbuild_parser()"
    heavy = ("sqlalchemy", "pydantic", "alembic", "httpx", "connectors.registry", "starlette")
    assert _imported_after(code, heavy) == []


def test_serve_and_worker_import_neither_the_reconciler_nor_alembic() -> None:
    code = (
        "import reconciler.cli.main, reconciler.inbox.receiver, reconciler.inbox.worker\n"
        "import reconciler.outbox.publisher"
    )
    assert _imported_after(code, ("alembic", "reconciler.reconcile", "apscheduler")) == []


def test_only_a_discord_source_loads_cryptography() -> None:
    """cryptography's OpenSSL bindings (about 6 MB of a reconcile run's peak memory, bench
    /reconcile.py) load when a Discord source verifies or checks its key, not with the providers'
    registry that every command imports."""
    core = "\n".join(f"import {name}" for name in CORE)
    assert _imported_after(core + "\nimport connectors.registry", ("cryptography",)) == []
    discord = (
        "from connectors.providers.discord import ed25519_public_key\ned25519_public_key('00' * 32)"
    )
    assert _imported_after(discord, ("cryptography.hazmat",)) != []


def test_a_stripe_reconcile_imports_no_other_provider() -> None:
    """Providers are found by entry point and imported when used: a run over one Stripe source,
    with every core module loaded, imports no other kind's module."""
    from importlib.metadata import entry_points

    modules = {point.name: point.module for point in entry_points(group="hookledger.providers")}
    others = tuple(sorted({m for k, m in modules.items() if k != "stripe"}))
    assert len(modules) >= 11 and others
    core = "\n".join(f"import {name}" for name in CORE)
    code = (
        f"{core}\n"
        "from reconciler.config.settings import parse_settings\n"
        "from reconciler.sources import build_connector\n"
        "s = parse_settings({'sources': [{'name': 's', 'kind': 'stripe', 'api_key_env': 'K'}]}, 'c')\n"
        "build_connector(s.sources[0], environ={'K': 'sk_test_1'}).close()\n"
        "import connectors.providers.stripe\n"
    )
    loaded = _imported_after(code, others)
    assert [m for m in loaded if m in others or m.startswith(tuple(o + "." for o in others))] == []
