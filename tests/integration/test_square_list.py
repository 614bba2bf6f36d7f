"""Square's Events API: squareup (Square's own library) searches the sandbox's stand-in and reads the
same events, in the same order, as hookledger's connector; the stand-in keeps Square's documented
quirks (the limit's bounds, a cursor only with its original query and only for 5 minutes, ``{}``
for no match); and any listed item, of any shape, is a record or a one-line refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from square import Square
from square.core.api_error import ApiError

from connectors.base import ScanOptions
from connectors.errors import MalformedResponseError
from connectors.http import ProviderClient
from connectors.paging import PagingError
from connectors.providers.square.api import SquareEvents, iso
from connectors.providers.square.standin import ACCESS_TOKEN
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
SINCE = NOW - timedelta(days=2)


@pytest.fixture
def clock() -> list[datetime]:
    return [NOW]


@pytest.fixture
def sdk(box: tuple[Sandbox, RunningServer]) -> Iterator[Square]:
    """squareup's client on the mounted stand-in (it joins v2/events to its base URL's path)."""
    with httpx.Client() as http:
        yield Square(token=ACCESS_TOKEN, base_url=f"{box[1].url}/square", httpx_client=http)


@pytest.fixture
def box(clock: list[datetime]) -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"square": 37}
    )
    sandbox = Sandbox(world, stand_ins=["square"], clock=lambda: clock[0])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def connector(url: str, monkeypatch: pytest.MonkeyPatch) -> SquareEvents:
    monkeypatch.setenv("T_SQUARE_TOKEN", ACCESS_TOKEN)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "square",
                    "kind": "square",
                    "base_url": f"{url}/square",
                    "signing_secret_env": "T_SQUARE_TOKEN",
                    "api_key_env": "T_SQUARE_TOKEN",
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    built = build_connector(source)
    assert isinstance(built, SquareEvents)
    return built


def query() -> dict[str, Any]:
    return {
        "filter": {"created_at": {"start_at": iso(SINCE)}},
        "sort": {"field": "DEFAULT", "order": "ASC"},
    }


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer], sdk: Square, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    client = sdk
    sdk_ids: list[str] = []
    cursor = None
    while True:  # search_events has no pager: its cursor is sent back with the original query
        page = client.events.search_events(
            limit=8, query=query(), **({"cursor": cursor} if cursor else {})
        )
        sdk_ids += [e.event_id for e in page.events or () if e.event_id]
        if not (cursor := page.cursor):
            break

    c = connector(server.url, monkeypatch)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
        payment = next(s for s in sandbox.world.listed["square"] if s.object_type == "payment")
        ours_now = c.fetch_object("payment", str(payment.object_id))
    finally:
        c.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == sdk_ids
    assert len(ours) == 37 and len(pages) == 5
    times = [r.occurred_at for p in pages for r in p.records]
    assert times == sorted(times)  # oldest first, as the connector asks
    # the object's current state, as squareup reads it, is what a business check compares
    sdk_payment = client.payments.get(str(payment.object_id)).payment
    assert sdk_payment is not None
    assert ours_now["payment"]["status"] == sdk_payment.status


def test_the_limit_is_refused_outside_1_to_100_and_no_match_is_an_empty_object(
    box: tuple[Sandbox, RunningServer], sdk: Square
) -> None:
    _, server = box
    client = sdk
    for limit, code in ((101, "VALUE_TOO_HIGH"), (0, "VALUE_TOO_LOW")):
        with pytest.raises(ApiError) as refused:
            client.events.search_events(limit=limit)
        assert refused.value.status_code == 400
        assert refused.value.body["errors"][0]["code"] == code
    future = {"filter": {"created_at": {"start_at": iso(NOW + timedelta(days=1))}}}
    answer = httpx.post(
        f"{server.url}/square/v2/events",
        json={"query": future},
        headers={"Authorization": f"Bearer {ACCESS_TOKEN}"},
    )
    assert answer.status_code == 200 and answer.json() == {}


def test_a_cursor_is_refused_with_another_query_and_after_five_minutes(
    box: tuple[Sandbox, RunningServer],
    sdk: Square,
    clock: list[datetime],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, server = box
    client = sdk
    cursor = client.events.search_events(limit=5, query=query()).cursor
    assert cursor
    other = {**query(), "sort": {"field": "DEFAULT", "order": "DESC"}}
    with pytest.raises(ApiError) as refused:
        client.events.search_events(limit=5, query=other, cursor=cursor)
    assert refused.value.body["errors"][0]["code"] == "INVALID_CURSOR"

    # a scan that stopped after its second page resumes 6 minutes later: its cursor has lapsed,
    # and it starts again after the last event it read, reading each event once
    c = connector(server.url, monkeypatch)
    try:
        options = ScanOptions(now=NOW, initial_lookback=timedelta(days=2))
        whole = list(c.pages(None, options))
        clock[0] = NOW + timedelta(minutes=6)
        with pytest.raises(ApiError):
            client.events.search_events(limit=5, query=query(), cursor=cursor)
        resumed = list(c.pages(whole[1].cursor, options))
    finally:
        c.close()
    assert [r.event_id for p in resumed for r in p.records] == [
        r.event_id for p in whole[2:] for r in p.records
    ]


_JSON = JSON_VALUES
_EVENTISH = st.fixed_dictionaries(
    {},
    optional={
        "event_id": _JSON | st.just("6a8f5f28-54a1-4eb0-a98a-3111513fd4fc"),
        "created_at": _JSON | st.just("2026-12-01T10:00:00.000Z"),
        "type": _JSON | st.just("payment.updated"),
        "data": _JSON
        | st.fixed_dictionaries(
            {},
            optional={
                "type": _JSON | st.sampled_from(["payment", "refund", ""]),
                "id": _JSON,
                "object": _JSON | st.fixed_dictionaries({"payment": _JSON}),
            },
        ),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_EVENTISH | _JSON, max_size=4), cursor=_JSON)
@example(items=[{"event_id": "e1", "created_at": 10**30}], cursor="c1")
@example(items=[{"event_id": "e1", "data": {"type": "payment", "object": []}}], cursor=None)
def test_any_listed_item_is_a_record_or_a_one_line_refusal_naming_the_url(
    items: list[Any], cursor: Any
) -> None:
    body = json.dumps({"events": items, "cursor": cursor}).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    client = ProviderClient("sq", "https://sq.test", transport=httpx.MockTransport(answer))
    c = SquareEvents("sq", client)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW)))
    except (MalformedResponseError, PagingError) as exc:  # paging: the same page again
        message = str(exc)
        assert "\n" not in message and "https://sq.test/v2/events" in message
    else:
        records = [r for p in pages for r in p.records]
        assert [r.event_id for r in records] == [str(i["event_id"]) for i in items]
    finally:
        c.close()
