"""The list examples of docs/providers/generic.md ("Its list API"), read as written: Stripe's
events paged by a ``generic`` source against the sandbox's Stripe API over loopback HTTP (every
event, none twice), and Paddle's and Svix's shapes of paging against stand-ins of their documented
answers (httpx.MockTransport): the next URL followed exactly as Paddle builds it, Svix's iterator
sent back until ``done``."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from connectors.base import ScanOptions
from connectors.registry import build_connector as build_from_options
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config.settings import parse_settings
from reconciler.sources import options_of
from tests.conftest import RunningServer, start_server

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "providers" / "generic.md").read_text().split("### Its list API")[1]
EXAMPLES = {
    doc["sources"][0]["name"]: doc["sources"][0]
    for doc in (tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", PAGE, re.S))
}
NOW = datetime.now(UTC)


def _read(source: dict[str, Any], environ: dict[str, str], **client: Any) -> list[str]:
    settings = parse_settings({"sources": [source]}, "docs/providers/generic.md")
    options = options_of(settings.sources[0], environ)
    connector = build_from_options(options, sleep=lambda s: None, **client)
    ids: list[str] = []
    try:
        for page in connector.pages(None, ScanOptions(now=NOW)):
            ids += [str(r.event_id) for r in page.records]
    finally:
        connector.close()
    return ids


@pytest.fixture
def sandbox() -> Iterator[tuple[str, list[str]]]:
    world = build_world(3, stripe_events=250, github_deliveries=0, shopify_orders=0)
    server: RunningServer = start_server(Sandbox(world).app)
    yield server.url, [str(e["id"]) for e in world.stripe_events]
    server.stop()


def test_the_page_has_the_three_list_examples() -> None:
    assert set(EXAMPLES) == {"paddle-list", "stripe-list", "svix-list"}


def test_stripes_events_as_a_generic_list_against_the_sandbox(
    sandbox: tuple[str, list[str]],
) -> None:
    url, expected = sandbox
    source = {**EXAMPLES["stripe-list"], "base_url": url}
    ids = _read(source, {"STRIPE_API_KEY": "sk_test_sandbox"})
    assert len(ids) == len(set(ids)) == 250
    assert set(ids) == set(expected)


def _paddle(items: int) -> httpx.MockTransport:
    ids = [f"evt_{i:026d}" for i in range(items)]

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer pdl_live_apikey"
        query = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        size = min(int(query.get("per_page", "50")), 200)
        start = ids.index(query["after"]) + 1 if "after" in query else 0
        page = ids[start : start + size]
        more = start + size < len(ids)
        following = (
            f"https://api.paddle.com/events?after={page[-1]}&per_page={size}" if page else None
        )
        body = {
            "data": [
                {
                    "event_id": i,
                    "event_type": "transaction.completed",
                    "occurred_at": "2026-12-06T10:00:00Z",
                }
                for i in page
            ],
            "meta": {
                "request_id": "req_1",
                "pagination": {
                    "per_page": size,
                    "next": following,
                    "has_more": more,
                    "estimated_total": len(ids),
                },
            },
        }
        return httpx.Response(200, json=body)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("items", [0, 1, 200, 401])
def test_paddles_events_follow_the_next_url_to_the_end(items: int) -> None:
    ids = _read(
        EXAMPLES["paddle-list"], {"PADDLE_API_KEY": "pdl_live_apikey"}, transport=_paddle(items)
    )
    assert ids == [f"evt_{i:026d}" for i in range(items)]


def _svix(items: int) -> httpx.MockTransport:
    ids = [f"msg_{i:04d}" for i in range(items)]

    def answer(request: httpx.Request) -> httpx.Response:
        query = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        size = min(int(query.get("limit", "50")), 250)
        start = int(query["iterator"].removeprefix("it_")) if "iterator" in query else 0
        page = ids[start : start + size]
        done = start + size >= len(ids)
        body = {
            "data": [
                {"id": i, "eventType": "invoice.paid", "timestamp": "2026-12-06T10:00:00Z"}
                for i in page
            ],
            "iterator": f"it_{start + len(page)}",
            "prevIterator": None,
            "done": done,
        }
        return httpx.Response(
            200, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )

    return httpx.MockTransport(answer)


@pytest.mark.parametrize("items", [0, 100, 101, 333])
def test_svix_messages_are_read_until_done(items: int) -> None:
    ids = _read(EXAMPLES["svix-list"], {"SVIX_API_KEY": "sk_svix"}, transport=_svix(items))
    assert ids == [f"msg_{i:04d}" for i in range(items)]
