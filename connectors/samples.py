"""Realistic sample deliveries for ``hookledger send``: what each provider sends for an event type,
shaped after its documented examples (the fixtures in ``tests/fixtures/providers/``), each with a
fresh identity so that every one sent is a new event.

A sample is unsigned where the provider signs in headers (``Provider.sign`` signs it, exactly as a
stored delivery is signed again); Adyen signs inside each item, so its sample is signed here with
the source's HMAC key. Discord (only Discord holds the private key) and GoPay (a notification is
confirmed against GoPay's own API) have none.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlencode

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions
from connectors.shopify_base import delivery_identity


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


# -- Stripe ------------------------------------------------------------------------------------


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
    from connectors.stripe import StripeKeys

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


# -- GitHub ------------------------------------------------------------------------------------


def _github(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event, _, action = event_type.partition(".")
    repository = {"id": 1296269, "full_name": "octocat/Hello-World", "private": False}
    payload: dict[str, Any] = {"repository": repository, "sender": {"login": "octocat"}}
    if event == "push":
        payload |= {
            "ref": "refs/heads/main",
            "before": "0" * 40,
            "after": (uuid.uuid4().hex * 2)[:40],
        }
    elif event == "ping":
        payload |= {"zen": "Design for failure.", "hook_id": 1}
    else:
        number = int(time.time()) % 100_000
        item = {"id": number + 1_000_000, "number": number, "title": "A sample from hookledger"}
        payload |= {"action": action or "opened", event: item}
    delivery = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": delivery,
        "x-github-hook-id": "1",
    }
    return Sample(delivery, _json(payload), headers)


GITHUB = Catalogue(
    ("push", "issues.opened", "pull_request.opened", "issue_comment.created", "ping"), _github
)


# -- Shopify -----------------------------------------------------------------------------------


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


# -- Standard Webhooks and generic senders --------------------------------------------------------


def _standard(options: SourceOptions, event_type: str, secret: str) -> Sample:
    msg_id = f"msg_{_token()}"
    document = {
        "type": event_type,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "data": {"id": f"obj_{_token(12)}", "status": "active"},
    }
    headers = {"content-type": "application/json", "webhook-id": msg_id}
    return Sample(msg_id, _json(document), headers)


STANDARD = Catalogue(("invoice.paid", "user.created", "subscription.updated"), _standard)


def _put(document: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (``meta.id``, ``$.meta.id``) in a JSON object, making the objects on it."""
    steps = [s for s in path.removeprefix("$").strip(".").split(".") if s]
    here = document
    for step in steps[:-1]:
        here = here.setdefault(step, {})
    if steps:
        here[steps[-1]] = value


def _generic(options: SourceOptions, event_type: str, secret: str) -> Sample:
    from connectors.generic_scheme import GenericKeys

    keys = options.own(GenericKeys)
    event_id = f"evt_{_token()}"
    document: dict[str, Any] = {"data": {"id": f"obj_{_token(12)}", "status": "active"}}
    headers = {"content-type": "application/json"}
    if keys.id_json_path:
        _put(document, keys.id_json_path, event_id)
    if keys.id_header:
        headers[keys.id_header.lower()] = event_id
    if keys.type_json_path:
        _put(document, keys.type_json_path, event_type)
    if keys.type_header:
        headers[keys.type_header.lower()] = event_type
    return Sample(event_id, _json(document), headers)


GENERIC = Catalogue(("order.created", "order.updated"), _generic)


# -- Slack, Twilio, Adyen -----------------------------------------------------------------------


def _slack(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event_id = f"Ev{_token(10).upper()}"
    event: dict[str, Any] = {"type": event_type, "channel": "C0SAMPLE", "user": "U0SAMPLE"}
    if event_type == "message":
        event |= {"text": "A sample from hookledger", "ts": f"{time.time():.6f}"}
    elif event_type == "reaction_added":
        event |= {"reaction": "thumbsup", "item": {"type": "message", "channel": "C0SAMPLE"}}
    document = {
        "token": "unused",
        "team_id": "T0SAMPLE",
        "api_app_id": "A0SAMPLE",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }
    return Sample(event_id, _json(document), {"content-type": "application/json"})


SLACK = Catalogue(("message", "app_mention", "reaction_added"), _slack)


def _twilio(options: SourceOptions, event_type: str, secret: str) -> Sample:
    kind, _, status = event_type.partition(".")
    prefix = "Call" if kind == "call" else "Message"
    sid = ("CA" if prefix == "Call" else "SM") + uuid.uuid4().hex
    fields = {
        "AccountSid": "AC" + uuid.UUID(int=0).hex,
        f"{prefix}Sid": sid,
        f"{prefix}Status": status or "delivered",
        "To": "+15005550006",
        "From": "+15005550001",
        "ApiVersion": "2010-04-01",
    }
    if prefix == "Call":  # a call's status callback says so (an incoming call does not)
        fields |= {
            "CallbackSource": "call-progress-events",
            "SequenceNumber": "0",
            "Timestamp": format_datetime(datetime.now(UTC), usegmt=False),
        }
    body = urlencode(fields).encode()
    headers = {"content-type": "application/x-www-form-urlencoded"}
    return Sample(f"{sid}:{fields[f'{prefix}Status']}", body, headers)


TWILIO = Catalogue(
    (
        "message.delivered",
        "message.sent",
        "message.undelivered",
        "message.failed",
        "call.completed",
    ),
    _twilio,
)


def _adyen(options: SourceOptions, event_type: str, secret: str) -> Sample:
    from connectors.adyen import adyen_sign

    code, _, outcome = event_type.partition(".")
    item: dict[str, Any] = {
        "pspReference": str(int(time.time() * 1000) * 1000 + int(_token(3), 16) % 1000),
        "originalReference": "",
        "merchantAccountCode": "ExampleMerchantECOM",
        "merchantReference": f"order-{_token(6)}",
        "amount": {"value": 4200, "currency": "EUR"},
        "eventCode": code,
        "eventDate": datetime.now(UTC).isoformat(timespec="seconds"),
        "success": "false" if outcome == "failed" else "true",
        "paymentMethod": "visa",
        "additionalData": {},
    }
    item["additionalData"]["hmacSignature"] = adyen_sign(item, secret)
    document = {"live": "false", "notificationItems": [{"NotificationRequestItem": item}]}
    event_id = f"{item['pspReference']}:{code}:{item['success']}"
    return Sample(event_id, _json(document), {"content-type": "application/json"})


ADYEN = Catalogue(("AUTHORISATION", "AUTHORISATION.failed", "CAPTURE", "REFUND"), _adyen)
