"""Shared fixtures: every storage test runs on SQLite and on PostgreSQL.

PostgreSQL comes from ``HOOKLEDGER_TEST_POSTGRES_URL`` (skipped when unset; ``.ci/run`` sets it and
fails if the server is down). Each test session migrates a private schema once and truncates it
between tests, so parallel runs and developers' own tables are never touched.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from sqlalchemy import Engine, text

from reconciler.config import Settings, parse_settings
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import Base
from reconciler.storage.testing import scratch_postgres_schema

pytest_plugins = [
    "tests.scenario",
    "tests.business_databases",
    "hookledger.pytest_plugin",  # hookledger.testing's fixtures, as a handler author adds them
]

# Public example payloads and signature vectors, copied from shared/fixtures/providers (their sources
# and licences are in tests/fixtures/providers/README.md) so that a plain clone's tests pass anywhere.
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"

PG_ENV = "HOOKLEDGER_TEST_POSTGRES_URL"
INBOX_TABLES = [t.name for t in reversed(Base.metadata.sorted_tables)]
# aiosmtpd (the e-mail notifications' SMTP server) logs every connection at INFO; a test that sets
# up hookledger's logging in-process would otherwise print them between the pytest-xdist dots
logging.getLogger("mail.log").setLevel(logging.WARNING)

SECRETS = {
    "stripe": "whsec_test_secret",
    "github": "It's a Secret to Everybody",
    "shopify": "hush",
    "standard": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "generic": "generic-secret",
}


def _pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    base = _pg_base_url()
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    with scratch_postgres_schema(base) as url:
        yield url


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """The PostgreSQL test schema at the head revision for one test, emptied after it (the schema
    is shared by the session: a test that writes to it directly must leave it empty)."""
    eng = make_engine(pg_url)
    upgrade(eng)
    eng.dispose()
    try:
        yield pg_url
    finally:
        eng = make_engine(pg_url)
        with eng.begin() as conn:
            conn.execute(text(f"TRUNCATE {', '.join(INBOX_TABLES)} RESTART IDENTITY CASCADE"))
        eng.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hookledger.db'}"
        eng = make_engine(url)
        upgrade(eng)
        eng.dispose()
        yield url
        return
    url = request.getfixturevalue("pg_url")
    yield url
    eng = make_engine(url)
    with eng.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(INBOX_TABLES)} RESTART IDENTITY CASCADE"))
    eng.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


def make_settings(db_url: str = "sqlite://", **overrides: Any) -> Settings:
    data: dict[str, Any] = {
        "database": {"url": db_url},
        "worker": {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05},
        "sources": [
            {"name": "stripe", "kind": "stripe", "signing_secret_env": "T_STRIPE_SECRET"},
            {"name": "github", "kind": "github", "signing_secret_env": "T_GITHUB_SECRET"},
            {"name": "shopify", "kind": "shopify", "signing_secret_env": "T_SHOPIFY_SECRET"},
            {"name": "svix", "kind": "standard", "signing_secret_env": "T_STANDARD_SECRET"},
            {
                "name": "acme",
                "kind": "generic",
                "signing_secret_env": "T_GENERIC_SECRET",
                "signature_header": "X-Acme-Signature",
                "signature_prefix": "sha256=",
                "id_json_path": "meta.id",
                "type_json_path": "meta.type",
            },
        ],
    }
    for table, values in overrides.items():
        if isinstance(values, dict):
            data.setdefault(table, {}).update(values)
        else:
            data[table] = values
    return parse_settings(data, "<test>")


@pytest.fixture(autouse=True)
def _secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_STRIPE_SECRET", SECRETS["stripe"])
    monkeypatch.setenv("T_GITHUB_SECRET", SECRETS["github"])
    monkeypatch.setenv("T_SHOPIFY_SECRET", SECRETS["shopify"])
    monkeypatch.setenv("T_STANDARD_SECRET", SECRETS["standard"])
    monkeypatch.setenv("T_GENERIC_SECRET", SECRETS["generic"])


@dataclass
class RunningServer:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_server(app: Any) -> RunningServer:
    """Serve an ASGI app with uvicorn on 127.0.0.1 and a free port, in a thread."""
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the listening
    # socket says TCP, and without it every keep-alive response waits ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    return RunningServer(f"http://127.0.0.1:{port}", server, thread)


@pytest.fixture
def serve() -> Iterator[Any]:
    running: list[RunningServer] = []

    def _serve(app: Any) -> RunningServer:
        srv = start_server(app)
        running.append(srv)
        return srv

    yield _serve
    for srv in running:
        srv.stop()
