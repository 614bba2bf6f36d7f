"""Paddle's event stream: paddle-python-sdk (Paddle's own library) pages the sandbox's stand-in and
reads the same events, in the same order, as hookledger's connector."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from paddle_billing import Client, Environment, Options
from paddle_billing.Resources.Events.Operations import ListEvents
from paddle_billing.Resources.Shared.Operations import Pager
from paddle_billing.Resources.Shared.Operations.List.OrderBy import OrderBy

from connectors.base import ScanOptions
from connectors.providers.paddle.api import PaddleEvents
from connectors.providers.paddle.standin import API_KEY
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"paddle": 37}
    )
    sandbox = Sandbox(world, stand_ins=["paddle"])
    mounted = start_server(sandbox.app)
    alone = start_server(sandbox.stand_ins["paddle"].app())  # the SDK joins /events to its host
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _sandbox, mounted, alone = box
    monkeypatch.setattr(Environment, "base_url", property(lambda self: alone.url))
    client = Client(API_KEY, options=Options(Environment.SANDBOX))
    listed = client.events.list(ListEvents(Pager(order_by=OrderBy.id_descending(), per_page=8)))
    sdk_ids = [event.event_id for event in listed]  # the SDK follows meta.pagination.next

    monkeypatch.setenv("T_PADDLE_KEY", API_KEY)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "paddle",
                    "kind": "paddle",
                    "base_url": f"{mounted.url}/paddle",
                    "signing_secret_env": "T_PADDLE_KEY",
                    "api_key_env": "T_PADDLE_KEY",
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    connector = build_connector(source)
    assert isinstance(connector, PaddleEvents)
    try:
        pages = list(
            connector.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2)))
        )
    finally:
        connector.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == sdk_ids
    assert len(ours) == 37 and len(pages) == 5
    assert ours == sorted(ours, reverse=True)  # newest first, as Paddle's default order_by


def test_a_page_size_beyond_paddles_maximum_is_answered_with_its_maximum(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    import httpx

    _, mounted, _ = box
    answer = httpx.get(
        f"{mounted.url}/paddle/events",
        params={"per_page": 500},
        headers={"Authorization": f"Bearer {API_KEY}"},
    ).json()
    assert answer["meta"]["pagination"]["per_page"] == 200
    refused = httpx.get(
        f"{mounted.url}/paddle/events",
        params={"order_by": "occurred_at[ASC]"},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request"
