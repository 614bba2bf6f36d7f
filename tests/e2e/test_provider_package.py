"""A provider published as its own package works with no change to hookledger (issue 47): the
package docs/connectors.md shows ("A package of its own, complete") is built from its blocks,
installed with pip into a temporary virtual environment beside hookledger, and there its kind is
configured, a signed delivery is received through ``hookledger serve`` and ``hookledger send``, and
the source is reconciled against a stand-in of its API over real loopback HTTP, one event withheld:
exactly that one is ``missing``."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import RunningServer, start_server

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "connectors.md").read_text()
API_KEY = "acme_live_key"

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def package_files() -> dict[str, str]:
    """The files the walk-through shows, by their path in the package."""
    blocks = re.findall(r"<!-- provider-package: (\S+) -->\n```\w+\n(.*?)```", DOC, re.S)
    return dict(blocks)


class Acme:
    """A stand-in of Acme's events API: the events it sent, oldest first, paged by ``after``."""

    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def app(self) -> Starlette:
        async def events(request: Request) -> JSONResponse:
            if request.headers.get("authorization") != f"Bearer {API_KEY}":
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            limit = int(request.query_params.get("limit", "100"))
            after = request.query_params.get("after")
            ids = [e["id"] for e in self.events]
            start = ids.index(after) + 1 if after in ids else 0
            page = self.events[start : start + limit]
            return JSONResponse({"data": page, "has_more": start + limit < len(self.events)})

        async def one(request: Request) -> JSONResponse:
            for event in self.events:
                if event["id"] == request.path_params["event_id"]:
                    return JSONResponse(event)
            return JSONResponse({"error": "not found"}, status_code=404)

        return Starlette(routes=[Route("/events", events), Route("/events/{event_id}", one)])


@pytest.fixture
def acme_api() -> Iterator[tuple[Acme, str]]:
    acme = Acme()
    server: RunningServer = start_server(acme.app())
    yield acme, server.url
    server.stop()


def _venv(tmp_path: Path) -> Path:
    """A virtual environment with hookledger and its dependencies (this one's, by path) and pip's
    target: packages installed into it stay there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    inner = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(inner, "hookledger-host.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def _install(python: Path, tmp_path: Path) -> None:
    source = tmp_path / "hookledger-provider-acme"
    for relative, text in package_files().items():
        path = source / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _cli(
    python: Path, config: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "reconciler.cli.main", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=config.parent,
    )


def test_the_documented_package_is_the_whole_walk_through() -> None:
    files = package_files()
    assert set(files) == {"pyproject.toml", "hookledger_provider_acme/__init__.py"}
    assert 'acme = "hookledger_provider_acme:PROVIDER"' in files["pyproject.toml"]


def test_a_provider_package_installed_by_pip_receives_and_reconciles(
    tmp_path: Path, acme_api: tuple[Acme, str]
) -> None:
    acme, api_url = acme_api
    python = _venv(tmp_path)
    _install(python, tmp_path)
    port = free_port()
    db = tmp_path / "hookledger.db"
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[database]
url = "sqlite:///{db}"

[receiver]
host = "127.0.0.1"
port = {port}

[reconcile]
grace_seconds = 1

[[sources]]
name = "acme"
kind = "acme"
signing_secret_env = "ACME_SIGNING_SECRET"
api_key_env = "ACME_API_KEY"
base_url = "{api_url}"
"""
    )
    env = {
        **os.environ,
        "ACME_SIGNING_SECRET": "acme-signing-secret",
        "ACME_API_KEY": API_KEY,
    }
    env.pop("HOOKLEDGER_CONFIG", None)
    # hookledger in the temporary venv finds the kind only through the installed package
    found = subprocess.run(
        [
            str(python),
            "-c",
            "from connectors.registry import provider, kinds;"
            "p = provider('acme'); print(p.tolerance, 'acme' in kinds(), type(p).__module__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert found.stdout.split() == ["60", "True", "connectors.provider"], found.stderr
    assert _cli(python, config, "init", env=env).returncode == 0

    serve = subprocess.Popen(
        [str(python), "-m", "reconciler.cli.main", "--config", str(config), "serve"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        sent = _cli(python, config, "send", "acme", "--type", "order.paid", env=env)
        assert sent.returncode == 0, sent.stdout + sent.stderr
    finally:
        serve.terminate()
        serve.communicate(timeout=30)

    with contextlib.closing(sqlite3.connect(db)) as conn:
        received = [row[0] for row in conn.execute("select event_id from inbox_events")]
    assert len(received) == 1 and received[0].startswith("ev_")
    now = int(time.time()) - 1  # past the grace: settled, no longer in flight
    acme.events = [
        {"id": received[0], "type": "order.paid", "created": now - 3},
        {"id": "ev_withheld", "type": "order.refunded", "created": now - 2},
    ]
    time.sleep(1.5)
    run = _cli(python, config, "reconcile", "--source", "acme", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    out = _cli(python, config, "export", "--source", "acme", "-o", "-", env=env)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [(r["kind"], r["event_id"]) for r in rows] == [("missing", "ev_withheld")], rows
    print(f"figures: acme package: {json.dumps(received)} received, 1 of 2 listed missing")
