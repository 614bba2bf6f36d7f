"""Mailgun's events API: the official SDK (``mailgun``) pages the sandbox's stand-in and reads the
same events, in the same order, as hookledger's connector; Mailgun's documented paging (the page
token in the next URL's path, the empty page after the last, ``limit`` at most 300) is kept; a
page of any shape is read or refused in one line; and the generated reconciliation scenario runs
for Mailgun with each delivery signed afresh in its body (Mailgun signs there, not in a header)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mailgun.client import Client
from mailgun.endpoints import Endpoint
from mailgun.security import SecurityGuard

from connectors.base import ScanOptions
from connectors.errors import MalformedResponseError, NotFoundError
from connectors.http import ProviderClient
from connectors.providers.mailgun import signed_again
from connectors.providers.mailgun.api import MailgunEvents
from connectors.providers.mailgun.standin import API_KEY, DOMAIN
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
AUTH = ("api", API_KEY)


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer, RunningServer]]:
    world = build_world(
        4, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"mailgun": 37}
    )
    sandbox = Sandbox(world, stand_ins=["mailgun"])
    mounted = start_server(sandbox.app)
    alone = start_server(sandbox.stand_ins["mailgun"].app())  # the SDK joins /v3/… to its host
    yield sandbox, mounted, alone
    alone.stop()
    mounted.stop()


def connector(url: str, monkeypatch: pytest.MonkeyPatch) -> MailgunEvents:
    monkeypatch.setenv("T_MAILGUN_KEY", API_KEY)
    source = parse_settings(
        {
            "sources": [
                {
                    "name": "mailgun",
                    "kind": "mailgun",
                    "base_url": f"{url}/mailgun",
                    "signing_secret_env": "T_MAILGUN_KEY",
                    "api_key_env": "T_MAILGUN_KEY",
                    "domain": DOMAIN,
                    "page_size": 8,
                }
            ]
        },
        "<test>",
    ).sources[0]
    built = build_connector(source)
    assert isinstance(built, MailgunEvents)
    return built


def sdk_pages(client: Client, filters: dict[str, Any]) -> list[list[str]]:
    """The SDK reads the first page with ``events.get``, then each ``paging.next`` through its own
    endpoint with the page token as the path's last segment, to the empty page."""
    answer = client.events.get(domain=DOMAIN, filters=filters)
    url, headers = client.config["events"]
    pages: list[list[str]] = []
    while True:
        answer.raise_for_status()
        body = answer.json()
        if not body["items"]:
            return pages
        pages.append([event["id"] for event in body["items"]])
        token = body["paging"]["next"].rsplit("/", 1)[1]
        page = Endpoint(
            url={**url, "keys": [*url["keys"], token]},
            headers=headers,
            auth=client.auth,
            session=client._session,
        )
        answer = page.get(domain=DOMAIN)


def test_the_sdk_and_the_connector_read_the_same_events_in_the_same_order(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mounted, alone = box
    since = NOW - timedelta(days=2)
    with Client(auth=AUTH, api_url=alone.url) as client:
        begin = str(int(since.timestamp()))
        sdk = sdk_pages(client, {"begin": begin, "ascending": "yes", "limit": 8})
    c = connector(mounted.url, monkeypatch)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
    finally:
        c.close()
    ours = [r.event_id for p in pages for r in p.records]
    assert ours == [i for page in sdk for i in page]
    assert len(ours) == 37 and len(sdk) == 5
    assert len(pages) == 6 and pages[-1].records == ()  # read to Mailgun's empty page
    times = [r.occurred_at for p in pages for r in p.records if r.occurred_at]
    assert times == sorted(times)  # ascending, as asked


def test_the_sdks_stream_does_not_follow_a_token_in_the_path(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    """mailgun 1.10.0's ``stream()`` takes only the next URL's query: Mailgun's token is in its
    path, so it asks the first page again and stops on seeing the same next URL."""
    _, _, alone = box
    begin = str(int((NOW - timedelta(days=2)).timestamp()))
    with Client(auth=AUTH, api_url=alone.url) as client:
        streamed = [
            e["id"]
            for e in client.events.stream(
                domain=DOMAIN, filters={"begin": begin, "ascending": "yes", "limit": 8}
            )
        ]
    assert len(streamed) == 16 and len(set(streamed)) == 8


def test_mailguns_documented_paging_is_kept(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    _, mounted, _ = box
    url = f"{mounted.url}/mailgun/v3/{DOMAIN}/events"
    begin = str(int((NOW - timedelta(days=2)).timestamp()))
    with httpx.Client(auth=AUTH) as http:
        too_many = http.get(url, params={"begin": begin, "ascending": "yes", "limit": 301})
        assert too_many.status_code == 400 and "300" in too_many.json()["message"]
        no_direction = http.get(url, params={"begin": begin})
        assert no_direction.status_code == 400  # a begin needs an end or a direction
        page = http.get(url, params={"begin": begin, "ascending": "yes", "limit": 300}).json()
        assert len(page["items"]) == 37 and set(page["paging"]) >= {"next", "previous"}
        after_last = http.get(page["paging"]["next"])  # the last page's next: an empty page
        assert after_last.status_code == 200 and after_last.json()["items"] == []
        before_first = http.get(page["paging"]["previous"])
        assert before_first.json()["items"] == []
        forged = http.get(f"{url}/W3sibm90IjogImdpdmVuIn1d")
        assert forged.status_code == 400
        assert http.get(f"{mounted.url}/mailgun/v3/other.example.com/events").status_code == 404
    wrong = httpx.get(url, params={"begin": begin, "ascending": "yes"}, auth=("api", "wrong"))
    assert wrong.status_code == 401 and wrong.text == "Forbidden"


ITEM = JSON_VALUES
SHAPED = st.fixed_dictionaries(
    {"id": ITEM, "event": ITEM, "timestamp": ITEM, "message": ITEM},
    optional={"extra": ITEM},
)


def no_wait(seconds: float) -> None:
    return None


LISTED = {"id": "OMTXD3-sSmKIQa1gSKkYVA", "event": "delivered", "timestamp": 1529704976.1}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(items=[LISTED], paging={"next": "http://["})  # a next URL that does not parse
@example(items=[LISTED], paging={"next": "https://elsewhere.test/v3/x/events/W3"})  # another host
@example(items=[{**LISTED, "timestamp": 1e300}], paging=None)  # a time beyond any date
@given(
    items=st.lists(ITEM | SHAPED, max_size=4),
    paging=st.none() | ITEM | st.fixed_dictionaries({"next": ITEM}),
)
def test_any_page_is_read_or_refused_in_one_line(items: list[Any], paging: Any) -> None:
    answers = iter([{"items": items, "paging": paging}])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=next(answers, {"items": [], "paging": {}}))

    client = ProviderClient(
        "mg", "https://api.mailgun.test", transport=httpx.MockTransport(answer), sleep=no_wait
    )
    c = MailgunEvents("mg", client, DOMAIN)
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(hours=1))))
    except MalformedResponseError as exc:
        assert "\n" not in str(exc) and "api.mailgun.test" in str(exc)
    else:
        assert all(r.event_id for p in pages for r in p.records)
    finally:
        c.close()


def test_the_sdk_verifies_a_delivery_as_hookledger_signs_it(
    box: tuple[Sandbox, RunningServer, RunningServer],
) -> None:
    sandbox, _, _ = box
    sent = sandbox.world.listed["mailgun"][0]
    body = json.loads(signed_again(sent.body, "a-webhook-signing-key", time.time()))
    block = body["signature"]
    assert SecurityGuard.verify_webhook(
        "a-webhook-signing-key", block["token"], block["timestamp"], block["signature"]
    )
    assert body["event-data"] == sent.item  # the list's event is the webhook's event-data


def test_a_messages_current_state_is_its_newest_event(
    box: tuple[Sandbox, RunningServer, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, mounted, _ = box
    history = sandbox.world.listed["mailgun"]
    message = history[0].object_id
    assert message is not None
    newest = [s for s in history if s.object_id == message][-1]
    c = connector(mounted.url, monkeypatch)
    try:
        assert c.fetch_object("message", message) == newest.item
        with pytest.raises(NotFoundError):
            c.fetch_object("message", "20990101000000.0000000000000000@mg.example.com")
    finally:
        c.close()
