"""Lemon Squeezy's webhooks (``kind = "lemonsqueezy"``): ``X-Signature``, hex HMAC-SHA256 of the body.

Facts, each with its source:

- **Signature.** ``X-Signature``: "Lemon Squeezy will use the signing secret to generate a hash of the
  payload and send the hash in the X-Signature header […] using an HMAC hex digest" (SHA-256 in the
  page's examples); the secret is the one typed when the webhook was created ("anything you want
  but is normally a random string between 6 and 40 characters"), used as written.
  https://docs.lemonsqueezy.com/help/webhooks/signing-requests ;
  https://docs.lemonsqueezy.com/help/webhooks
- **No official Python library** verifies these (Lemon Squeezy's SDK is JavaScript,
  ``@lemonsqueezy/lemonsqueezy.js``): the documentation's algorithm is the reference.
- **Time window.** None: nothing signed carries a time. Retries: "up to three more times using an
  exponential backoff strategy (e.g. 5 secs, 25 secs, 125 secs)".
  https://docs.lemonsqueezy.com/help/webhooks/webhook-requests
- **Identity.** Headers ``X-Event-Name`` (the event) and ``X-Signature``; the body is a JSON:API
  resource: ``{"meta": {"event_name": "order_created", "custom_data": {…}}, "data": {"type":
  "orders", "id": "1", "attributes": {…, "created_at": …, "updated_at": …}}}`` (same page).
  Lemon Squeezy sends **no event id**, so the identity is the SHA-256 of the signed body
  (``lemonsqueezy:<hex>``): a retry or a resend of the same delivery is a duplicate; another event
  (another name, or the object changed) is another identity. The type is ``meta.event_name`` (the
  signed copy of ``X-Event-Name``), the object ``data.type`` / ``data.id``, the time the object's
  ``data.attributes.updated_at`` (Lemon Squeezy sends no event time).
- **Handshakes.** None.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme

EVENT_NAME = "x-event-name"

SCHEME = Scheme(
    signatures=("header:X-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id="hash",
    id_prefix="lemonsqueezy:",
    event_type="body:meta.event_name",
    occurred_at="body:data.attributes.updated_at",
    object_type="body:data.type",
    object_id="body:data.id",
    carried=(EVENT_NAME,),
)


def _attributes(kind: str, event_type: str, now: str) -> dict[str, Any]:
    common = {"store_id": 1, "customer_id": random.randint(1, 10**6), "created_at": now}
    if kind == "orders":
        refunded = event_type == "order_refunded"
        return common | {
            "identifier": str(uuid.uuid4()),
            "order_number": random.randint(1, 10**6),
            "user_name": "Sam Sample",
            "user_email": "sam@example.com",
            "currency": "USD",
            "subtotal": 999,
            "tax": 200,
            "total": 1199,
            "status": "refunded" if refunded else "paid",
            "status_formatted": "Refunded" if refunded else "Paid",
            "refunded": refunded,
            "test_mode": True,
            "updated_at": now,
        }
    return common | {
        "order_id": random.randint(1, 10**6),
        "product_id": 1,
        "variant_id": 1,
        "product_name": "Sample subscription",
        "variant_name": "Monthly",
        "user_name": "Sam Sample",
        "user_email": "sam@example.com",
        "status": "cancelled" if event_type == "subscription_cancelled" else "active",
        "cancelled": event_type == "subscription_cancelled",
        "renews_at": now,
        "ends_at": None,
        "test_mode": True,
        "updated_at": now,
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    kind = "orders" if event_type.startswith("order_") else "subscriptions"
    document = {
        "meta": {"event_name": event_type, "custom_data": {"customer_id": 25}},
        "data": {
            "type": kind,
            "id": str(random.randint(1, 10**9)),
            "attributes": _attributes(kind, event_type, now),
        },
    }
    body = compact_json(document)
    event_id = SCHEME.id_prefix + hashlib.sha256(body).hexdigest()  # as the scheme reads it
    headers = {"content-type": "application/json", EVENT_NAME: event_type}
    return Sample(event_id, body, headers)


SAMPLES = Catalogue(
    ("order_created", "subscription_created", "subscription_cancelled", "order_refunded"), _sample
)

PROVIDER = declared("lemonsqueezy", SCHEME, samples=SAMPLES)
