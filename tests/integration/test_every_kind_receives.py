"""Every registered kind receives (issue 47), generated from the registry over real loopback HTTP
on SQLite and PostgreSQL: each of its ``hookledger send`` samples, signed as its provider signs,
is answered 2xx and stored once under the sample's id; the same delivery sent again is stored
no second time; a delivery signed with another secret is refused with a 4xx and stores nothing.
A kind without samples says why in ``connectors/providers/<kind>`` (only the provider can sign,
or each delivery is confirmed through its API) and is covered by its own tests."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from connectors.options import SourceOptions
from connectors.registry import kinds, provider
from reconciler.inbox.receiver import create_app
from reconciler.sources import options_of
from reconciler.storage.models import INBOX_EVENTS
from tests.conftest import make_settings
from tests.kinds import EXTRA_KEYS, secret_for

SAMPLED = [k for k in kinds() if provider(k).samples is not None]


def _stored(engine: Engine, source: str) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(INBOX_EVENTS.c.event_id).where(INBOX_EVENTS.c.source == source)
        ).scalars()
        return sorted(rows)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one())


def _post(
    client: httpx.Client, kind: str, options: SourceOptions, secret: str, event_type: str | None
) -> tuple[httpx.Response, str, bytes, dict[str, str]]:
    own = provider(kind)
    assert own.samples is not None
    sample = own.samples.sample(options, event_type, secret)
    url = f"{str(client.base_url).rstrip('/')}/webhooks/{kind}"
    headers = dict(sample.headers)
    if own.sign is not None:
        headers |= own.sign(options, sample.headers, sample.body, secret, time.time(), url)
    return (
        client.post(url, content=sample.body, headers=headers),
        sample.event_id,
        sample.body,
        headers,
    )


@pytest.mark.parametrize("kind", SAMPLED)
def test_every_kind_receives_its_samples_once(
    kind: str, db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = provider(kind)
    assert own.samples is not None
    algorithm = own.scheme.algorithm if own.scheme else None
    secret = secret_for(kind, algorithm)
    monkeypatch.setenv("T_KIND_SECRET", secret)
    monkeypatch.setenv("T_GOPAY_ID", "verify-token")
    source: dict[str, Any] = {"name": kind, "kind": kind, "signing_secret_env": "T_KIND_SECRET"}
    source.update(EXTRA_KEYS.get(kind, {}))
    settings = make_settings(db_url, sources=[source])
    options = options_of(settings.sources[0], secrets=False)
    ids = []
    with httpx.Client(base_url=str(serve(create_app(settings, engine)).url), timeout=30) as client:
        for event_type in own.samples.types:
            got, event_id, body, headers = _post(client, kind, options, secret, event_type)
            assert got.status_code < 300, (kind, event_type, got.status_code, got.text)
            ids.append(event_id)
            again = client.post(f"/webhooks/{kind}", content=body, headers=headers)
            assert again.status_code < 300, (kind, event_type, again.text)
        stored = _stored(engine, kind)
        # a delivery may hold several events (a batch): the sample's id is one of them
        # an id completed on arrival (Dropbox's: its arrival) starts with the sample's
        assert all(any(s == i or s.startswith(f"{i}:") for s in stored) for i in ids), (
            kind,
            ids,
            stored,
        )
        assert len(stored) == len(set(stored))
        before = _count(engine)
        if own.sign is not None:
            got, *_ = _post(client, kind, options, secret_for(kind, algorithm, other=True), None)
            assert 400 <= got.status_code < 500, (kind, got.status_code, got.text)
            assert _count(engine) == before
    print(f"figures: {kind}: {len(ids)} sample type(s) received once each ({len(stored)} events)")


@pytest.fixture
def handshakes(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[httpx.Client]:
    monkeypatch.setenv("T_KIND_SECRET", secret_for("zoom", "hmac-sha256"))
    monkeypatch.setenv("T_META_TOKEN", "the-verify-token")
    sources = [
        {"name": kind, "kind": kind, "signing_secret_env": "T_KIND_SECRET"}
        for kind in ("dropbox", "twitch", "zoom")
    ]
    sources.append(
        {
            "name": "meta",
            "kind": "meta",
            "signing_secret_env": "T_KIND_SECRET",
            "verify_token_env": "T_META_TOKEN",
        }
    )
    app = create_app(make_settings(db_url, sources=sources), engine)
    with httpx.Client(base_url=str(serve(app).url), timeout=30) as client:
        yield client


def _signed(
    client: httpx.Client, kind: str, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    own = provider(kind)
    assert own.sign is not None
    options = options_of(
        make_settings("sqlite://", sources=[{"name": kind, "kind": kind}]).sources[0], secrets=False
    )
    url = f"{str(client.base_url).rstrip('/')}/webhooks/{kind}"
    secret = secret_for(kind, "hmac-sha256")
    signed = headers | own.sign(options, headers, body, secret, time.time(), url)
    return client.post(url, content=body, headers=signed)


def test_handshakes_are_answered_as_each_provider_documents(
    handshakes: httpx.Client, engine: Engine
) -> None:
    """Over real HTTP, the receiver reading its secrets from the environment as ``serve`` does."""
    meta = handshakes.get(
        "/webhooks/meta",
        params={
            "hub.mode": "subscribe",
            "hub.verify_token": "the-verify-token",
            "hub.challenge": "1158201444",
        },
    )
    assert (meta.status_code, meta.text) == (200, "1158201444")
    wrong = handshakes.get(
        "/webhooks/meta",
        params={"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"},
    )
    assert wrong.status_code == 403
    dropbox = handshakes.get("/webhooks/dropbox", params={"challenge": "abc123"})
    assert (dropbox.status_code, dropbox.text) == (200, "abc123")
    # as Dropbox asks: the echo is plain text a browser never sniffs as a page
    assert dropbox.headers["content-type"].startswith("text/plain")
    assert dropbox.headers["x-content-type-options"] == "nosniff"
    twitch = _signed(
        handshakes,
        "twitch",
        b'{"challenge":"pogchamp-kappa","subscription":{"id":"f1c2","type":"channel.follow"}}',
        {
            "content-type": "application/json",
            "twitch-eventsub-message-id": "e76c6bd4-55c9-4987-8304-da1588d8988b",
            "twitch-eventsub-message-type": "webhook_callback_verification",
        },
    )
    assert (twitch.status_code, twitch.text) == (200, "pogchamp-kappa")
    token = "qgg8vlvZRS6UYooatFL8Aw"
    zoom = _signed(
        handshakes,
        "zoom",
        json.dumps(
            {"event": "endpoint.url_validation", "payload": {"plainToken": token}, "event_ts": 1}
        ).encode(),
        {"content-type": "application/json"},
    )
    expected = hmac.new(secret_for("zoom", "hmac-sha256").encode(), token.encode(), hashlib.sha256)
    assert zoom.status_code == 200
    assert zoom.json() == {"plainToken": token, "encryptedToken": expected.hexdigest()}
    assert _count(engine) == 0  # handshakes are answered, never stored as events
