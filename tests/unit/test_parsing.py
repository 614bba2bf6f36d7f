"""Recorded provider payloads parse into the ids and types the receiver stores."""

from __future__ import annotations

import json

import pytest

from connectors import parsing
from connectors.parsing import MASK, mask_headers
from connectors.providers.github.signature import parse_github
from connectors.providers.shopify.signature import parse_shopify
from connectors.providers.stripe.signature import parse_stripe
from tests.conftest import FIXTURES


def test_stripe_fixture_event() -> None:
    body = (FIXTURES / "stripe" / "event.plan_created.json").read_bytes()
    doc = json.loads(body)
    ev = parse_stripe({}, body)
    assert ev.event_id == doc["id"]
    assert ev.event_type == "plan.created"
    assert ev.object_type == doc["data"]["object"]["object"]
    assert ev.object_id == doc["data"]["object"]["id"]
    assert ev.occurred_at is not None and int(ev.occurred_at.timestamp()) == doc["created"]


def test_github_fixture_push_and_pull_request() -> None:
    body = (FIXTURES / "github" / "pull_request.opened.payload.json").read_bytes()
    doc = json.loads(body)
    headers = {
        "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "x-github-event": "pull_request",
    }
    ev = parse_github(headers, body)
    assert ev.event_id == "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert ev.event_type == "pull_request.opened"
    assert ev.object_id == str(doc["pull_request"]["id"])
    push = parse_github(
        {"x-github-delivery": "d1", "x-github-event": "push"},
        (FIXTURES / "github" / "push.payload.json").read_bytes(),
    )
    assert push.event_type == "push" and push.object_id is not None


def test_shopify_fixture_order_keeps_big_ids_exact() -> None:
    order = json.loads((FIXTURES / "shopify" / "order.json").read_text())["order"]
    body = json.dumps(order).encode()
    headers = {
        "x-shopify-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        "x-shopify-topic": "orders/create",
    }
    ev = parse_shopify(headers, body)
    assert ev.event_id == "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
    assert ev.object_type == "order" and ev.event_type == "orders/create"
    assert ev.object_id == str(order["id"])
    vector = json.loads((FIXTURES / "shopify" / "signature_vector.json").read_text())
    big = parse_shopify({"x-shopify-webhook-id": "w"}, vector["body"].encode())
    assert big.object_id == "820982911946154508"  # > 2**53: a float would give ...4500


def test_json_path_and_masking() -> None:
    doc = {"a": {"b": [{"c": 1}]}}
    assert parsing.json_path_get(doc, "a.b.0.c") == 1
    assert parsing.json_path_get(doc, "a.x.c") is None
    from connectors.providers.stripe import PROVIDER as STRIPE

    sent = {"Stripe-Signature": "t=1,v1=abc", "Authorization": "Bearer x", "X-Ok": "1"}
    # credentials are masked for every source; a signature header by its provider's own list
    assert mask_headers(sent) == {
        "stripe-signature": "t=1,v1=abc",
        "authorization": MASK,
        "x-ok": "1",
    }
    masked = mask_headers(sent, STRIPE.sensitive_headers(None))  # type: ignore[arg-type]
    assert masked == {"stripe-signature": MASK, "authorization": MASK, "x-ok": "1"}


@pytest.mark.parametrize(
    ("kind", "header"),
    [
        ("stripe", "stripe-signature"),
        ("github", "x-hub-signature-256"),
        ("shopify", "x-shopify-hmac-sha256"),
        ("standard", "webhook-signature"),
        ("standard", "svix-signature"),
        ("slack", "x-slack-signature"),
        ("twilio", "x-twilio-signature"),
        ("discord", "x-signature-ed25519"),
        ("discord_interactions", "x-signature-ed25519"),
    ],
)
def test_each_provider_declares_its_signature_header_sensitive(kind: str, header: str) -> None:
    """One place for each provider's signature headers: its own ``sensitive_headers``."""
    from connectors.registry import provider

    assert header in provider(kind).sensitive_headers(None)  # type: ignore[arg-type]
