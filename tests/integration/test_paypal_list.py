"""PayPal's webhook events: paypalrestsdk (PayPal's own Python SDK, deprecated, the only one with a
webhook-events list call) pages the sandbox's stand-in and reads the same events, in the same
order, as hookledger's connector; paypal-server-sdk (PayPal's current SDK, which has no webhook
calls at all) gets its token there and reads a capture as the connector does. The stand-in keeps
PayPal's paging (a next link only as given, on the list's own host) and verifies only what it
signed; and any listed item, of any shape, is a record or a one-line refusal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import paypalrestsdk
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from paypalrestsdk.notifications import WebhookEvent
from paypalrestsdk.resource import Resource
from paypalserversdk.configuration import Environment
from paypalserversdk.http.auth.o_auth_2 import ClientCredentialsAuthCredentials
from paypalserversdk.paypal_serversdk_client import PaypalServersdkClient

from connectors.base import ScanOptions
from connectors.errors import MalformedResponseError
from connectors.http import ProviderClient
from connectors.paging import PagingError
from connectors.providers.paypal.api import PayPalConnector, iso
from connectors.providers.paypal.standin import CLIENT_ID, CLIENT_SECRET, WEBHOOK_ID
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from connectors.webhooks import SignatureError
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
SINCE = NOW - timedelta(days=2)
HEADERS = ("auth_algo", "cert_url", "transmission_id", "transmission_sig", "transmission_time")


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"paypal": 37}
    )
    sandbox = Sandbox(world, stand_ins=["paypal"])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def connector(url: str, monkeypatch: pytest.MonkeyPatch) -> PayPalConnector:
    monkeypatch.setenv("T_PP_ID", CLIENT_ID)
    monkeypatch.setenv("T_PP_SECRET", CLIENT_SECRET)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "paypal",
                    "kind": "paypal",
                    "base_url": f"{url}/paypal",
                    "webhook_id": WEBHOOK_ID,
                    "client_id_env": "T_PP_ID",
                    "client_secret_env": "T_PP_SECRET",
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    built = build_connector(source)
    assert isinstance(built, PayPalConnector)
    return built


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = box
    endpoint = f"{server.url}/paypal"
    api = paypalrestsdk.Api(
        {"mode": "sandbox", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
        endpoint=endpoint,
    )
    window = {"page_size": 8, "start_time": iso(SINCE), "end_time": iso(datetime.now(UTC))}
    page = WebhookEvent.all(window, api=api)  # GET /v1/notifications/webhooks-events/?…
    sdk_ids = [e.id for e in page.events]
    while following := [link.href for link in page.links if link.rel == "next"]:
        # the SDK has no pager: its Api joins the link's path and query to its endpoint
        page = Resource(api.get(following[0][len(endpoint) :]), api=api)
        sdk_ids += [e.id for e in page.events]

    c = connector(server.url, monkeypatch)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
        one = c.fetch_event(sdk_ids[3])
    finally:
        c.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == sdk_ids
    assert len(ours) == 37 and len(pages) == 5
    times = [r.occurred_at for p in pages for r in p.records]
    assert times == sorted(times, reverse=True)  # newest first, as the stand-in lists
    # WebhookEvent.find would ask for ".../webhooks-events/<id>/<id>": its util.join_url doubles a
    # path after a trailing slash on Python 3.7+ (re.sub's empty matches), so the event is read
    # with the SDK's Api, as find means to
    theirs = api.get(f"/v1/notifications/webhooks-events/{sdk_ids[3]}")
    assert (one.event_id, one.event_type) == (theirs["id"], theirs["event_type"])


def test_the_current_sdk_gets_its_token_and_reads_a_capture_as_the_connector_does(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    monkeypatch.setitem(
        PaypalServersdkClient.__init__.__globals__["Configuration"].environments,
        Environment.SANDBOX,
        {
            k: f"{server.url}/paypal"
            for k in PaypalServersdkClient.__init__.__globals__["Configuration"].environments[
                Environment.SANDBOX
            ]
        },
    )
    client = PaypalServersdkClient(
        client_credentials_auth_credentials=ClientCredentialsAuthCredentials(
            o_auth_client_id=CLIENT_ID, o_auth_client_secret=CLIENT_SECRET
        ),
        environment=Environment.SANDBOX,
    )
    capture = next(
        s for s in reversed(sandbox.world.listed["paypal"]) if s.object_type == "capture"
    )
    theirs = client.payments.get_captured_payment({"capture_id": capture.object_id})
    assert theirs.status_code == 200, theirs.text

    c = connector(server.url, monkeypatch)
    try:
        ours = c.fetch_object("capture", str(capture.object_id))
    finally:
        c.close()
    assert ours["status"] == theirs.body.status == capture.status
    assert ours["id"] == theirs.body.id


def test_the_stand_in_verifies_only_what_it_signed_and_pages_only_as_it_links(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    sent = sandbox.world.listed["paypal"][0]
    transmission = {h: sent.headers[f"paypal-{h.replace('_', '-')}"] for h in HEADERS}
    c = connector(server.url, monkeypatch)
    try:
        c.verify_signature(transmission, json.loads(sent.body))  # SUCCESS: returns
        changed = {**json.loads(sent.body), "summary": "changed"}
        with pytest.raises(SignatureError, match="FAILURE"):
            c.verify_signature(transmission, changed)
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
        c._authorise()
        token = c.client._client.headers["authorization"]
    finally:
        c.close()
    following = pages[0].cursor["next"]["url"]
    assert "move_to=next" in following and "index_id=8" in following
    with httpx.Client(headers={"Authorization": token}) as http:
        assert http.get(following).status_code == 200
        forged = following.replace("index_id=8", "index_id=9")
        refused = http.get(forged)
        assert refused.status_code == 400 and refused.json()["name"] == "INVALID_REQUEST"
        other = http.get(following + "&event_type=PAYMENT.CAPTURE.COMPLETED")
        assert other.status_code == 400  # a next link is valid only with its own query
        too_many = http.get(f"{server.url}/paypal/v1/notifications/webhooks-events?page_size=301")
        assert too_many.status_code == 400


def paged(answers: list[dict[str, Any]]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/oauth2/token":
            return httpx.Response(200, json={"access_token": "A21AAtoken", "expires_in": 32400})
        return httpx.Response(200, json=answers.pop(0))

    return httpx.MockTransport(answer)


def test_a_next_link_elsewhere_is_refused_and_its_escaped_ampersands_are_read() -> None:
    base = "https://pp.test/v1/notifications/webhooks-events"
    event = {"id": "WH-1", "create_time": "2026-12-01T10:00:00.000Z", "event_type": "X.Y"}
    escaped = f"{base}/?page_size=1&amp;move_to=next&amp;index_time=t&amp;index_id=1"
    answers = [
        {"events": [event], "links": [{"href": escaped, "rel": "next", "method": "GET"}]},
        {"events": [{**event, "id": "WH-2"}], "links": []},
    ]
    transport = paged(answers)
    client = ProviderClient("pp", "https://pp.test", transport=transport)
    c = PayPalConnector(
        "pp", client, client_id="a", client_secret="b", webhook_id="W", base_url="https://pp.test"
    )
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW)))
        assert [r.event_id for p in pages for r in p.records] == ["WH-1", "WH-2"]
        assert "&amp;" not in str(pages[0].cursor["next"]["url"])
        elsewhere = {
            "href": "https://evil.test/v1/notifications/webhooks-events?x=1",
            "rel": "next",
        }
        answers += [{"events": [event], "links": [elsewhere]}]
        with pytest.raises(MalformedResponseError, match="links its next page elsewhere"):
            list(c.pages(None, ScanOptions(now=NOW)))
    finally:
        c.close()


_JSON = JSON_VALUES
_EVENTISH = st.fixed_dictionaries(
    {},
    optional={
        "id": _JSON | st.just("WH-2CL46544TB770421K-5VB92446WP7345818"),
        "create_time": _JSON | st.just("2026-12-01T10:00:00.000Z"),
        "event_type": _JSON | st.just("PAYMENT.CAPTURE.COMPLETED"),
        "resource_type": _JSON | st.just("capture"),
        "resource": _JSON | st.fixed_dictionaries({"id": _JSON, "update_time": _JSON}),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_EVENTISH | _JSON, max_size=4), links=_JSON)
@example(items=[{"id": "WH-1", "resource": {"id": [], "update_time": {}}}], links=None)
@example(items=[], links=[{"rel": "next", "href": "/v1/notifications/webhooks-events?a=1"}])
def test_any_listed_item_is_a_record_or_a_one_line_refusal_naming_the_url(
    items: list[Any], links: Any
) -> None:
    body = {"events": items, "count": len(items), "links": links}
    client = ProviderClient("pp", "https://pp.test", transport=paged([body] * 3))
    c = PayPalConnector(
        "pp", client, client_id="a", client_secret="b", webhook_id="W", base_url="https://pp.test"
    )
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW)))
    except (MalformedResponseError, PagingError) as exc:  # paging: the same page again
        message = str(exc)
        assert "\n" not in message and "https://pp.test/v1/notifications/webhooks-events" in message
    else:
        records = [r for p in pages for r in p.records]
        assert [r.event_id for r in records] == [str(i["id"]) for i in items]
    finally:
        c.close()
