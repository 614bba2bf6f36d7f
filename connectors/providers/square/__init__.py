"""Square's webhooks (``kind = "square"``): ``x-square-hmacsha256-signature``, over URL + body.

Facts, each with its source:

- **Signature.** ``x-square-hmacsha256-signature``: base64 HMAC-SHA256, keyed with the
  subscription's signature key as written (UTF-8 bytes), over the notification URL exactly as
  configured in the subscription followed by the raw body (``{url}{body}``).
  https://developer.squareup.com/docs/webhooks/step3validate ("Validate that the notification is
  from Square"); squareup 46.0.0.20260916 ``square/utils/webhooks_helper.py`` ``verify_signature``
  (``payload = notification_url + request_body``, ``base64.b64encode(hmac…sha256…digest())``).
  So the URL matters: behind a proxy, ``[receiver] public_url`` must give back the URL Square was
  given, byte for byte (scheme, host, path, query, trailing slash).
- **Older header.** ``x-square-signature`` (HMAC-SHA1 over the same bytes) is Square's legacy
  header; Square's SDK checks only the SHA-256 one, and so does hookledger.
- **Time window.** None: Square signs no time (``square-initial-delivery-timestamp`` is sent but not
  signed), so replays are caught by the event id alone.
- **Identity.** ``{"merchant_id": …, "type": "payment.updated", "event_id": "<uuid>",
  "created_at": "<ISO 8601>", "data": {"type": "payment", "id": …, "object": {…}}}``
  (squareup ``tests/integration/test_webhooks_helper.py``; https://developer.squareup.com/docs/
  webhooks/step2subscribe): the event is ``event_id`` (a retry carries the same one), its type
  ``type``, its time ``created_at``, the object ``data.type`` / ``data.id``.
- **Handshakes.** None.
- **Reconciliation.** Square's Events API (``POST /v2/events``): :mod:`connectors.providers.square.api`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.providers.square.api import BUDGET, build
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:x-square-hmacsha256-signature",),
    signed="{url}{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    event_id="body:event_id",
    event_type="body:type",
    occurred_at="body:created_at",
    object_type="body:data.type",
    object_id="body:data.id",
)

_MERCHANT = "MLEFBHHSJGVHD"
_LOCATION = "L88917AVBK2S5"


def _square_id() -> str:
    """A Square-shaped object id (29 characters)."""
    return token(29).upper()


def _object(kind: str, object_id: str, now: str) -> dict[str, Any]:
    money = {"amount": 1200, "currency": "USD"}
    if kind == "payment":
        return {
            "payment": {
                "id": object_id,
                "created_at": now,
                "updated_at": now,
                "amount_money": money,
                "total_money": money,
                "status": "COMPLETED",
                "source_type": "CARD",
                "location_id": _LOCATION,
                "order_id": _square_id(),
                "version_token": token(32),
            }
        }
    if kind == "refund":
        return {
            "refund": {
                "id": object_id,
                "created_at": now,
                "updated_at": now,
                "amount_money": money,
                "status": "PENDING",
                "location_id": _LOCATION,
                "payment_id": _square_id(),
            }
        }
    return {
        "customer": {
            "id": object_id,
            "created_at": now,
            "updated_at": now,
            "given_name": "Sam",
            "family_name": "Sample",
            "email_address": "sam@example.com",
            "version": 0,
        }
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    kind = event_type.split(".", 1)[0]
    object_id = _square_id()
    event_id = str(uuid.uuid4())
    document = {
        "merchant_id": _MERCHANT,
        "type": event_type,
        "event_id": event_id,
        "created_at": now,
        "data": {"type": kind, "id": object_id, "object": _object(kind, object_id, now)},
    }
    headers = {"content-type": "application/json", "square-initial-delivery-timestamp": now}
    return Sample(event_id, compact_json(document), headers)


SAMPLES = Catalogue(("payment.updated", "refund.created", "customer.created"), _sample)

PROVIDER = declared("square", SCHEME, samples=SAMPLES, build=build, budget=BUDGET)
