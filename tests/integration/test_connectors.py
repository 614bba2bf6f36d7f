"""Every connector against the sandbox provider over loopback HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import stripe as stripe_sdk
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connectors.base import BEYOND_RETENTION, Page, Record, ScanOptions
from connectors.errors import (
    AuthError,
    ConfigError,
    MalformedResponseError,
    NotFoundError,
    UnavailableError,
    UnsupportedError,
)
from connectors.http import RetryPolicy
from connectors.paging import PageShape, PagingError, page_fault
from connectors.providers.github import delivery_record
from connectors.providers.shopify import resource_record
from connectors.providers.shopify.graphql import ORDER_QUERY, ORDERS_QUERY
from connectors.providers.stripe.records import event_record
from connectors.sandbox.app import Faults, Keys, Sandbox
from connectors.sandbox.world import SHOPIFY_ORDER_BASE_ID, GitHubAttempt, World, build_world
from reconciler.config import SourceSettings, parse_settings
from reconciler.sources import build_connector
from tests.conftest import FIXTURES, RunningServer, start_server
from tests.faulty_http import Misbehaving

NOW = datetime.now(UTC).replace(microsecond=0)
ENV = {"SBX_STRIPE": "sk_test_sandbox", "SBX_GITHUB": "ghp_sandbox", "SBX_SHOPIFY": "shpat_sandbox"}


@pytest.fixture
def sandbox() -> Iterator[tuple[Sandbox, RunningServer]]:
    box = Sandbox(build_world(seed=11, now=NOW, old_stripe_events=25))
    server = start_server(box.app)
    yield box, server
    server.stop()


def source(url: str, kind: str, **extra: Any) -> SourceSettings:
    keys = {"stripe": "SBX_STRIPE", "github": "SBX_GITHUB", "shopify": "SBX_SHOPIFY"}
    entry = {
        "name": f"sbx-{kind}",
        "kind": kind,
        "base_url": url,
        "api_key_env": keys.get(kind, "SBX_STRIPE"),
        **extra,
    }
    return parse_settings({"sources": [entry]}, "<test>").sources[0]


_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_connectors() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def build(src: SourceSettings, **kwargs: Any) -> Any:
    connector = build_connector(src, **kwargs)
    _OPEN.append(connector)
    return connector


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def connect(src: SourceSettings, sleeps: Sleeps | None = None, attempts: int = 6) -> Any:
    return build(
        src,
        environ=ENV,
        sleep=sleeps if sleeps is not None else Sleeps(),
        policy=RetryPolicy(max_attempts=attempts, base_delay=0.01, max_delay=0.05),
    )


def scan(
    connector: Any, cursor: Any = None, *, limit_pages: int | None = None, **opts: Any
) -> tuple[list[Page], Any]:
    pages = []
    for page in connector.pages(cursor, ScanOptions(now=datetime.now(UTC), **opts)):
        pages.append(page)
        cursor = page.cursor
        if limit_pages and len(pages) == limit_pages:
            break
    return pages, cursor


def ids(pages: list[Page]) -> list[str]:
    return [str(r.event_id) for p in pages for r in p.records]


def stripe_retained(world: World) -> set[str]:
    horizon = int((datetime.now(UTC) - timedelta(days=30)).timestamp())
    return {e["id"] for e in world.stripe_events if e["created"] >= horizon}


# -- Stripe ----------------------------------------------------------------------------------------


def test_stripe_full_scan_then_catch_up_only_new(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    conn = connect(source(server.url, "stripe", page_size=37))
    pages, cursor = scan(conn, initial_lookback=timedelta(hours=48))
    assert len(ids(pages)) == len(set(ids(pages))) == 300
    assert set(ids(pages)) == {e["id"] for e in box.world.stripe_events[-300:]}
    for page in pages:  # Stripe lists newest first
        created = [r.payload["created"] for r in page.records]
        assert created == sorted(created, reverse=True)
    assert cursor["checkpoint"] == box.world.stripe_events[-1]["id"]
    assert pages[-1].done
    # nothing new: an empty catch-up that keeps the checkpoint
    again, cursor2 = scan(conn, cursor)
    assert ids(again) == [] and cursor2["checkpoint"] == cursor["checkpoint"]
    # new events arrive: the catch-up returns exactly those
    extra = build_world(
        seed=99, now=NOW + timedelta(seconds=5), stripe_events=90, span=timedelta(seconds=4)
    ).stripe_events
    box.world.stripe_events.extend(extra)
    more, cursor3 = scan(conn, cursor)
    assert sorted(ids(more)) == sorted(e["id"] for e in extra)
    assert cursor3["checkpoint"] == extra[-1]["id"]
    conn.close()


@pytest.mark.parametrize("stop_after", [1, 3, 7])
def test_stripe_resume_from_stored_cursor_misses_and_repeats_nothing(
    sandbox: tuple[Sandbox, RunningServer], stop_after: int
) -> None:
    box, server = sandbox
    src = source(server.url, "stripe", page_size=29)
    first, cursor = scan(connect(src), initial_lookback=timedelta(hours=48), limit_pages=stop_after)
    rest, final = scan(connect(src), cursor, initial_lookback=timedelta(hours=48))
    got = ids(first) + ids(rest)
    assert len(got) == len(set(got)) == 300
    # the catch-up phase resumes the same way
    extra = build_world(
        seed=5, now=NOW + timedelta(seconds=5), stripe_events=100, span=timedelta(seconds=4)
    ).stripe_events
    box.world.stripe_events.extend(extra)
    part, mid = scan(connect(src), final, limit_pages=2)
    tail, _ = scan(connect(src), mid)
    caught = ids(part) + ids(tail)
    assert sorted(caught) == sorted(e["id"] for e in extra)


def test_stripe_retention_gap_is_reported_not_skipped(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    box, server = sandbox
    old = box.world.stripe_events[0]
    assert old["created"] < (datetime.now(UTC) - timedelta(days=30)).timestamp()
    pages, cursor = scan(
        connect(source(server.url, "stripe")),
        {"checkpoint": old["id"], "checkpoint_created": old["created"]},
    )
    gap = pages[0].gap
    assert gap is not None and gap.start is not None
    assert int(gap.start.timestamp()) == old["created"]
    assert abs((gap.end - (datetime.now(UTC) - timedelta(days=30))).total_seconds()) < 60
    assert "30-day" in gap.reason
    assert all(p.gap is None for p in pages[1:])
    assert set(ids(pages)) == stripe_retained(box.world)
    assert cursor["checkpoint"] == box.world.stripe_events[-1]["id"]


@pytest.mark.parametrize(
    ("kind", "extra", "days"),
    [
        ("stripe", {}, 30),
        ("stripe", {"payload_style": "thin"}, 30),
        # a base URL other than api.github.com is an Enterprise Server: 7 days
        ("github", {"repository": "o/r", "hook_id": 1}, 7),
    ],
)
def test_a_first_look_back_longer_than_the_provider_keeps_is_a_gap(
    sandbox: tuple[Sandbox, RunningServer], kind: str, extra: dict[str, Any], days: int
) -> None:
    """A first run asked to look back further than the provider keeps reads what it keeps and says
    the rest cannot be checked (cause ``beyond_retention``), once, on its first page."""
    _, server = sandbox
    pages, _ = scan(
        connect(source(server.url, kind, **extra)), initial_lookback=timedelta(days=days + 9)
    )
    gap = pages[0].gap
    assert gap is not None and gap.cause == BEYOND_RETENTION and gap.start is not None
    assert abs((gap.end - gap.start) - timedelta(days=9)) < timedelta(minutes=1)
    assert f"{days} days" in gap.reason
    assert all(p.gap is None for p in pages[1:])
    again, _ = scan(connect(source(server.url, kind, **extra)), initial_lookback=timedelta(days=1))
    assert all(p.gap is None for p in again)


def test_stripe_429_with_retry_after_is_honoured(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    box.faults = Faults(rate_limit_every=3, retry_after=0.25)
    sleeps = Sleeps()
    pages, _ = scan(
        connect(source(server.url, "stripe", page_size=50), sleeps),
        initial_lookback=timedelta(hours=48),
    )
    assert len(ids(pages)) == 300
    assert sleeps and all(s == 0.25 for s in sleeps)
    assert box.stats.calls == len(pages) + len(sleeps)


def test_stripe_5xx_retried_then_surfaced(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    box.faults = Faults(error_burst_start=2, error_burst_len=2, error_status=503)
    pages, _ = scan(
        connect(source(server.url, "stripe", page_size=100)), initial_lookback=timedelta(hours=48)
    )
    assert len(ids(pages)) == 300
    box.faults = Faults(error_burst_start=1, error_burst_len=1000, error_status=502)
    with pytest.raises(
        UnavailableError,
        match=r"source 'sbx-stripe': GET /v1/events.*failed after 4 attempt\(s\).*HTTP 502",
    ):
        scan(connect(source(server.url, "stripe"), attempts=4))


def test_stripe_401_says_which_key_and_permission(sandbox: tuple[Sandbox, RunningServer]) -> None:
    _, server = sandbox
    conn = build(source(server.url, "stripe"), environ={"SBX_STRIPE": "sk_test_wrong"})
    with pytest.raises(AuthError) as err:
        scan(conn)
    message = str(err.value)
    assert "source 'sbx-stripe'" in message and "HTTP 401" in message
    assert "$SBX_STRIPE" in message and "Events: Read" in message
    assert "sk_test_wrong" not in message  # the sandbox echoes a prefix only; we add nothing


def test_malformed_page_leaves_the_cursor_where_it_was(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    box, server = sandbox
    # one request at a time: the third call is the third page (slices may have more in flight)
    src = source(server.url, "stripe", page_size=40, max_concurrency=1)
    box.faults = Faults(malformed_call=3, malformed_len=1000)
    saved = None
    seen: list[str] = []
    with pytest.raises(
        MalformedResponseError, match=r"source 'sbx-stripe': GET .*/v1/events.*did not return JSON"
    ):
        for page in connect(src).pages(
            None, ScanOptions(now=datetime.now(UTC), initial_lookback=timedelta(hours=48))
        ):
            seen += [str(r.event_id) for r in page.records]
            saved = page.cursor  # what the caller commits with the page
    assert len(seen) == 80
    box.faults = Faults()
    rest, _ = scan(connect(src), saved, initial_lookback=timedelta(hours=48))
    assert len(seen + ids(rest)) == len(set(seen + ids(rest))) == 300


def test_stripe_fetch_event_and_object(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    conn = connect(source(server.url, "stripe"))
    event = next(e for e in reversed(box.world.stripe_events) if e["type"] == "invoice.paid")
    record = conn.fetch_event(event["id"])
    assert (record.event_id, record.event_type, record.object_type) == (
        event["id"],
        "invoice.paid",
        "invoice",
    )
    invoice = conn.fetch_object("invoice", record.object_id)
    assert invoice == box.world.stripe_objects[("invoice", record.object_id)]
    with pytest.raises(UnsupportedError, match="stripe events resend"):
        conn.redeliver(event["id"])


def test_stripe_sdk_auto_pagination_sees_what_we_see(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    """The official client library, pointed at the sandbox, pages it both ways with its own logic."""
    box, server = sandbox
    since = int((datetime.now(UTC) - timedelta(hours=48)).timestamp())
    ours, cursor = scan(
        connect(source(server.url, "stripe", page_size=23)), initial_lookback=timedelta(hours=48)
    )
    client = stripe_sdk.StripeClient(
        "sk_test_sandbox", base_addresses={"api": server.url}, max_network_retries=0
    )
    forward = [
        e.id
        for e in client.v1.events.list({"limit": 23, "created": {"gte": since}}).auto_paging_iter()
    ]
    assert sorted(forward) == sorted(ids(ours))  # (a sliced scan's pages come as they are ready)
    sequential, _ = scan(
        connect(source(server.url, "stripe", page_size=23, max_concurrency=1)),
        initial_lookback=timedelta(hours=48),
    )
    assert forward == ids(sequential)  # one request at a time: the same order, newest first
    extra = build_world(
        seed=3, now=NOW + timedelta(seconds=5), stripe_events=60, span=timedelta(seconds=4)
    ).stripe_events
    box.world.stripe_events.extend(extra)
    caught, _ = scan(connect(source(server.url, "stripe", page_size=23)), cursor)
    backward = [
        e.id
        for e in client.v1.events.list(
            {"limit": 23, "ending_before": cursor["checkpoint"]}
        ).auto_paging_iter()
    ]
    assert sorted(backward) == sorted(ids(caught)) == sorted(e["id"] for e in extra)


# -- GitHub ----------------------------------------------------------------------------------------


def test_github_scan_resume_and_stop_at_the_stored_position(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    box, server = sandbox
    src = source(server.url, "github", repository="octocat/Hello-World", hook_id=1, page_size=30)
    first, mid = scan(connect(src), limit_pages=2, initial_lookback=timedelta(hours=48))
    assert "next" in mid and mid["stop_at"] is None
    rest, cursor = scan(connect(src), mid, initial_lookback=timedelta(hours=48))
    got = ids(first) + ids(rest)
    assert len(got) == 200 and set(got) == {a.guid for a in box.world.github_attempts}
    assert cursor == {"stop_at": max(a.id for a in box.world.github_attempts)}
    record = first[0].records[0]
    assert record.attempts[0].attempt_id.isdigit() and record.attempts[0].status in (
        "OK",
        "failed to connect",
    )
    failed = next(a for a in box.world.github_attempts if a.status != "OK")
    conn = connect(src)
    conn.redeliver(failed.guid)
    new, cursor2 = scan(conn, cursor)
    [redelivered] = [r for p in new for r in p.records]
    assert (
        redelivered.event_id == failed.guid
        and redelivered.attempts[0].redelivery
        and redelivered.attempts[0].ok
    )
    assert cursor2["stop_at"] > cursor["stop_at"]
    detail = conn.fetch_event(failed.guid)
    assert detail.event_id == failed.guid
    assert conn.fetch_object("delivery", str(failed.id)) == failed.payload
    assert conn.retention == timedelta(days=7)  # not api.github.com: Enterprise Server rules


def test_github_app_jwt_is_signed_and_verified(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    box.keys = Keys(github_app_id=4242, github_app_public_key=public)
    src = parse_settings(
        {
            "sources": [
                {
                    "name": "app",
                    "kind": "github",
                    "base_url": server.url,
                    "app_id": 4242,
                    "private_key_env": "APP_KEY",
                }
            ]
        },
        "<t>",
    ).sources[0]
    pages, _ = scan(build(src, environ={"APP_KEY": pem}), initial_lookback=timedelta(hours=48))
    assert len(ids(pages)) == 200
    other = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    with pytest.raises(AuthError, match="JWT"):
        scan(build(src, environ={"APP_KEY": other}))


def test_github_only_reads_inside_the_look_back(sandbox: tuple[Sandbox, RunningServer]) -> None:
    box, server = sandbox
    src = source(server.url, "github", organization="octo-org", hook_id=7)
    pages, _ = scan(connect(src), initial_lookback=timedelta(hours=6))
    floor = datetime.now(UTC) - timedelta(hours=6)
    expected = {a.guid for a in box.world.github_attempts if a.delivered_at >= floor}
    assert set(ids(pages)) == expected and 0 < len(expected) < 200


# -- Shopify ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["graphql", "rest"])
def test_shopify_orders_scan_resume_and_big_ids(
    sandbox: tuple[Sandbox, RunningServer], api: str
) -> None:
    box, server = sandbox
    src = source(server.url, "shopify", page_size=25, api=api)
    first, mid = scan(connect(src), limit_pages=2, initial_lookback=timedelta(hours=48))
    rest, cursor = scan(connect(src), mid, initial_lookback=timedelta(hours=48))
    objects = [r.object_id for p in first + rest for r in p.records]
    assert len(objects) == len(set(objects)) == 120
    assert str(SHOPIFY_ORDER_BASE_ID) in objects  # exact, > 2**53
    assert all(r.object_type == "order" and r.event_id is None for p in first for r in p.records)
    newest = max(datetime.fromisoformat(o["updated_at"]) for o in box.world.shopify_orders.values())
    assert datetime.fromisoformat(cursor["orders"]["since"].replace("Z", "+00:00")) == newest
    assert set(cursor["orders"]) == {"since"}
    order = connect(src).fetch_object("order", str(SHOPIFY_ORDER_BASE_ID))
    assert order["id"] == SHOPIFY_ORDER_BASE_ID


def test_shopify_graphql_records_carry_the_rest_and_webhook_shape(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    """A business check's paths (financial_status, total_price, ...) read the same whichever
    API listed the order: GraphQL's answer is mapped to what REST and the webhooks carry."""
    _, server = sandbox
    by_api = {}
    for api in ("graphql", "rest"):
        pages, _ = scan(
            connect(source(server.url, "shopify", api=api)), initial_lookback=timedelta(hours=48)
        )
        by_api[api] = {r.object_id: r for p in pages for r in p.records}
    assert by_api["graphql"].keys() == by_api["rest"].keys() and len(by_api["rest"]) == 120
    for object_id, rest in by_api["rest"].items():
        graphql = by_api["graphql"][object_id]
        assert graphql.occurred_at == rest.occurred_at
        for field in ("id", "name", "email", "currency", "total_price", "financial_status"):
            assert graphql.payload[field] == rest.payload[field], field
        assert graphql.payload["fulfillment_status"] == rest.payload["fulfillment_status"]
        assert graphql.payload["admin_graphql_api_id"] == f"gid://shopify/Order/{object_id}"


@pytest.mark.parametrize(("at_once", "killed_after"), [(1, 3), (4, 1), (4, 5), (16, 3)])
def test_shopify_graphql_slices_read_every_order_once_and_resume(
    sandbox: tuple[Sandbox, RunningServer], at_once: int, killed_after: int
) -> None:
    _, server = sandbox
    src = source(
        server.url, "shopify", page_size=10, max_concurrency=at_once, max_requests_per_second=0
    )
    first, mid = scan(connect(src), limit_pages=killed_after, initial_lookback=timedelta(hours=48))
    assert mid["orders"]["phase"] == "sliced" and first[-1].slices is not None
    rest, cursor = scan(connect(src), mid, initial_lookback=timedelta(hours=48))
    objects = [r.object_id for p in first + rest for r in p.records]
    assert len(objects) == len(set(objects)) == 120
    assert set(cursor["orders"]) == {"since"}
    planned = max(p.slices[1] for p in first + rest if p.slices)
    assert planned == 1 if at_once == 1 else planned > 1  # split only for idle fetchers


def test_shopify_graphql_waits_out_throttled_answers(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    """A cost bucket that holds one page at a time: every other query is THROTTLED (HTTP 200, the
    body decides); the scan waits for the points it asked for and reads everything."""
    box, server = sandbox
    # a 152-point page (50 orders) in a 260-point bucket restored at 60 a second: the next page
    # has to wait ~0.7 s, longer than a slow request takes to come back
    box.shopify_points = (260.0, 60.0)

    class Waits(Sleeps):  # the waits asked for, really waited: the points come back in time
        def __call__(self, seconds: float) -> None:
            super().__call__(seconds)
            time.sleep(seconds)

    sleeps = Waits()
    src = source(server.url, "shopify", max_concurrency=1, page_size=50)
    pages, _ = scan(connect(src, sleeps), initial_lookback=timedelta(hours=48))
    assert sum(len(p.records) for p in pages) == 120
    assert box.stats.throttled >= 1
    # (asked - available) / restore rate: at most (152 - 108) / 60 = 0.73 s, not a blind backoff
    assert sleeps and all(0 < s <= 0.75 for s in sleeps)


def test_shopify_graphql_unknown_order_is_not_found(sandbox: tuple[Sandbox, RunningServer]) -> None:
    _, server = sandbox
    with pytest.raises(NotFoundError, match=r"source 'sbx-shopify': order 42 was not found"):
        connect(source(server.url, "shopify")).fetch_object("order", "42")


def test_shopify_graphql_refuses_resources_it_cannot_read(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    _, server = sandbox
    with pytest.raises(ConfigError, match=r"\['products'\].*REST API only; set api = \"rest\""):
        connect(source(server.url, "shopify", resources=["orders", "products"]))


def test_shopify_401(sandbox: tuple[Sandbox, RunningServer]) -> None:
    _, server = sandbox
    with pytest.raises(AuthError, match=r"read_orders access scope.*\$SBX_SHOPIFY"):
        scan(build(source(server.url, "shopify"), environ={"SBX_SHOPIFY": "nope"}))


# -- generic (a Svix-like list API) ----------------------------------------------------------------


def svix_like(messages: list[dict[str, Any]]) -> Starlette:
    async def msgs(request: Request) -> JSONResponse:
        limit = int(request.query_params.get("limit", "50"))
        after = request.query_params.get("iterator")
        start = next((i + 1 for i, m in enumerate(messages) if m["id"] == after), 0) if after else 0
        page = messages[start : start + limit]
        return JSONResponse(
            {
                "data": page,
                "iterator": page[-1]["id"] if page else after,
                "done": start + limit >= len(messages),
            }
        )

    return Starlette(routes=[Route("/api/v1/app/app_1/msg", msgs)])


def test_generic_body_cursor_with_done_flag(serve: Any) -> None:
    messages = [
        {
            "id": f"msg_{i:04d}",
            "eventType": "invoice.paid",
            "timestamp": "2026-11-30T10:00:00Z",
            "payload": {"id": i},
        }
        for i in range(230)
    ]
    server = serve(svix_like(messages))
    src = parse_settings(
        {
            "sources": [
                {
                    "name": "svix",
                    "kind": "standard",
                    "base_url": server.url,
                    "api_key_env": "SBX_STRIPE",
                    "list_url": "/api/v1/app/app_1/msg",
                    "items_path": "data",
                    "id_path": "id",
                    "type_path": "eventType",
                    "time_path": "timestamp",
                    "cursor_style": "body",
                    "cursor_param": "iterator",
                    "cursor_path": "iterator",
                    "done_path": "done",
                    "page_size": 50,
                }
            ]
        },
        "<t>",
    ).sources[0]
    first, mid = scan(connect(src), limit_pages=2)
    rest, cursor = scan(connect(src), mid)
    got = ids(first) + ids(rest)
    assert got == [m["id"] for m in messages]
    messages.extend(
        {"id": f"msg_{i:04d}", "eventType": "x", "timestamp": "2026-11-30T11:00:00Z"}
        for i in range(230, 240)
    )
    later, _ = scan(connect(src), cursor)
    assert ids(later) == [f"msg_{i:04d}" for i in range(230, 240)]


# -- recorded provider fixtures ------------------------------------------------------------------


def test_fixture_payloads_parse_into_records() -> None:
    page = json.loads((FIXTURES / "stripe" / "events_list_page.json").read_text())
    [record] = [event_record(e) for e in page["data"]]
    assert record.event_id == page["data"][0]["id"] and record.event_type == page["data"][0]["type"]
    deliveries = json.loads((FIXTURES / "github" / "hook_deliveries_list_page.json").read_text())
    records = [delivery_record(d) for d in deliveries]
    assert {r.event_id for r in records} == {
        "0b989ba4-242f-11e5-81e1-c7b6966d2516"
    }  # one guid, two attempts
    assert [r.attempts[0].redelivery for r in records] == [False, True]
    assert records[0].event_type == "issues.opened" and records[0].attempts[0].ok
    order = json.loads((FIXTURES / "shopify" / "order.json").read_text())["order"]
    assert resource_record("orders", order).object_id == str(order["id"])


def test_world_is_deterministic() -> None:
    a, b = build_world(seed=4, now=NOW), build_world(seed=4, now=NOW)
    assert a.stripe_events == b.stripe_events and a.shopify_orders == b.shopify_orders
    assert [x.guid for x in a.github_attempts] == [x.guid for x in b.github_attempts]
    assert build_world(seed=5, now=NOW).stripe_events != a.stripe_events
    assert isinstance(a.github_attempts[0], GitHubAttempt)


# -- the webhook sender --------------------------------------------------------------------------


def test_sender_plan_is_the_ground_truth_and_the_receiver_agrees(db_url: str, serve: Any) -> None:
    from sqlalchemy import func, select

    from connectors.sandbox.sender import DeliveryFaults, plan, send, stripe_webhooks
    from reconciler.inbox.receiver import create_app
    from reconciler.storage.engine import make_engine
    from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
    from tests.conftest import make_settings

    world = build_world(seed=21, now=NOW, stripe_events=200)
    hooks = stripe_webhooks(world.stripe_events, "whsec_test_secret")
    ordered, report = plan(
        hooks, DeliveryFaults(drop=0.05, duplicate=0.05, reorder=0.05, delay=0.05), seed=3
    )
    _again, report2 = plan(
        hooks, DeliveryFaults(drop=0.05, duplicate=0.05, reorder=0.05, delay=0.05), seed=3
    )
    assert report2.order == report.order  # reproducible
    assert report.dropped and report.duplicated and report.reordered and report.delayed
    assert len(ordered) == 200 - len(report.dropped) + len(report.duplicated)
    engine = make_engine(db_url)
    server = serve(create_app(make_settings(db_url), engine))

    with httpx.Client() as client:
        send(client, f"{server.url}/webhooks/stripe", ordered, report)
    assert report.responses == {"200": len(ordered)}
    with engine.connect() as conn:
        stored = {r[0] for r in conn.execute(select(INBOX_EVENTS.c.event_id))}
        duplicates = conn.execute(
            select(func.count()).select_from(DELIVERIES).where(DELIVERIES.c.outcome == "duplicate")
        ).scalar_one()
    engine.dispose()
    assert stored == {e["id"] for e in world.stripe_events} - set(report.dropped)
    assert duplicates == len(report.duplicated)


def test_github_item_without_guid_is_a_clear_error(serve: Any) -> None:
    async def deliveries(request: Request) -> JSONResponse:
        return JSONResponse(
            [
                {
                    "id": 5,
                    "guid": "g-5",
                    "delivered_at": "2026-11-30T10:00:00Z",
                    "status": "OK",
                    "status_code": 200,
                    "event": "push",
                },
                {"id": 4, "delivered_at": "2026-11-30T09:00:00Z"},
            ]
        )

    server = serve(Starlette(routes=[Route("/repos/o/r/hooks/1/deliveries", deliveries)]))
    src = source(server.url, "github", repository="o/r", hook_id=1)
    with pytest.raises(
        MalformedResponseError,
        match=r"source 'sbx-github': .*/repos/o/r/hooks/1/deliveries.* item 1 has no guid or id",
    ):
        scan(connect(src))


# -- the same failure behaviour for every sandbox connector ---------------------------------------

KINDS: dict[str, dict[str, Any]] = {
    "stripe": {"page_size": 50},
    "github": {"repository": "octocat/Hello-World", "hook_id": 1, "page_size": 50},
    # one request at a time: the faults below come at a known call
    # (20 requests a second: Shopify's default 2 makes the 429 test pace itself for 10 s)
    "shopify": {"page_size": 50, "max_concurrency": 1, "max_requests_per_second": 20},  # GraphQL
    "shopify-rest": {"page_size": 50, "api": "rest", "max_requests_per_second": 20},
}
TOTALS = {"stripe": 300, "github": 200, "shopify": 120}


def kind_of(name: str) -> str:
    return name.partition("-")[0]


def _count(pages: list[Page]) -> int:
    return sum(len(p.records) for p in pages)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_honours_retry_after_and_survives_a_5xx_burst(
    sandbox: tuple[Sandbox, RunningServer], name: str
) -> None:
    kind = kind_of(name)
    box, server = sandbox
    box.faults = Faults(
        rate_limit_every=2, retry_after=0.125, error_burst_start=3, error_burst_len=1
    )
    sleeps = Sleeps()
    pages, _ = scan(
        connect(source(server.url, kind, **KINDS[name]), sleeps),
        initial_lookback=timedelta(hours=48),
    )
    assert _count(pages) == TOTALS[kind]
    assert 0.125 in sleeps  # the provider's Retry-After, not our own backoff


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_surfaces_a_lasting_outage(
    sandbox: tuple[Sandbox, RunningServer], name: str
) -> None:
    kind = kind_of(name)
    box, server = sandbox
    box.faults = Faults(error_burst_start=1, error_burst_len=10_000, error_status=500)
    with pytest.raises(
        UnavailableError,
        match=rf"source 'sbx-{kind}': (GET|POST) .*failed after 3 attempt\(s\).*HTTP 500",
    ):
        scan(connect(source(server.url, kind, **KINDS[name]), attempts=3))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_names_the_rejected_key(
    sandbox: tuple[Sandbox, RunningServer], name: str
) -> None:
    kind = kind_of(name)
    _, server = sandbox
    env_name = {"stripe": "SBX_STRIPE", "github": "SBX_GITHUB", "shopify": "SBX_SHOPIFY"}[kind]
    with pytest.raises(
        AuthError, match=rf"source 'sbx-{kind}'.*HTTP 401.*this call needs .*\${env_name}"
    ):
        scan(build(source(server.url, kind, **KINDS[name]), environ={env_name: "wrong"}))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_keeps_its_cursor_on_a_malformed_page(
    sandbox: tuple[Sandbox, RunningServer], name: str
) -> None:
    kind = kind_of(name)
    box, server = sandbox
    box.faults = Faults(malformed_call=2, malformed_len=1000)
    src = source(server.url, kind, **KINDS[name])
    opts = ScanOptions(now=datetime.now(UTC), initial_lookback=timedelta(hours=48))
    saved, seen = None, 0
    with pytest.raises(MalformedResponseError, match=rf"source 'sbx-{kind}'.*did not return JSON"):
        for page in connect(src).pages(None, opts):
            seen += len(page.records)
            saved = page.cursor
    assert seen == 50 and saved is not None
    box.faults = Faults()
    rest = list(connect(src).pages(saved, opts))
    assert seen + _count(rest) == TOTALS[kind]


@pytest.mark.parametrize("body", ["html", "cut"])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_retries_a_proxys_html_page_and_a_body_cut_short(
    sandbox: tuple[Sandbox, RunningServer], name: str, body: str
) -> None:
    """A CDN's error page answered with 200, or a page cut mid-JSON, is a moment's trouble: retried
    with backoff, not the end of the run."""
    kind = kind_of(name)
    box, server = sandbox
    box.faults = Faults(malformed_call=2, malformed_len=2, malformed_body=body)
    sleeps = Sleeps()
    pages, _ = scan(
        connect(source(server.url, kind, **KINDS[name]), sleeps),
        initial_lookback=timedelta(hours=48),
    )
    assert _count(pages) == TOTALS[kind]
    assert len(sleeps) == 2  # one backoff for each bad answer


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_connector_waits_out_a_long_burst_of_429s_within_its_patience(
    sandbox: tuple[Sandbox, RunningServer], name: str
) -> None:
    """Five 429s in a row, each with Retry-After, are more than ``max_attempts`` but not a failure:
    the provider says when to come back. Past ``max_total_wait`` the request fails as before."""
    kind = kind_of(name)
    box, server = sandbox
    box.faults = Faults(error_burst_start=2, error_burst_len=5, error_status=429, retry_after=0.02)
    sleeps = Sleeps()
    pages, _ = scan(
        connect(source(server.url, kind, **KINDS[name]), sleeps, attempts=3),
        initial_lookback=timedelta(hours=48),
    )
    assert _count(pages) == TOTALS[kind]
    assert sleeps.count(0.02) == 5

    box.faults = Faults(
        error_burst_start=1, error_burst_len=10_000, error_status=429, retry_after=0.02
    )
    impatient = build(
        source(server.url, kind, **KINDS[name]),
        environ=ENV,
        sleep=Sleeps(),
        policy=RetryPolicy(max_attempts=3, base_delay=0.01, max_total_wait=0.1),
    )
    with pytest.raises(
        UnavailableError, match=rf"source 'sbx-{kind}'.*0\.1s of waiting.*rate limited"
    ):
        scan(impatient, initial_lookback=timedelta(hours=48))


# -- the generic connector's other cursor styles ---------------------------------------------------


def list_api(items: list[dict[str, Any]]) -> Starlette:
    """One list endpoint that pages by Link header, by ``since`` time or by offset."""

    async def link(request: Request) -> JSONResponse:
        start, limit = (
            int(request.query_params.get("page", "0")),
            int(request.query_params.get("limit", "10")),
        )
        page = items[start : start + limit]
        headers = {}
        if start + limit < len(items):
            headers["link"] = (
                f'<{request.url.replace_query_params(page=start + limit, limit=limit)}>; rel="next"'
            )
        return JSONResponse({"items": page}, headers=headers)

    async def since(request: Request) -> JSONResponse:
        floor, limit = (
            request.query_params.get("since", ""),
            int(request.query_params.get("limit", "10")),
        )
        page = [i for i in items if i["at"] >= floor][:limit]
        return JSONResponse({"items": page})

    async def offset(request: Request) -> JSONResponse:
        start, limit = (
            int(request.query_params.get("offset", "0")),
            int(request.query_params.get("limit", "10")),
        )
        return JSONResponse({"items": items[start : start + limit]})

    return Starlette(
        routes=[Route("/link", link), Route("/since", since), Route("/offset", offset)]
    )


@pytest.mark.parametrize("style", ["link", "since", "offset"])
def test_generic_cursor_styles_resume_without_gaps_or_repeats(serve: Any, style: str) -> None:
    # three items share each timestamp, so the since style must skip the boundary by id
    items = [
        {"id": f"e{i:03d}", "type": "thing", "at": f"2026-11-30T10:{i // 3:02d}:00+00:00"}
        for i in range(95)
    ]
    server = serve(list_api(items))
    extra = {"cursor_param": "offset"} if style == "offset" else {}
    src = parse_settings(
        {
            "sources": [
                {
                    "name": "api",
                    "kind": "generic",
                    "base_url": server.url,
                    "signature_header": "X-Sig",
                    "id_header": "X-Id",
                    "list_url": f"/{style}",
                    "items_path": "items",
                    "id_path": "id",
                    "type_path": "type",
                    "time_path": "at",
                    "cursor_style": style,
                    "page_size": 10,
                    **extra,
                }
            ]
        },
        "<t>",
    ).sources[0]
    opts = {"initial_lookback": timedelta(days=3650)}
    first, mid = scan(connect(src), limit_pages=3, **opts)
    rest, final = scan(connect(src), mid, **opts)
    got = ids(first) + ids(rest)
    if style == "link":  # no position across runs: the link style rereads from the start
        assert got == [i["id"] for i in items]
        return
    assert got == [i["id"] for i in items]
    items.extend(
        {"id": f"e{i:03d}", "type": "thing", "at": f"2026-11-30T11:{i:02d}:00+00:00"}
        for i in range(95, 99)
    )
    later, _ = scan(connect(src), final, **opts)
    assert ids(later) == ["e095", "e096", "e097", "e098"]


def test_shopify_overlap_rereads_the_boundary_but_never_moves_the_cursor_back(
    sandbox: tuple[Sandbox, RunningServer],
) -> None:
    box, server = sandbox
    src = source(server.url, "shopify", page_size=250)
    _, cursor = scan(connect(src), initial_lookback=timedelta(hours=48))
    again, cursor2 = scan(connect(src), cursor, overlap=timedelta(minutes=30))
    since = datetime.fromisoformat(cursor["orders"]["since"])
    expected = {
        str(o["id"])
        for o in box.world.shopify_orders.values()
        if datetime.fromisoformat(o["updated_at"]) >= since - timedelta(minutes=30)
    }
    assert {r.object_id for p in again for r in p.records} == expected and expected
    assert cursor2 == cursor


def test_decode_json_is_exact_and_falls_back_where_orjson_refuses() -> None:
    import json

    from connectors.http import decode_json

    page = json.dumps({"data": [{"id": "evt_1", "amount": 2**63 - 1, "x": 1.5, "s": "é"}]})
    assert decode_json(page.encode()) == json.loads(page)
    assert decode_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}  # a byte order mark: json takes it
    assert decode_json(b'{"a": NaN}')["a"] != 0  # NaN is not JSON; json still reads it
    with pytest.raises(ValueError):
        decode_json(b"<html>not json</html>")


def test_fetch_ahead_yields_in_order_and_runs_one_request_ahead() -> None:
    import threading

    from connectors.http import fetch_ahead

    fetched: list[int] = []
    taken = threading.Event()

    def fetch(n: int) -> int:
        fetched.append(n)
        return n

    pages = fetch_ahead(fetch, 1, lambda n: n + 1 if n < 5 else None)
    assert next(pages) == 1
    # the worker does not wait for the caller to take page 1 before asking for page 2, and stops
    # with page 3 in hand (one page in the hand-over queue, one fetched: nothing further)
    for _ in range(100):
        if len(fetched) >= 3:
            break
        taken.wait(0.01)
    taken.wait(0.2)
    assert fetched == [1, 2, 3]
    assert list(pages) == [2, 3, 4, 5]
    assert fetched == [1, 2, 3, 4, 5]


def test_fetch_ahead_raises_the_workers_error_after_the_pages_before_it() -> None:
    from connectors.http import fetch_ahead

    def fetch(n: int) -> int:
        if n == 3:
            raise UnavailableError("page 3 failed")
        return n

    got: list[int] = []
    with pytest.raises(UnavailableError, match="page 3 failed"):
        for n in fetch_ahead(fetch, 1, lambda n: n + 1):
            got.append(n)
    assert got == [1, 2]


def test_fetch_ahead_closed_early_stops_its_worker() -> None:
    import threading

    from connectors.http import fetch_ahead

    fetched: list[int] = []
    pages = fetch_ahead(lambda n: fetched.append(n) or n, 1, lambda n: n + 1)
    assert next(pages) == 1
    pages.close()  # returns once the worker has stopped
    assert not [t for t in threading.enumerate() if t.name == "fetch-ahead"]
    assert len(fetched) <= 3


@pytest.mark.parametrize(
    "params",
    [
        [("limit", 100), ("created[gte]", 1764470000), ("starting_after", "evt_1Qx")],
        {"per_page": 100, "cursor": "v1_abc==", "flag": True, "off": False, "none": None},
        {"status": ["a", "b c"], "q": "ünïcode & more/?#"},
        [("types[]", "invoice.paid"), ("types[]", "invoice.voided")],
    ],
)
def test_with_query_sends_the_url_httpx_would_build_from_params(params: Any) -> None:

    from connectors.http import with_query

    base = "https://api.example.test"
    url, left = with_query("/v1/events", params)
    assert left is None
    expected = httpx.Request("GET", base + "/v1/events", params=params).url
    assert httpx.Request("GET", base + url).url == expected
    # a URL with a query of its own (a Link header's next page): httpx merges, so it gets the params
    assert with_query("/x?page=2", params) == ("/x?page=2", params)
    assert with_query("/x", None) == ("/x", None) and with_query("/x", {}) == ("/x", {})


def _reference_event_record(event: dict[str, Any]) -> Record:
    """event_record as first written (keyword construction, ABC checks): its fast path must agree."""

    def mapping(value: Any) -> Any:
        return value if isinstance(value, Mapping) else {}

    obj = mapping(mapping(event.get("data")).get("object"))
    created = event.get("created")
    object_id = obj.get("id")
    return Record(
        event_id=str(event["id"]),
        event_type=event.get("type"),
        object_type=obj.get("object"),
        object_id=str(object_id) if object_id is not None else None,
        occurred_at=datetime.fromtimestamp(created, UTC) if isinstance(created, int) else None,
        object_version=str(created) if created is not None else None,
        payload=event,
    )


@pytest.mark.parametrize(
    "event",
    [
        {
            "id": "evt_1",
            "type": "invoice.paid",
            "created": 1_700_000_000,
            "data": {"object": {"id": "in_1", "object": "invoice"}},
        },
        {"id": 42, "created": 1_700_000_000, "data": {"object": {"id": 7, "object": "charge"}}},
        {"id": "evt_2", "created": True, "data": {"object": {"id": "x"}}},
        {"id": "evt_3", "created": 1.5e9, "data": {"object": "not an object"}},
        {"id": "evt_4", "created": "1700000000", "data": ["a list"]},
        {"id": "evt_5", "created": None, "data": None},
        {"id": "evt_6"},
        {"id": "evt_7", "created": 1_700_000_000, "data": {"object": {"object": "invoice"}}},
    ],
)
def test_event_record_fast_path_equals_the_plain_construction(event: dict[str, Any]) -> None:
    record = event_record(event)
    assert record == _reference_event_record(event)
    assert type(record) is Record and record.attempts == ()


# -- a page that contradicts the paging is a fault, not the end ------------------------------------


FAULT_KINDS: dict[str, tuple[dict[str, Any], str | None, tuple[str, ...]]] = {
    # one request at a time: the fault comes at a known call (tests/unit/test_slices.py: the guard
    # of sliced paging)
    "stripe": ({"page_size": 50, "max_concurrency": 1}, "data", ("empty", "repeat")),
    "github": (KINDS["github"], None, ("empty", "repeat", "stuck")),
    "shopify": ({"page_size": 50, "max_concurrency": 1}, "orders", ("empty", "repeat", "stuck")),
    "shopify-rest": ({"page_size": 50, "api": "rest"}, "orders", ("empty", "repeat", "stuck")),
}
FAULT_CASES = [(kind, mode) for kind, (_, _, modes) in FAULT_KINDS.items() for mode in modes]


def _misbehaving(server: RunningServer, name: str, transport: Misbehaving) -> Any:
    extra = FAULT_KINDS[name][0]
    src = source(server.url, kind_of(name), **extra)
    return build(src, environ=ENV, sleep=Sleeps(), transport=transport)


@pytest.mark.parametrize(("name", "mode"), FAULT_CASES)
def test_a_page_that_misbehaves_once_is_fetched_again(
    sandbox: tuple[Sandbox, RunningServer], name: str, mode: str
) -> None:
    kind = kind_of(name)
    _, server = sandbox
    transport = Misbehaving(mode, lambda call: call == 2, FAULT_KINDS[name][1])
    pages, _ = scan(_misbehaving(server, name, transport), initial_lookback=timedelta(hours=48))
    assert len(ids(pages)) == _count(pages) == TOTALS[kind]
    if kind != "shopify":  # Shopify orders are state records, without event ids
        assert len(set(ids(pages))) == TOTALS[kind]


@pytest.mark.parametrize(("name", "mode"), FAULT_CASES)
def test_a_page_that_always_misbehaves_fails_the_scan_at_the_last_good_cursor(
    sandbox: tuple[Sandbox, RunningServer], name: str, mode: str
) -> None:
    kind = kind_of(name)
    _, server = sandbox
    transport = Misbehaving(mode, lambda call: call >= 2, FAULT_KINDS[name][1])
    opts = ScanOptions(now=datetime.now(UTC), initial_lookback=timedelta(hours=48))
    saved, seen = None, 0
    reason = {
        "empty": "says there is more but the page is empty",
        "repeat": "repeats the previous page",
        "stuck": "(gives a next cursor that does not advance|repeats the previous page)",
    }[mode]
    with pytest.raises(PagingError, match=rf"source 'sbx-{kind}': .*{reason} \(3 tries\)"):
        for page in _misbehaving(server, name, transport).pages(None, opts):
            seen += len(page.records)
            saved = page.cursor
    assert seen == 50 and saved is not None and transport.calls == 4
    rest = list(connect(source(server.url, kind, **FAULT_KINDS[name][0])).pages(saved, opts))
    assert seen + _count(rest) == TOTALS[kind]


@pytest.mark.parametrize("mode", ["once", "always"])
def test_generic_link_paging_faults(serve: Any, mode: str) -> None:
    items = [
        {"id": f"g{i:03d}", "at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"} for i in range(45)
    ]
    server = serve(list_api(items))
    src = parse_settings(
        {
            "sources": [
                {
                    "name": "gen",
                    "kind": "generic",
                    "signature_header": "X-Sig",
                    "id_header": "X-Id",
                    "base_url": server.url,
                    "list_url": "/link",
                    "items_path": "items",
                    "cursor_style": "link",
                    "page_size": 10,
                }
            ]
        },
        "<test>",
    ).sources[0]
    bad = (lambda call: call == 2) if mode == "once" else (lambda call: call >= 2)
    transport = Misbehaving("empty", bad, "items")
    connector = build(src, environ={}, sleep=Sleeps(), transport=transport)
    opts = ScanOptions(now=datetime.now(UTC))
    if mode == "once":
        assert len(ids(list(connector.pages(None, opts)))) == 45
        return
    saved = None
    with pytest.raises(
        PagingError, match=r"source 'gen': .*says there is more but the page is empty"
    ):
        for page in connector.pages(None, opts):
            saved = page.cursor
    rest = list(build(src, environ={}).pages(saved, opts))
    assert 10 + _count(rest) == 45


def test_page_fault_rules() -> None:
    shape = PageShape
    assert (
        page_fault("r1", shape([], True, "r2", "u"), None)
        == "says there is more but the page is empty"
    )
    assert page_fault("r1", shape([], False, None, "u"), None) is None  # an empty last page is fine
    assert page_fault("r2", shape(["a"], True, "r3", "u"), ("a",)) == "repeats the previous page"
    assert (
        page_fault("r2", shape(["b"], True, "r2", "u"), ("a",))
        == "gives a next cursor that does not advance"
    )
    assert page_fault("r2", shape(["b"], False, None, "u"), ("a",)) is None


_GRAPHQL_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_GRAPHQL_BODIES = st.one_of(
    _GRAPHQL_JSON,
    st.fixed_dictionaries(
        {
            "query": st.sampled_from(
                [
                    ORDERS_QUERY,
                    ORDER_QUERY,
                    "{ orders(first: 3) { nodes { id } } }",
                    "query { orders { nodes { id } } }",
                    "{ nope }",
                    "not graphql",
                ]
            )
            | st.text(max_size=30),
            "variables": st.dictionaries(
                st.sampled_from(["first", "after", "query", "id"]),
                st.integers(-5, 10**6) | st.text(max_size=20) | st.none(),
                max_size=4,
            )
            | _GRAPHQL_JSON,
        }
    ),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=_GRAPHQL_BODIES)
@example(body={"query": ORDERS_QUERY, "variables": {"first": "x"}})  # was a 500 (found in review)
@example(body={"query": ORDERS_QUERY, "variables": {"first": 10**6}})  # costs more than the bucket
def test_the_sandboxs_graphql_answers_any_body_with_data_or_errors(
    sandbox: tuple[Sandbox, RunningServer], body: Any
) -> None:
    """The sandbox's GraphQL route is an input path too: any body gets data or errors (400 when it
    is not a query at all), never a server error."""
    box, server = sandbox
    box.shopify_points = (2000.0, 1e9)  # (refilled at once: this test is about answers, not cost)
    answer = httpx.post(
        f"{server.url}/admin/api/2025-01/graphql.json",
        json=body,
        headers={"X-Shopify-Access-Token": "shpat_sandbox"},
        timeout=10,
    )
    assert answer.status_code in (200, 400), answer.text
    doc = answer.json()
    assert isinstance(doc, dict) and ("errors" in doc or "data" in doc)
