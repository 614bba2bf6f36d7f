"""Chargebee's events: chargebee (Chargebee's own library) pages the sandbox's stand-in and reads the
same events, in the same order, as hookledger's connector; the stand-in keeps Chargebee's documented
rules; a reconciled source must name its site; and any listed item, whatever its shape, is a record
or a one-line refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import chargebee
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connectors.base import ScanOptions
from connectors.errors import ConfigError, MalformedResponseError
from connectors.http import ProviderClient
from connectors.paging import PagingError
from connectors.providers.chargebee.api import ChargebeeEvents, basic
from connectors.providers.chargebee.standin import API_KEY
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"chargebee": 37}
    )
    sandbox = Sandbox(world, stand_ins=["chargebee"])
    mounted = start_server(sandbox.app)
    alone = start_server(
        sandbox.stand_ins["chargebee"].app()
    )  # the library joins /api/v2 to a host
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def sdk(url: str, monkeypatch: pytest.MonkeyPatch, key: str = API_KEY) -> chargebee.Chargebee:
    """Chargebee's client, its site's address pointed at the stand-in (it builds
    ``https://{site}.chargebee.com/api/v2`` and forces HTTPS while it verifies certificates)."""
    monkeypatch.setattr(chargebee.Chargebee, "verify_ca_certs", False)
    client = chargebee.Chargebee(api_key=key, site="hookledger-test", protocol="http")
    client.env.api_endpoint = f"{url}/api/v2"
    return client


def source(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "chargebee",
        "kind": "chargebee",
        "base_url": url,
        "signing_secret_env": "T_CB_AUTH",
        "api_key_env": "T_CB_KEY",
        **extra,
    }


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox, mounted, alone = box
    client = sdk(alone.url, monkeypatch)
    since = int((NOW - timedelta(days=2)).timestamp())
    sdk_ids: list[str] = []
    offset = None
    while True:  # the library reads one page a call; its caller follows next_offset
        params: dict[str, Any] = {
            "limit": 8,
            "occurred_at": {"after": since},
            "sort_by": {"asc": "occurred_at"},
        }
        if offset:
            params["offset"] = offset
        page = client.Event.list(params)
        sdk_ids += [entry.event.id for entry in page.list]
        offset = page.next_offset
        if not offset:
            break

    monkeypatch.setenv("T_CB_KEY", API_KEY)
    monkeypatch.setenv("T_CB_AUTH", "hookledger:s3cret")
    # the site's address as a user writes it, /api/v2 included: the connector reads the same API
    entry = source(f"{mounted.url}/chargebee/api/v2", page_size=8)
    connector = build_connector(parse_settings({"sources": [entry]}, "<test>").sources[0])
    assert isinstance(connector, ChargebeeEvents)
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
    assert times == sorted(times)  # oldest first: sort_by[asc]=occurred_at
    assert set(ours) == {s.event_id for s in sandbox.world.listed["chargebee"]}


def test_the_sdk_reads_one_event_and_the_stand_ins_refusals(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, _, alone = box
    client = sdk(alone.url, monkeypatch)
    sent = sandbox.world.listed["chargebee"][0]
    event = client.Event.retrieve(sent.event_id).event
    assert (event.id, event.event_type) == (sent.event_id, sent.item["event"]["event_type"])
    # Chargebee's error shape, read by its own library as Chargebee's errors
    with pytest.raises(chargebee.InvalidRequestError) as refused:
        client.Event.list({"limit": 101})  # 1 to 100
    assert refused.value.api_error_code == "param_wrong_value" and refused.value.param == "limit"
    with pytest.raises(chargebee.InvalidRequestError):
        client.Event.list({"offset": '["1700000000000","1"]'})  # an offset it never gave
    with pytest.raises(chargebee.APIError) as wrong:
        sdk(alone.url, monkeypatch, key="test_wrong").Event.list()
    assert wrong.value.http_status_code == 401
    assert wrong.value.api_error_code == "api_authentication_failed"


def test_filters_keep_to_their_operators(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    sandbox, mounted, _ = box
    url = f"{mounted.url}/chargebee/api/v2/events"
    auth = {"Authorization": basic(API_KEY)}
    history = [s.item["event"] for s in sandbox.world.listed["chargebee"]]
    with httpx.Client(headers=auth) as http:
        newest = http.get(url, params={"limit": 3, "sort_by[desc]": "occurred_at"}).json()
        assert [e["event"]["id"] for e in newest["list"]] == [e["id"] for e in history[::-1][:3]]
        wanted = history[2]["occurred_at"]
        after = http.get(url, params={"limit": 100, "occurred_at[after]": wanted}).json()
        assert all(e["event"]["occurred_at"] > wanted for e in after["list"])
        assert "next_offset" not in after  # only while more follow
        kinds = http.get(url, params={"limit": 100, "event_type[in]": "[subscription_created]"})
        assert {e["event"]["event_type"] for e in kinds.json()["list"]} == {"subscription_created"}
        for bad in ({"sort_by[asc]": "id"}, {"no_such": "1"}, {"occurred_at[after]": "yesterday"}):
            refused = http.get(url, params=bad)
            assert refused.status_code == 400 and refused.json()["type"] == "invalid_request"


def test_a_reconciled_source_names_its_site() -> None:
    with pytest.raises(ConfigError, match="key 'base_url' is needed with api_key_env"):
        parse_settings({"sources": [{**source("x"), "base_url": None}]}, "<test>")
    receive_only = {k: v for k, v in source("x").items() if k not in ("api_key_env", "base_url")}
    assert parse_settings({"sources": [receive_only]}, "<test>").sources[0].kind == "chargebee"


_JSON = JSON_VALUES
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "id": _JSON | st.just("ev_123"),
        "occurred_at": _JSON | st.integers(min_value=-(10**20), max_value=10**20),
        "event_type": _JSON | st.sampled_from(["subscription_created", "payment_succeeded"]),
        "content": _JSON
        | st.dictionaries(st.sampled_from(["subscription", "transaction", "x"]), _JSON, max_size=3),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(st.fixed_dictionaries({"event": _EVENT | _JSON}) | _JSON, max_size=4))
@example(items=[{"event": {"id": "ev_1", "occurred_at": 10**30, "content": {"subscription": {}}}}])
def test_any_listed_item_is_a_record_or_a_one_line_refusal_naming_the_url(items: list[Any]) -> None:
    body = json.dumps({"list": items}).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    client = ProviderClient(
        "cb", "https://acme.chargebee.test", transport=httpx.MockTransport(answer)
    )
    connector = ChargebeeEvents("cb", client)
    try:
        pages = list(connector.pages(None, ScanOptions(now=NOW)))
    except (MalformedResponseError, PagingError) as exc:
        message = str(exc)
        assert "\n" not in message and "https://acme.chargebee.test/api/v2/events" in message
    else:
        records = [r for p in pages for r in p.records]
        assert [r.event_id for r in records] == [str(i["event"]["id"]) for i in items]
    finally:
        connector.close()
