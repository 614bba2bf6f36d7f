"""Mollie's payments list: mollie-api-python (Mollie's own library) pages the sandbox's stand-in and
reads the same payments, in the same order, as hookledger's connector; Mollie's paging as documented
(``from`` starts the page, ``limit`` 1 to 250); a payment still open when listed is read back by id
once it settles; and any listed item is a record or one line naming the URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mollie.api.client import Client

from connectors.base import Page, Record, ScanOptions
from connectors.errors import MalformedResponseError
from connectors.http import ProviderClient, RetryPolicy
from connectors.providers.mollie.api import MolliePayments
from connectors.providers.mollie.standin import API_KEY
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"mollie": 37}
    )
    sandbox = Sandbox(world, stand_ins=["mollie"])
    mounted = start_server(sandbox.app)
    yield sandbox, mounted
    mounted.stop()


def connector(url: str, monkeypatch: pytest.MonkeyPatch, page_size: int = 8) -> MolliePayments:
    monkeypatch.setenv("T_MOLLIE_KEY", API_KEY)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "mollie",
                    "kind": "mollie",
                    "base_url": f"{url}/mollie",
                    "api_key_env": "T_MOLLIE_KEY",
                    "page_size": page_size,
                }
            ]
        },
        "<test>",
    ).sources[0]
    built = build_connector(source)
    assert isinstance(built, MolliePayments)
    return built


def scan(c: MolliePayments, cursor: Any = None) -> list[Page]:
    try:
        return list(c.pages(cursor, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
    finally:
        c.close()


def test_the_sdk_and_the_connector_read_the_same_payments_in_the_same_order(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mounted = box
    client = Client()
    client.set_api_endpoint(f"{mounted.url}/mollie")  # the SDK adds /v2/payments
    client.set_api_key(API_KEY)
    page = client.payments.list(limit=8)
    sdk_ids = [payment.id for payment in page]
    while page.has_next():  # the SDK follows _links.next.href
        page = page.get_next()
        sdk_ids += [payment.id for payment in page]

    pages = scan(connector(mounted.url, monkeypatch))
    ours = [r.object_id for p in pages for r in p.records]
    assert ours == sdk_ids
    assert len(ours) == 37 and len(pages) == 5
    created = [r.payload["createdAt"] for p in pages for r in p.records]
    assert created == sorted(created, reverse=True)  # newest first, Mollie's default sort


def test_from_starts_the_page_and_limit_is_kept_within_1_to_250(
    box: tuple[Sandbox, RunningServer],
) -> None:
    _, mounted = box
    url = f"{mounted.url}/mollie/v2/payments"
    with httpx.Client(headers=AUTH) as http:
        first = http.get(url, params={"limit": 5}).json()
        href = first["_links"]["next"]["href"]
        second = http.get(href).json()
        assert first["count"] == 5 and first["_links"]["previous"] is None
        # the next page starts with the payment its link names: ``from`` is inclusive
        assert second["_embedded"]["payments"][0]["id"] in href
        assert http.get(url, params={"limit": 250}).json()["count"] == 37
        for refused in ({"limit": 251}, {"limit": 0}, {"from": "tr_neverGiven1"}):
            answer = http.get(url, params=refused)
            assert answer.status_code == 400
            assert answer.headers["content-type"].startswith("application/hal+json")
            assert answer.json()["field"] == next(iter(refused))
        oldest = http.get(url, params={"sort": "asc", "limit": 1}).json()
        newest = http.get(url, params={"limit": 1}).json()
        assert (
            oldest["_embedded"]["payments"][0]["createdAt"]
            < (newest["_embedded"]["payments"][0]["createdAt"])
        )
    denied = httpx.get(url, headers={"Authorization": "Bearer test_wrongwrongwrongwrongwrong"})
    assert denied.status_code == 401 and denied.json()["title"] == "Unauthorized Request"


def test_a_payment_open_when_listed_is_read_back_by_id_once_it_settles(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mollie calls no webhook for ``open``: the payment is watched, and its ``paid`` webhook is
    judged on a later run although the payment is older than that run's window."""
    sandbox, mounted = box
    history = sandbox.world.listed["mollie"]
    pending = next(s.item for s in reversed(history[:-1]) if s.item["status"] == "paid")
    paid = {k: pending.pop(k) for k in ("status", "paidAt", "amountRefunded", "amountRemaining")}
    pending["status"] = "open"
    pages = scan(connector(mounted.url, monkeypatch))
    assert pending["id"] not in {r.object_id for p in pages for r in p.records}
    assert pages[-1].cursor["watch"] == [pending["id"]]

    pending.update(paid)
    later = scan(connector(mounted.url, monkeypatch), pages[-1].cursor)
    ids = [r.event_id for p in later for r in p.records]
    assert f"{pending['id']}:paid" in ids  # read back by id: the list window starts after it
    assert later[-1].done and later[-1].cursor["watch"] == []


# hostile list items -------------------------------------------------------------------------------

JSON = JSON_VALUES
TIMES = st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()) | JSON
ITEMS = (
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.sampled_from(["tr_7UhSN1zuXS", "tr_", "ord_kEn1PlbGa", "tr_é"]) | JSON,
            "status": st.sampled_from(["paid", "open", "refunded", ""]) | JSON,
            "createdAt": TIMES,
            "paidAt": TIMES,
            "webhookUrl": JSON,
            "amountRefunded": st.fixed_dictionaries({"value": st.text(max_size=8)}) | JSON,
            "amountChargedBack": st.fixed_dictionaries({"value": st.text(max_size=8)}) | JSON,
        },
    )
    | JSON
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(ITEMS, max_size=4))
def test_any_listed_item_is_a_record_or_one_line_naming_the_url(items: list[Any]) -> None:
    body = {"count": len(items), "_embedded": {"payments": items}, "_links": {"next": None}}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v2/payments":
            return httpx.Response(404, json={"status": 404, "title": "Not Found"})
        return httpx.Response(200, content=json.dumps(body).encode())

    client = ProviderClient(
        "m",
        "https://api.mollie.com",
        transport=httpx.MockTransport(answer),
        policy=RetryPolicy(max_attempts=1, base_delay=0, max_total_wait=0),
        sleep=lambda s: None,
    )
    options = ScanOptions(now=datetime(2030, 1, 1, tzinfo=UTC), initial_lookback=timedelta(days=1))
    try:
        pages = list(MolliePayments("m", client).pages(None, options))
    except MalformedResponseError as exc:
        assert "\n" not in str(exc) and "https://api.mollie.com/v2/payments" in str(exc)
    else:
        assert all(isinstance(r, Record) for p in pages for r in p.records)
        json.dumps(pages[-1].cursor)  # a cursor the store can keep
