"""Realistic sample Shopify deliveries for ``hookledger send``, shaped after Shopify's documented
examples (the fixtures in ``tests/fixtures/providers/``), each with a fresh identity, stored under its
topic and event id as the receiver names it. Unsigned: ``PROVIDER.sign`` adds
``X-Shopify-Hmac-Sha256``.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.options import SourceOptions
from connectors.providers.shopify.base import delivery_identity


def _json(document: Any) -> bytes:
    return compact_json(document)


def _shopify(options: SourceOptions, event_type: str, secret: str) -> Sample:
    order_id = 820982911946154508 + int(time.time() * 1000) % 10**9
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    order = {
        "id": order_id,
        "name": f"#{order_id % 100_000}",
        "email": "buyer@example.com",
        "created_at": now,
        "updated_at": now,
        "currency": "USD",
        "total_price": "42.00",
        "financial_status": "paid" if event_type == "orders/paid" else "pending",
        "line_items": [{"id": 466157049, "title": "IPod Nano - 8gb", "quantity": 1}],
    }
    webhook_id = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "x-shopify-topic": event_type,
        "x-shopify-webhook-id": webhook_id,
        "x-shopify-event-id": str(uuid.uuid4()),
        "x-shopify-triggered-at": now,
        "x-shopify-shop-domain": "example.myshopify.com",
        "x-shopify-api-version": "2025-01",
    }
    # stored under its topic and event id, as the receiver names it
    return Sample(delivery_identity(headers) or webhook_id, _json(order), headers)


SHOPIFY = Catalogue(("orders/create", "orders/paid", "orders/updated"), _shopify)
