"""GoCardless's events: gocardless-pro (GoCardless's own library) pages the sandbox's stand-in and
reads the same events, in the same order, as hookledger's connector; the stand-in keeps GoCardless's
documented rules; and any listed item, whatever its shape, is a record or a one-line refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import gocardless_pro
import httpx
import pytest
from gocardless_pro import errors as gc_errors
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connectors.base import ScanOptions
from connectors.errors import MalformedResponseError
from connectors.http import ProviderClient
from connectors.paging import PagingError
from connectors.providers.gocardless.api import API_VERSION, GoCardlessEvents, since_param
from connectors.providers.gocardless.standin import ACCESS_TOKEN
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
HEADERS = {"Authorization": f"Bearer {ACCESS_TOKEN}", "GoCardless-Version": API_VERSION}


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4,
        now=NOW,
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=0,
        listed={"gocardless": 37},
    )
    sandbox = Sandbox(world, stand_ins=["gocardless"])
    mounted = start_server(sandbox.app)
    alone = start_server(sandbox.stand_ins["gocardless"].app())  # the SDK joins /events to its host
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox, mounted, alone = box
    since = since_param(NOW - timedelta(days=2))
    client = gocardless_pro.Client(access_token=ACCESS_TOKEN, base_url=alone.url)
    # the SDK's Paginator sends the query again with after = meta.cursors.after until it is null
    sdk_ids = [e.id for e in client.events.all(params={"created_at[gte]": since, "limit": 8})]

    monkeypatch.setenv("T_GOCARDLESS_TOKEN", ACCESS_TOKEN)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "gocardless",
                    "kind": "gocardless",
                    "base_url": f"{mounted.url}/gocardless",
                    "signing_secret_env": "T_GOCARDLESS_TOKEN",
                    "api_key_env": "T_GOCARDLESS_TOKEN",
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    connector = build_connector(source)
    assert isinstance(connector, GoCardlessEvents)
    try:
        pages = list(
            connector.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2)))
        )
    finally:
        connector.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == sdk_ids
    assert len(ours) == 37 and len(pages) == 5
    times = [r.occurred_at for p in pages for r in p.records]
    assert times == sorted(times, reverse=True)  # newest first, as GoCardless lists
    assert set(ours) == {s.event_id for s in sandbox.world.listed["gocardless"]}


def test_the_sdk_reads_one_event_and_the_stand_ins_refusals(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    sandbox, _, alone = box
    client = gocardless_pro.Client(access_token=ACCESS_TOKEN, base_url=alone.url)
    sent = sandbox.world.listed["gocardless"][0]
    event = client.events.get(sent.event_id)
    assert (event.id, event.action, event.resource_type) == (
        sent.event_id,
        sent.item["action"],
        sent.item["resource_type"],
    )
    # GoCardless's error envelope, read by its own library as GoCardless's errors
    with pytest.raises(gc_errors.InvalidApiUsageError):
        client.events.list(params={"limit": 501})  # at most 500
    with pytest.raises(gc_errors.InvalidApiUsageError):
        client.events.list(params={"resource_type": "payments", "payment": "PM123"})
    with pytest.raises(gc_errors.InvalidApiUsageError):
        client.events.list(params={"include": "payment"})  # only with resource_type
    with pytest.raises(gc_errors.AuthenticationError):
        gocardless_pro.Client(access_token="sandbox_wrong", base_url=alone.url).events.list()


def test_the_cursors_are_ids_and_before_reads_back_the_page_before(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    _, mounted, _ = box
    url = f"{mounted.url}/gocardless/events"
    with httpx.Client(headers=HEADERS) as http:
        first = http.get(url, params={"limit": 10}).json()
        assert first["meta"] == {
            "cursors": {"before": None, "after": first["events"][-1]["id"]},
            "limit": 10,
        }
        second = http.get(url, params={"limit": 10, "after": first["meta"]["cursors"]["after"]})
        back = http.get(
            url, params={"limit": 10, "before": second.json()["meta"]["cursors"]["before"]}
        )
        assert [e["id"] for e in back.json()["events"]] == [e["id"] for e in first["events"]]
        unknown = http.get(url, params={"after": "EV0000NOTGIVEN"})
        assert unknown.status_code == 400
        assert unknown.json()["error"]["type"] == "invalid_api_usage"
        unversioned = http.get(url, headers={"GoCardless-Version": ""})
        assert unversioned.status_code == 400
        # a time filter keeps to its bound, as created_at[gte] does for a scan's window
        newest = first["events"][0]["created_at"]
        only = http.get(url, params={"created_at[gte]": newest}).json()["events"]
        assert [e["created_at"] for e in only] == [newest]


_JSON = JSON_VALUES
_EVENTISH = st.fixed_dictionaries(
    {},
    optional={
        "id": _JSON | st.just("EV123ABC"),
        "created_at": _JSON | st.just("2026-12-01T10:00:00.000Z"),
        "resource_type": _JSON | st.sampled_from(["payments", "mandates", "s", ""]),
        "action": _JSON,
        "links": _JSON | st.fixed_dictionaries({"payment": _JSON}),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_EVENTISH | _JSON, max_size=4), meta=_JSON)
@example(items=[{"id": "EV1", "created_at": 10**30}], meta={"cursors": {"after": "EV1"}})
@example(items=[], meta={"cursors": {"after": "EV1"}})
def test_any_listed_item_is_a_record_or_a_one_line_refusal_naming_the_url(
    items: list[Any], meta: Any
) -> None:
    body = json.dumps({"events": items, "meta": meta}).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    client = ProviderClient("gc", "https://gc.test", transport=httpx.MockTransport(answer))
    connector = GoCardlessEvents("gc", client)
    try:
        pages = list(connector.pages(None, ScanOptions(now=NOW)))
    except (MalformedResponseError, PagingError) as exc:  # paging: a page that says more
        message = str(exc)
        assert "\n" not in message and "https://gc.test/events" in message
    else:
        records = [r for p in pages for r in p.records]
        assert [r.event_id for r in records] == [str(i["id"]) for i in items]
    finally:
        connector.close()
