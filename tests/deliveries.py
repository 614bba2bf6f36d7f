"""Build signed deliveries the way each provider sends them (for tests and benchmarks)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from connectors import scheme_check
from connectors.providers.generic.scheme import GenericKeys, scheme_of
from connectors.providers.github.signature import github_sign
from connectors.providers.shopify.signature import shopify_sign
from connectors.providers.standard.signature import standard_sign
from connectors.providers.stripe.signature import stripe_sign
from tests.conftest import SECRETS


def acme_sign(body: bytes, secret: str) -> str:
    """The ``X-Acme-Signature`` the ``acme`` source (kind ``generic``, tests/conftest.py) checks,
    made by the scheme its keys describe: hex HMAC-SHA256 of the body, prefixed ``sha256=``."""
    keys = GenericKeys(
        signature_header="X-Acme-Signature",
        signature_prefix="sha256=",
        id_json_path="meta.id",
        type_json_path="meta.type",
    )
    signed = scheme_check.sign(scheme_of(keys), {}, body, secret, time.time(), "http://127.0.0.1/")
    return signed["x-acme-signature"]


def stripe_delivery(
    event_id: str | None = None,
    event_type: str = "invoice.paid",
    obj: dict[str, Any] | None = None,
    *,
    secret: str = SECRETS["stripe"],
    timestamp: int | None = None,
    created: int | None = None,
) -> tuple[dict[str, str], bytes]:
    event = {
        "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": created or int(time.time()),
        "type": event_type,
        "data": {"object": obj or {"id": "in_123", "object": "invoice", "status": "paid"}},
        "livemode": False,
        "pending_webhooks": 1,
    }
    body = json.dumps(event).encode()
    ts = int(time.time()) if timestamp is None else timestamp
    return (
        {
            "Content-Type": "application/json",
            "Stripe-Signature": stripe_sign(body, secret, ts),
        },
        body,
    )


def github_delivery(
    guid: str | None = None, event: str = "push", payload: dict[str, Any] | None = None
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload or {"ref": "refs/heads/main", "repository": {"id": 1}}).encode()
    return (
        {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid or str(uuid.uuid4()),
            "X-Hub-Signature-256": github_sign(body, SECRETS["github"]),
        },
        body,
    )


def shopify_delivery(
    webhook_id: str | None = None,
    topic: str = "orders/updated",
    order: dict[str, Any] | None = None,
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(
        order or {"id": 820982911946154508, "updated_at": "2026-11-30T10:00:00Z"}
    ).encode()
    return (
        {
            "Content-Type": "application/json",
            "X-Shopify-Topic": topic,
            "X-Shopify-Webhook-Id": webhook_id or str(uuid.uuid4()),
            "X-Shopify-Event-Id": str(uuid.uuid4()),
            "X-Shopify-Triggered-At": "2026-11-30T10:00:00.000Z",
            "X-Shopify-Shop-Domain": "demo.myshopify.com",
            "X-Shopify-Hmac-Sha256": shopify_sign(body, SECRETS["shopify"]),
        },
        body,
    )


def standard_delivery(
    msg_id: str | None = None, payload: dict[str, Any] | None = None, timestamp: int | None = None
) -> tuple[dict[str, str], bytes]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex[:24]}"
    ts = int(time.time()) if timestamp is None else timestamp
    body = json.dumps(payload or {"type": "user.created", "data": {"id": "u_1"}}).encode()
    return (
        {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": standard_sign(body, SECRETS["standard"], msg_id, ts),
        },
        body,
    )


def generic_delivery(
    event_id: str | None = None, event_type: str = "thing.happened"
) -> tuple[dict[str, str], bytes]:
    body = json.dumps({"meta": {"id": event_id or uuid.uuid4().hex, "type": event_type}}).encode()
    sig = acme_sign(body, SECRETS["generic"])
    return ({"Content-Type": "application/json", "X-Acme-Signature": sig}, body)
