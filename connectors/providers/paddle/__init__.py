"""Paddle Billing's webhooks (``kind = "paddle"``): ``Paddle-Signature: ts=…;h1=…``, 5 seconds.

Facts, each with its source:

- **Signature.** Every webhook carries ``Paddle-Signature: ts=<unix>;h1=<hex>``: HMAC-SHA256, hex,
  keyed with the notification destination's secret key as written (``pdl_ntfset_…``, used as UTF-8
  bytes, not decoded), over ``{ts}:{raw body}``. Several ``h1`` may be sent (any may match).
  https://developer.paddle.com/webhooks/about/signature-verification ("extract ts and h1 from the
  header, concatenate ts:rawBody, compute HMAC-SHA256 with your secret key, and compare the result
  to h1"); paddle-python-sdk 1.16.1 ``paddle_billing/Notifications/PaddleSignature.py``
  (``parse`` splits on ``;``, collects every ``h1``; ``__do_verify`` signs ``f"{timestamp}:{raw_body}"``
  with ``secret_key.encode("utf-8")``).
- **Time window.** "The SDK helper methods enforce a five-second timestamp tolerance by default to
  protect against replay attacks; manual implementations should apply the same check" (same page);
  ``Verifier(maximum_variance=5)`` refuses a ``ts`` more than 5 s old or 5 s ahead. hookledger's
  default ``tolerance_seconds`` for a ``paddle`` source is therefore 5.
- **Identity.** The body is ``{"event_id": "evt_…", "event_type": "customer.created",
  "occurred_at": "<ISO 8601>", "notification_id": "ntf_…", "data": {…}}`` (paddle-python-sdk
  ``examples/_fixtures/webhook_payload.json``, ``tests/Unit/Notification/_fixtures/``):
  the event is ``event_id``, its type ``event_type``, its time ``occurred_at``, the delivery
  ``notification_id`` (one per destination), the object ``data.id``.
- **Handshakes.** None.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.providers.paddle.api import BUDGET, build
from connectors.scheme import Scheme, SignatureList

SCHEME = Scheme(
    signatures=("header:Paddle-Signature",),
    signed="{timestamp}:{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    listed=SignatureList(key="h1", separator=";", pair="="),
    timestamp="list:ts",
    time_format="unix",
    tolerance=5,
    event_id="body:event_id",
    event_type="body:event_type",
    occurred_at="body:occurred_at",
    object_id="body:data.id",
    delivery_id="body:notification_id",
)


def _ulid() -> str:
    """A Paddle-shaped id tail (26 lower-case characters)."""
    return token(26)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _data(event_type: str, now: str) -> dict[str, Any]:
    if event_type.startswith("customer."):
        return {
            "id": f"ctm_{_ulid()}",
            "name": "Sam Sample",
            "email": "sam@example.com",
            "locale": "en",
            "status": "active",
            "created_at": now,
            "updated_at": now,
            "custom_data": None,
            "import_meta": None,
            "marketing_consent": False,
        }
    if event_type.startswith("subscription."):
        return {
            "id": f"sub_{_ulid()}",
            "status": "active",
            "customer_id": f"ctm_{_ulid()}",
            "currency_code": "USD",
            "billing_cycle": {"interval": "month", "frequency": 1},
            "created_at": now,
            "updated_at": now,
            "custom_data": None,
        }
    return {
        "id": f"txn_{_ulid()}",
        "status": "completed",
        "customer_id": f"ctm_{_ulid()}",
        "currency_code": "USD",
        "origin": "web",
        "details": {"totals": {"subtotal": "1000", "tax": "200", "total": "1200"}},
        "created_at": now,
        "updated_at": now,
        "custom_data": None,
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = _now_iso()
    event_id = f"evt_{_ulid()}"
    document = {
        "data": _data(event_type, now),
        "event_id": event_id,
        "event_type": event_type,
        "occurred_at": now,
        "notification_id": f"ntf_{_ulid()}",
    }
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("transaction.completed", "customer.created", "subscription.created"), _sample)

PROVIDER = declared("paddle", SCHEME, samples=SAMPLES, build=build, budget=BUDGET)
