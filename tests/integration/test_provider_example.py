"""The "Adding a provider" example (docs/connectors.md), run as written: a provider that signs the URL it called,
built from the public names only (``hookledger.providers``, docs/api.md), registered
with one line, receives over real loopback HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from connectors import registry
from connectors.provider import Provider
from reconciler.inbox.receiver import create_app
from reconciler.storage.models import INBOX_EVENTS
from tests.conftest import make_settings

DOC = Path(__file__).parents[2] / "docs" / "connectors.md"
PUBLIC = "https://hooks.example.com"


def example() -> str:
    text = DOC.read_text()
    match = re.search(r"<!-- provider-example -->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/connectors.md has no provider example"
    return match.group(1)


def test_the_example_imports_only_the_public_modules() -> None:
    imported = {
        node.module
        for node in ast.walk(ast.parse(example()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported == {"hookledger.providers"}
    from hookledger import providers

    names = {
        alias.name
        for node in ast.walk(ast.parse(example()))
        if isinstance(node, ast.ImportFrom) and node.module == "hookledger.providers"
        for alias in node.names
    }
    assert names <= set(providers.__all__)  # nothing private


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> Provider:
    namespace: dict[str, Any] = {}
    exec(compile(example(), "docs/connectors.md (provider example)", "exec"), namespace)
    provider = namespace["PROVIDER"]
    assert isinstance(provider, Provider)
    monkeypatch.setitem(registry.LOADED, "acme", provider)  # as its entry point would load it
    monkeypatch.setenv("T_ACME_SECRET", "acme-secret")
    return provider


def test_the_example_receives_behind_a_proxy(
    acme: Provider, db_url: str, engine: Engine, serve: Any
) -> None:
    settings = make_settings(
        db_url,
        receiver={"public_url": PUBLIC},
        sources=[{"name": "acme", "kind": "acme", "signing_secret_env": "T_ACME_SECRET"}],
    )
    local = serve(create_app(settings, engine)).url
    body = json.dumps({"id": "acme_1", "type": "thing.done"}).encode()

    def post(signed_url: str) -> httpx.Response:
        signature = hmac.new(
            b"acme-secret", signed_url.encode() + b"\n" + body, hashlib.sha256
        ).hexdigest()
        return httpx.post(
            f"{local}/webhooks/acme?region=eu",
            content=body,
            headers={"Content-Type": "application/json", "X-Acme-Signature": signature},
        )

    assert post(f"{PUBLIC}/webhooks/acme?region=eu").json() == {
        "status": "accepted",
        "event_id": "acme_1",
    }
    assert post(f"{PUBLIC}/webhooks/acme?region=us").status_code == 401
    with engine.connect() as conn:
        row = conn.execute(select(INBOX_EVENTS.c.event_type, INBOX_EVENTS.c.headers)).one()
    assert row.event_type == "thing.done" and row.headers["x-acme-signature"] == "<masked>"
