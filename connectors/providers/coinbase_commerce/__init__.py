"""Coinbase Commerce's webhooks (``kind = "coinbase_commerce"``): ``X-CC-Webhook-Signature``, hex
HMAC-SHA256 of the body.

Facts, each with its source:

- **Signature.** ``X-CC-Webhook-Signature``: "the SHA256 HMAC signature of the raw request payload,
  computed using your webhook shared secret as the key" (Settings > Notifications), hex.
  https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security ;
  https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-overview ("Checking Signatures");
  coinbase-commerce 1.0.1 (coinbase/coinbase-commerce-python, archived)
  ``coinbase_commerce/webhook.py`` ``WebhookSignature._compute_signature`` (``hmac.new(secret
  .encode('utf-8'), msg=payload.encode('utf-8'), digestmod=sha256).hexdigest()``).
- **Time window.** None: nothing signed carries a time. Retries: "exponential backoff for up to
  three days" (webhooks-overview above).
- **Identity.** The body is ``{"id": "<uuid of the webhook event>", "scheduled_for": …,
  "attempt_number": 1, "event": {"id": "<uuid>", "resource": "event", "type": "charge:created",
  "api_version": "2018-03-22", "created_at": "<ISO 8601>", "data": {"id": …, "code": …, …}}}``
  (https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-fields). The event is
  ``event.id`` (the Event resource; a retry, ``attempt_number`` > 1, carries the same one), its type
  ``event.type``, its time ``event.created_at``, the charge ``event.data.id``; the top-level ``id``
  is kept as the delivery id.
- **Handshakes.** None.
- Its events API is read to reconcile: ``connectors.providers.coinbase_commerce.api``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.providers.coinbase_commerce.api import BUDGET, build
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:X-CC-Webhook-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id="body:event.id",
    event_type="body:event.type",
    occurred_at="body:event.created_at",
    object_id="body:event.data.id",
    delivery_id="body:id",
)

_STATUS = {
    "charge:created": "NEW",
    "charge:pending": "PENDING",
    "charge:confirmed": "COMPLETED",
    "charge:failed": "EXPIRED",
}


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _charge(event_type: str, now: datetime) -> dict[str, Any]:
    created = now - timedelta(minutes=5)
    timeline = [{"time": _iso(created), "status": "NEW"}]
    status = _STATUS.get(event_type, "NEW")
    if status != "NEW":
        timeline.append({"time": _iso(now), "status": status})
    return {
        "id": str(uuid.uuid4()),
        "code": token(8).upper(),
        "name": "A sample from hookledger",
        "description": "One sample item",
        "pricing_type": "fixed_price",
        "pricing": {
            "local": {"amount": "1.00", "currency": "USD"},
            "settlement": {"amount": "1", "currency": "USDC"},
        },
        "metadata": {"name": "Sam Sample", "email": "sam@example.com"},
        "timeline": timeline,
        "created_at": _iso(created),
        "expires_at": _iso(created + timedelta(hours=1)),
        "hosted_url": "https://commerce.coinbase.com/pay/" + str(uuid.uuid4()),
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC)
    event_id = str(uuid.uuid4())
    document = {
        "attempt_number": 1,
        "event": {
            "api_version": "2018-03-22",
            "created_at": _iso(now),
            "data": _charge(event_type, now),
            "id": event_id,
            "resource": "event",
            "type": event_type,
        },
        "id": str(uuid.uuid4()),
        "scheduled_for": _iso(now),
    }
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(
    ("charge:confirmed", "charge:created", "charge:pending", "charge:failed"), _sample
)

# its events API, read to reconcile (connectors.providers.coinbase_commerce.api)
PROVIDER = declared("coinbase_commerce", SCHEME, samples=SAMPLES, build=build, budget=BUDGET)
