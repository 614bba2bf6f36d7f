"""Recurly's V3 lists: the ``recurly`` library (Recurly's own) pages the sandbox's stand-in and reads
the same subscriptions, in the same order, as hookledger's connector; Recurly's paging as its API
documents it (``sort=updated_at&order=asc``, ``begin_time`` inclusive, ``next`` a path that keeps
the query, ``limit`` 1-200, ``ids`` alone, the ``Accept`` version); each listed object is judged by
object (Recurly's webhooks carry no event id); and any listed item is a record or one line naming
the URL."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import recurly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.base import Page, Record, ScanOptions
from connectors.errors import AuthError, MalformedResponseError
from connectors.http import ProviderClient, RetryPolicy
from connectors.providers.recurly.api import ACCEPT, RecurlyObjects, recurly_time
from connectors.providers.recurly.standin import API_KEY, RecurlyStandIn
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
SINCE = NOW - timedelta(days=2)
AUTH = httpx.BasicAuth(API_KEY, "")


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"recurly": 60}
    )
    sandbox = Sandbox(world, stand_ins=["recurly"])
    mounted = start_server(sandbox.app)
    alone = start_server(sandbox.stand_ins["recurly"].app())  # the SDK asks /subscriptions
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def connector(url: str, monkeypatch: pytest.MonkeyPatch, **keys: Any) -> RecurlyObjects:
    monkeypatch.setenv("T_RECURLY_KEY", API_KEY)
    monkeypatch.setenv("T_RECURLY_SIGNING", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    entry = {
        "name": "recurly",
        "kind": "recurly",
        "base_url": f"{url}/recurly",
        "signing_secret_env": "T_RECURLY_SIGNING",
        "api_key_env": "T_RECURLY_KEY",
        **keys,
    }
    built = build_connector(parse_settings({"sources": [entry]}, "<test>").sources[0])
    assert isinstance(built, RecurlyObjects)
    return built


def scan(c: RecurlyObjects, cursor: Any = None) -> list[Page]:
    try:
        return list(c.pages(cursor, ScanOptions(now=NOW, initial_lookback=NOW - SINCE)))
    finally:
        c.close()


def test_the_sdk_and_the_connector_read_the_same_subscriptions_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, mounted, alone = box
    client = recurly.Client(API_KEY)
    host = urlsplit(alone.url)
    # the library speaks HTTPS to v3.recurly.com: the same requests, to the stand-in
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=10)
    client._BaseClient__conn = conn  # type: ignore[attr-defined]
    params = {"limit": 5, "order": "asc", "sort": "updated_at", "begin_time": SINCE}
    try:
        sdk_ids = [s.id for s in client.list_subscriptions(params=params).items()]
    finally:
        conn.close()

    pages = scan(connector(mounted.url, monkeypatch, lists=["subscriptions"], page_size=5))
    ours = [r.object_id for p in pages for r in p.records]
    assert ours == sdk_ids
    listed = [s for s in sandbox.world.listed["recurly"] if s.object_type == "subscription"]
    assert sorted(ours) == sorted(s.object_id for s in listed) and len(ours) > 10
    assert len(pages) == -(-len(ours) // 5)
    updated = [r.payload["updated_at"] for p in pages for r in p.records]
    assert updated == sorted(updated)  # sort=updated_at&order=asc, as Recurly advises
    # judged by object: Recurly's webhooks carry no event id
    assert all(
        r.event_id is None and r.object_type == "subscription" for p in pages for r in p.records
    )


def test_recurlys_paging_as_documented(box: tuple[Sandbox, RunningServer, RunningServer]) -> None:
    _, mounted, _ = box
    url = f"{mounted.url}/recurly/accounts"
    headers = {"Accept": ACCEPT}
    with httpx.Client(auth=AUTH, headers=headers) as http_:
        query = {
            "limit": 3,
            "order": "asc",
            "sort": "updated_at",
            "begin_time": recurly_time(SINCE),
        }
        first = http_.get(url, params=query).json()
        assert first["object"] == "list" and first["has_more"] is True
        following = first["next"]
        assert following.startswith("/accounts?cursor=")  # a path from the API's root ...
        for key in ("order", "sort", "begin_time"):  # ... that keeps the query
            assert f"{key}=" in following
        second = http_.get(f"{mounted.url}/recurly{following}").json()
        assert second["data"][0]["updated_at"] >= first["data"][-1]["updated_at"]
        # begin_time is inclusive
        at = first["data"][1]["updated_at"]
        same = http_.get(url, params={**query, "begin_time": at, "limit": 200}).json()
        assert same["data"][0]["updated_at"] == at
        for refused, param in (
            ({"limit": 201}, "limit"),
            ({"limit": 0}, "limit"),
            ({"cursor": "neverGiven:1.0"}, "cursor"),
            ({"ids": first["data"][0]["id"], "limit": 5}, "ids"),
            ({"order": "sideways"}, "order"),
        ):
            answer = http_.get(url, params=refused)
            assert answer.status_code == 400, refused
            error = answer.json()["error"]
            assert error["type"] == "bad_request" and error["params"][0]["param"] == param
        one = http_.get(url, params={"ids": first["data"][0]["id"]}).json()
        assert [a["id"] for a in one["data"]] == [first["data"][0]["id"]]
    unversioned = httpx.get(url, auth=AUTH)
    assert unversioned.status_code == 406
    assert unversioned.json()["error"]["type"] == "invalid_api_version"
    denied = httpx.get(url, auth=httpx.BasicAuth("wrong", ""), headers=headers)
    assert denied.status_code == 401 and denied.json()["error"]["type"] == "unauthorized"
    assert int(denied.headers["X-RateLimit-Limit"]) == 2000


def test_a_rescan_judges_only_what_changed_and_says_it_saw_the_rest(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``begin_time`` is inclusive: the objects at the last scan's newest time are listed again,
    seen (``relisted``) but not judged again."""
    _, mounted, _ = box
    pages = scan(connector(mounted.url, monkeypatch, page_size=20))
    again = scan(connector(mounted.url, monkeypatch, page_size=20), pages[-1].cursor)
    assert not [r for p in again for r in p.records]
    assert len([r for p in again for r in p.relisted]) == 3  # the newest of each list


def test_a_wrong_key_is_named(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mounted, _ = box
    c = connector(mounted.url, monkeypatch)
    monkeypatch.setenv("T_RECURLY_WRONG", "wrong")
    wrong = connector(mounted.url, monkeypatch, api_key_env="T_RECURLY_WRONG")
    try:
        assert "accounts, subscriptions, invoices" in c.check_access().detail
        with pytest.raises(AuthError, match="T_RECURLY_WRONG"):
            wrong.check_access()
    finally:
        c.close()
        wrong.close()


def test_the_lists_key_is_checked() -> None:
    from connectors.providers.recurly.api import rule

    assert rule({"lists": ("accounts", "invoices")}) is None
    assert "'plans'" in str(rule({"lists": ("plans",)}))
    assert RecurlyStandIn.by_object


# hostile list items ------------------------------------------------------------------------------

JSON = JSON_VALUES
TIMES = st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()) | JSON
ITEMS = (
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.sampled_from(["ra8foq26o2dt", ""]) | JSON,
            "object": st.sampled_from(["subscription", "invoice"]) | JSON,
            "type": st.sampled_from(["charge", "credit", "legacy"]) | JSON,
            "updated_at": TIMES,
            "state": JSON,
        },
    )
    | JSON
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(ITEMS, max_size=4))
def test_any_listed_item_is_a_record_or_one_line_naming_the_url(items: list[Any]) -> None:
    body = {"object": "list", "has_more": False, "next": None, "data": items}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(body).encode())

    client = ProviderClient(
        "r",
        "https://v3.recurly.com",
        transport=httpx.MockTransport(answer),
        policy=RetryPolicy(max_attempts=1, base_delay=0, max_total_wait=0),
        sleep=lambda s: None,
    )
    options = ScanOptions(now=datetime(2030, 1, 1, tzinfo=UTC), initial_lookback=timedelta(days=1))
    try:
        pages = list(RecurlyObjects("r", client, lists=("invoices",)).pages(None, options))
    except MalformedResponseError as exc:
        assert "\n" not in str(exc) and "https://v3.recurly.com/invoices" in str(exc)
    else:
        assert all(isinstance(r, Record) for p in pages for r in p.records)
        json.dumps(pages[-1].cursor)  # a cursor the store can keep
