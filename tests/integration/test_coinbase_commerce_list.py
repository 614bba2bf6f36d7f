"""Coinbase Commerce's events: coinbase-commerce (Coinbase's own Python library) pages the sandbox's
stand-in and reads the same events, in the same order, as hookledger's connector; its documented
paging (``limit`` 0..100, a cursor is an id it listed, ``next_uri`` empty on the last page) is kept;
and a page of any shape is read or refused in one line."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from coinbase_commerce.client import Client
from coinbase_commerce.error import InvalidRequestError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connectors.base import ScanOptions
from connectors.errors import MalformedResponseError, NotFoundError
from connectors.http import ProviderClient
from connectors.providers.coinbase_commerce.api import CoinbaseCommerceEvents
from connectors.providers.coinbase_commerce.standin import API_KEY
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
HEADERS = {"X-CC-Api-Key": API_KEY, "X-CC-Version": "2018-03-22"}


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4,
        now=NOW,
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=0,
        listed={"coinbase_commerce": 37},
    )
    sandbox = Sandbox(world, stand_ins=["coinbase_commerce"])
    mounted = start_server(sandbox.app)
    alone = start_server(sandbox.stand_ins["coinbase_commerce"].app())
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def sdk(url: str) -> Client:
    with warnings.catch_warnings():  # it warns of a base URL that is not https (the loopback)
        warnings.simplefilter("ignore", UserWarning)
        return Client(API_KEY, base_api_uri=f"{url}/")


def connector(url: str, monkeypatch: pytest.MonkeyPatch) -> CoinbaseCommerceEvents:
    monkeypatch.setenv("T_CC_KEY", API_KEY)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "coinbase",
                    "kind": "coinbase_commerce",
                    "base_url": f"{url}/coinbase_commerce",
                    "signing_secret_env": "T_CC_KEY",
                    "api_key_env": "T_CC_KEY",
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    built = build_connector(source)
    assert isinstance(built, CoinbaseCommerceEvents)
    return built


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mounted, alone = box
    client = sdk(alone.url)
    # the library pages by ``cursor_range[-1]`` until a page yields fewer than ``limit``
    sdk_ids = [event["id"] for event in client.event.list_paging_iter(limit=8)]
    c = connector(mounted.url, monkeypatch)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
        one = c.fetch_event(sdk_ids[3])
    finally:
        c.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == sdk_ids  # the connector follows next_uri: the same events, newest first
    assert len(ours) == 37 and len(pages) == 5
    times = [r.occurred_at for p in pages for r in p.records if r.occurred_at]
    assert times == sorted(times, reverse=True)
    retrieved = client.event.retrieve(sdk_ids[3])  # the library merges the answer's warnings in
    assert one.payload == {k: v for k, v in retrieved.items() if k != "warnings"}


def test_coinbases_documented_paging_is_kept(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    _, mounted, alone = box
    url = f"{mounted.url}/coinbase_commerce/events"
    with httpx.Client(headers=HEADERS) as http:
        assert http.get(url, params={"limit": 101}).status_code == 400
        assert http.get(url, params={"limit": 0}).json()["data"] == []  # "0 - 100" accepted
        default = http.get(url).json()["pagination"]
        assert default["limit"] == 25 and default["order"] == "desc"
        last = http.get(url, params={"limit": 100}).json()["pagination"]
        assert last["next_uri"] is None and last["yielded"] == 37  # the end: next_uri empty
        unknown = http.get(url, params={"starting_after": "not-an-event"})
        assert unknown.status_code == 400
        assert unknown.json()["error"]["type"] == "invalid_request"
        old = http.get(url, headers={"X-CC-Version": "2017-01-01"})
        assert old.status_code == 400
    wrong = httpx.get(url, headers={"X-CC-Api-Key": "wrong"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    with pytest.raises(InvalidRequestError):  # the library reads Coinbase's error shape
        sdk(alone.url).event.list(limit=500)


def test_a_charges_current_state_is_its_newest_event(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, mounted, _ = box
    history = sandbox.world.listed["coinbase_commerce"]
    charge = history[0].object_id
    assert charge is not None
    newest = [s for s in history if s.object_id == charge][-1]
    c = connector(mounted.url, monkeypatch)
    try:
        assert c.fetch_object("charge", charge) == newest.item
        with pytest.raises(NotFoundError):
            c.fetch_object("charge", "00000000-0000-4000-8000-000000000000")
    finally:
        c.close()


ITEM = JSON_VALUES
SHAPED = st.fixed_dictionaries(
    {"id": ITEM, "type": ITEM, "created_at": ITEM, "data": ITEM}, optional={"extra": ITEM}
)
LISTED = {"id": "9f4c", "type": "charge:created", "created_at": "2099-01-01T00:00:00Z"}


def no_wait(seconds: float) -> None:
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(items=[LISTED], pagination={"next_uri": "http://["})  # a next URI that does not parse
@example(items=[LISTED], pagination={"next_uri": "https://elsewhere.test/events"})  # another host
@example(items=[{**LISTED, "created_at": 1e300}], pagination=None)  # a time beyond any date
@given(
    items=st.lists(ITEM | SHAPED, max_size=4),
    pagination=st.none() | ITEM | st.fixed_dictionaries({"next_uri": ITEM}),
)
def test_any_page_is_read_or_refused_in_one_line(items: list[Any], pagination: Any) -> None:
    answers = iter([{"data": items, "pagination": pagination}])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=next(answers, {"data": [], "pagination": {}}))

    client = ProviderClient(
        "cc", "https://api.commerce.test", transport=httpx.MockTransport(answer), sleep=no_wait
    )
    c = CoinbaseCommerceEvents("cc", client)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(hours=1))))
    except MalformedResponseError as exc:
        assert "\n" not in str(exc) and "api.commerce.test" in str(exc)
    else:
        assert all(r.event_id for p in pages for r in p.records)
    finally:
        c.close()
