"""Razorpay's webhooks (``kind = "razorpay"``): ``X-Razorpay-Signature``, hex HMAC-SHA256 of the body.

Facts, each with its source:

- **Signature.** ``X-Razorpay-Signature``: hex HMAC-SHA256 of the raw body, keyed with the webhook
  secret chosen when the webhook was set up (as written, UTF-8; not the API key secret).
  https://razorpay.com/docs/webhooks/validate-test/ ; https://razorpay.com/docs/webhooks/faqs/
  ("The webhook secret does not need to be the merchant secret key", "do not parse or cast the
  webhook request body"); razorpay 2.0.1 ``razorpay/utility/utility.py``
  ``verify_webhook_signature`` → ``verify_signature`` (``hmac.new(key, body, sha256).hexdigest()``,
  ``hmac.compare_digest``).
- **Rotation.** "If you have changed your webhook secret, remember to use the old secret for webhook
  signature validation while retrying older requests" (faqs above): keep both secrets, comma-separated.
- **Time window.** None: Razorpay signs no time.
- **Identity.** ``x-razorpay-event-id`` header: the event's id, the same on every retry ("There could
  be scenarios where your endpoint might receive the same webhook event multiple times", handled
  with that id: https://razorpay.com/docs/webhooks/best-practices/). The body is ``{"entity":
  "event", "account_id": "acc_…", "event": "payment.captured", "contains": ["payment"],
  "payload": {"payment": {"entity": {"id": "pay_…", …}}}, "created_at": <unix>}`` (razorpay-python
  ``tests/mocks/fake_payment_authorized_webhook.json``): type ``event``, time ``created_at``. The
  object is ``payload.<kind>.entity``, the kind being the event type's first word (``order.paid``
  contains a payment and its order: the order), else ``contains[0]``: read here, a path the scheme
  cannot write (it depends on the event).
- **Handshakes.** None.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import json_path_get, load_json, text_or_none
from connectors.scheme import Scheme
from connectors.webhooks import ParsedEvent, Verdict, WebhookRequest

EVENT_ID = "x-razorpay-event-id"

SCHEME = Scheme(
    signatures=("header:X-Razorpay-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id=f"header:{EVENT_ID}",
    event_type="body:event",
    occurred_at="body:created_at",
    object_type="body:contains.0",
    carried=(EVENT_ID,),
)


def _object(body: bytes, event_type: str | None, listed: str | None) -> tuple[str, str] | None:
    """The event's object and its id: ``payload.<kind>.entity.id``, the kind being the event
    type's first word (``order.paid`` carries a payment and its order: the order), else the first
    of ``contains``."""
    document = load_json(body, required=False)
    kinds = [k for k in ((event_type or "").split(".", 1)[0], listed) if k]
    for kind in kinds:
        found = text_or_none(json_path_get(document, f"payload.{kind}.entity.id"))
        if found is not None:
            return kind, found
    return None


def _razorpay_id() -> str:
    """A Razorpay-shaped id tail (14 characters)."""
    return token(14)


def _entity(kind: str, now: int) -> dict[str, Any]:
    if kind == "payment":
        return {
            "id": f"pay_{_razorpay_id()}",
            "entity": "payment",
            "amount": 50000,
            "currency": "INR",
            "status": "captured",
            "order_id": f"order_{_razorpay_id()}",
            "method": "upi",
            "captured": True,
            "email": "sam@example.com",
            "contact": "+919999999999",
            "notes": {},
            "created_at": now,
        }
    if kind == "order":
        return {
            "id": f"order_{_razorpay_id()}",
            "entity": "order",
            "amount": 50000,
            "amount_paid": 50000,
            "amount_due": 0,
            "currency": "INR",
            "receipt": f"rcpt_{token(8)}",
            "status": "paid",
            "attempts": 1,
            "notes": {},
            "created_at": now,
        }
    return {
        "id": f"rfnd_{_razorpay_id()}",
        "entity": "refund",
        "amount": 50000,
        "currency": "INR",
        "payment_id": f"pay_{_razorpay_id()}",
        "status": "processed",
        "speed_processed": "normal",
        "notes": {},
        "created_at": now,
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = int(time.time())
    kind = event_type.split(".", 1)[0]
    contains = ["payment", "order"] if kind == "order" else [kind]
    event_id = _razorpay_id()
    document = {
        "entity": "event",
        "account_id": "acc_BFQ7uQEaa7j2z7",
        "event": event_type,
        "contains": contains,
        "payload": {k: {"entity": _entity(k, now)} for k in contains},
        "created_at": now,
    }
    headers = {"content-type": "application/json", EVENT_ID: event_id}
    return Sample(event_id, compact_json(document), headers)


SAMPLES = Catalogue(("payment.captured", "order.paid", "refund.processed"), _sample)

_DECLARED = declared("razorpay", SCHEME, samples=SAMPLES)


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    """The scheme's verdict, with the event's object id read where its type says."""
    verdict = _DECLARED.verify(options, request, secrets)
    if isinstance(verdict, ParsedEvent):
        found = _object(request.body, verdict.event_type, verdict.object_type)
        if found is not None:
            return dataclasses.replace(verdict, object_type=found[0], object_id=found[1])
    return verdict


PROVIDER = dataclasses.replace(_DECLARED, verify=verify)
