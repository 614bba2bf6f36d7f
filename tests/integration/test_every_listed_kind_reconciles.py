"""Every kind reconciled by its event list, one scenario each on SQLite and PostgreSQL: its stand-in's
history delivered signed over loopback HTTP, some withheld, one twice, one late; a business table
with one row doubled and one edited. Reconciliation finds exactly those, and the late one's
``missing`` resolves once it arrives. Generated from the stand-ins (``standin.py`` in a provider's
package): a new one is tested here."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Column, Engine, MetaData, String, Table, insert, select

from connectors.registry import provider
from connectors.sandbox.app import Sandbox
from connectors.sandbox.standin import Sent, stand_in_class, stand_in_kinds
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.inbox.receiver import create_app
from reconciler.reconcile.run import Reconciler
from reconciler.sources import options_of
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS
from tests.conftest import RunningServer, start_server
from tests.kinds import EXTRA_KEYS, secret_for

NOW = datetime.now(UTC).replace(microsecond=0)
EVENTS = 24


def source_entry(kind: str, url: str, **extra: Any) -> dict[str, Any]:
    """A source of ``kind`` reading its stand-in at ``url`` (the sandbox's root), its secrets in
    ``T_<KIND>_…`` variables (``environment``)."""
    stand_in = stand_in_class(kind)
    entry: dict[str, Any] = {
        "name": kind,
        "kind": kind,
        "base_url": f"{url}/{kind}",
        "signing_secret_env": f"T_{kind.upper()}_SIGNING",
        **EXTRA_KEYS.get(kind, {}),
        **stand_in.source_keys,
        **{key: f"T_{kind.upper()}_{key.upper()}" for key in stand_in.credentials},
        **extra,
    }
    return entry


def expected_key(kind: str, sent: Sent) -> str:
    """How the connector's record of ``sent`` is keyed: its event id, or for a stand-in whose
    records are object states (``by_object``), ``<object_type>:<object_id>``."""
    if stand_in_class(kind).by_object:
        return f"{sent.object_type}:{sent.object_id}"
    return sent.event_id


def environment(kind: str) -> dict[str, str]:
    stand_in = stand_in_class(kind)
    scheme = provider(kind).scheme
    env = {f"T_{kind.upper()}_SIGNING": secret_for(kind, scheme.algorithm if scheme else None)}
    env |= {f"T_{kind.upper()}_{key.upper()}": value for key, value in stand_in.credentials.items()}
    return env


@pytest.fixture(params=stand_in_kinds())
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in environment(request.param).items():
        monkeypatch.setenv(name, value)
    return str(request.param)


@pytest.fixture
def box(kind: str) -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        11,
        now=NOW - timedelta(minutes=10),
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=0,
        listed={kind: EVENTS},
    )
    sandbox = Sandbox(world, stand_ins=[kind])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def deliver(settings: Any, kind: str, url: str, sent: list[Sent]) -> None:
    """Each event as its webhook carried it, signed afresh with the source's secret."""
    source = settings.sources[0]
    own = provider(kind)
    options = options_of(source, secrets=False)
    secret = source.signing_secrets()[0]
    with httpx.Client(timeout=30) as client:
        for event in sent:
            signed, body = {}, event.body  # only the provider signs (PayPal): its stand-in did
            if own.resignable:
                signed, body = own.signed_afresh(
                    options, event.headers, event.body, secret, time.time(), url
                )
            response = client.post(url, content=body, headers=dict(event.headers) | signed)
            assert response.status_code < 300, (event.event_id, response.text)


def named(row: Any) -> tuple[str, str]:
    """A finding as (kind, the event or, for a business row, the object it names)."""
    business = row.kind in ("duplicate", "diverged")
    return str(row.kind), str(row.object_id if business else row.record_key)


@pytest.fixture
def business(kind: str, engine: Engine) -> Iterator[Table]:
    """The kind's business table, dropped afterwards: the tests of one session share a PostgreSQL
    schema, which the migrations' test compares with the models."""
    table = Table(
        f"listed_{kind}", MetaData(), Column("object_id", String(80)), Column("status", String(40))
    )
    table.drop(engine, checkfirst=True)
    table.create(engine)
    yield table
    table.drop(engine, checkfirst=True)


def test_withheld_duplicated_diverged_and_late_are_found_exactly(
    kind: str,
    box: tuple[Sandbox, RunningServer],
    business: Table,
    db_url: str,
    engine: Engine,
    serve: Any,
) -> None:
    sandbox, server = box
    stand_in = stand_in_class(kind)
    history = sandbox.world.listed[kind]
    table = business
    settings = parse_settings(
        {
            "database": {"url": db_url},
            # a kind confirmed through its API (PayPal, Mollie) would be asked to wait before the
            # same delivery is confirmed again (reconciler.inbox.confirming): here it comes at once
            "receiver": {"confirm_window_seconds": 0},
            "sources": [
                source_entry(
                    kind,
                    server.url,
                    page_size=5,
                    initial_lookback_hours=48,
                    checks=[
                        {
                            "object_type": stand_in.object_type,
                            "table": table.name,
                            "key": "object_id",
                            "fields": {"status": stand_in.status_path},
                            "unique_by": "object_id",
                        }
                    ],
                )
            ],
        },
        "<test>",
    )
    rng = random.Random(kind)
    order = rng.sample(history, len(history))
    withheld, late, twice = order[:2], order[2], order[3]
    delivered = [*order[3:], twice]
    receiver = serve(create_app(settings, engine))
    url = f"{receiver.url}/webhooks/{kind}"
    deliver(settings, kind, url, delivered)

    # the business table as the handlers would have left it: each object's latest state
    latest: dict[str, str | None] = {}
    for event in history:
        if event.object_id and event.object_type == stand_in.object_type:
            latest[event.object_id] = event.status
    objects = sorted(latest)
    doubled, edited = objects[0], objects[1]
    with engine.begin() as conn:
        conn.execute(insert(table), [{"object_id": o, "status": latest[o]} for o in objects])
        conn.execute(insert(table), [{"object_id": doubled, "status": latest[doubled]}])
        conn.execute(
            table.update().where(table.c.object_id == edited).values(status="edited-by-hand")
        )

    Reconciler(engine, settings).run(kind)
    with engine.connect() as conn:
        found = {named(r) for r in conn.execute(select(DISCREPANCIES))}
        stored = conn.execute(select(INBOX_EVENTS.c.event_id)).scalars().all()
    assert sorted(stored) == sorted({e.event_id for e in delivered})  # the repeat stored once
    expected = {("missing", expected_key(kind, e)) for e in [*withheld, late]}
    expected |= {("duplicate", doubled), ("diverged", edited)}
    assert found == expected

    deliver(settings, kind, url, [late])
    Reconciler(engine, settings).run(kind)
    with engine.connect() as conn:
        opened = select(DISCREPANCIES).where(DISCREPANCIES.c.status == "open")
        still = {named(r) for r in conn.execute(opened)}
    assert still == expected - {("missing", expected_key(kind, late))}
