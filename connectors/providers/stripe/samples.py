"""Realistic sample Stripe deliveries for ``hookledger send``: v1 events (snapshot payloads) or v2
thin events, as the source's ``payload_style`` says, shaped after Stripe's documented examples
(the fixtures in ``tests/fixtures/providers/``), each with a fresh identity. Unsigned:
``PROVIDER.sign`` adds ``Stripe-Signature``.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions
from connectors.providers.stripe.keys import StripeKeys


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


def _stripe_object(event_type: str, now: int) -> dict[str, Any]:
    kind = event_type.rsplit(".", 1)[0]
    if kind == "invoice":
        paid = event_type == "invoice.paid"
        return {
            "id": f"in_{_token()}",
            "object": "invoice",
            "amount_due": 4200,
            "amount_paid": 4200 if paid else 0,
            "amount_remaining": 0 if paid else 4200,
            "currency": "eur",
            "customer": f"cus_{_token(14)}",
            "status": "paid" if paid else "open",
            "paid": paid,
            "created": now,
            "livemode": False,
        }
    if kind == "charge":
        return {
            "id": f"ch_{_token()}",
            "object": "charge",
            "amount": 4200,
            "currency": "eur",
            "paid": True,
            "status": "succeeded",
            "created": now,
            "livemode": False,
        }
    if kind == "checkout.session":
        return {
            "id": f"cs_test_{_token()}",
            "object": "checkout.session",
            "amount_total": 4200,
            "currency": "eur",
            "payment_status": "paid",
            "status": "complete",
            "created": now,
            "livemode": False,
        }
    return {"id": f"cus_{_token(14)}", "object": "customer", "created": now, "livemode": False}


def _stripe_thin(event_type: str) -> Sample:
    """A v2 thin event, as an event destination with thin payloads sends it: the object by
    reference only (https://docs.stripe.com/event-destinations#thin-events)."""
    event_id = f"evt_test_{_token()}"
    kind = event_type.rsplit(".", 1)[0]
    object_id = _stripe_object(event_type, int(time.time()))["id"]
    event = {
        "id": event_id,
        "object": "v2.core.event",
        "type": f"v1.{event_type}",
        "livemode": False,
        "created": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "related_object": {
            "id": object_id,
            "type": kind,
            "url": f"/v1/{kind.replace('.', '/')}s/{object_id}",
        },
    }
    return Sample(event_id, _json(event), {"content-type": "application/json"})


def _stripe(options: SourceOptions, event_type: str, secret: str) -> Sample:
    if options.own(StripeKeys).payload_style == "thin":
        return _stripe_thin(event_type)
    now = int(time.time())
    event_id = f"evt_test_{_token()}"
    event = {
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": now,
        "type": event_type,
        "data": {"object": _stripe_object(event_type, now)},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{_token(14)}", "idempotency_key": str(uuid.uuid4())},
    }
    return Sample(event_id, _json(event), {"content-type": "application/json"})


STRIPE = Catalogue(
    (
        "invoice.paid",
        "invoice.payment_failed",
        "charge.succeeded",
        "checkout.session.completed",
        "customer.created",
    ),
    _stripe,
)
