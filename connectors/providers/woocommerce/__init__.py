"""WooCommerce webhooks, received (``kind = "woocommerce"``): a signed body, an unsigned ping.

Facts, with their sources (WooCommerce's ``WC_Webhook``, woocommerce/woocommerce
``plugins/woocommerce/includes/class-wc-webhook.php``; the REST API's webhook docs,
https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks):

- **Signature.** ``X-WC-Webhook-Signature``: ``base64_encode(hash_hmac('sha256', $body, $secret,
  true))``, the base64 HMAC-SHA256 of the raw body (JSON), keyed with the webhook's "Secret" as
  typed in WooCommerce > Settings > Advanced > Webhooks (used as is; ``generate_signature``).
  Nothing is timed: no window. WooCommerce has no Python library that verifies (the official
  ``woocommerce`` package, 3.0.0, is a REST client).
- **Headers.** Each delivery also carries ``X-WC-Webhook-Topic`` (``order.created``),
  ``X-WC-Webhook-Resource`` (``order``), ``X-WC-Webhook-Event`` (``created``), ``X-WC-Webhook-ID``,
  ``X-WC-Webhook-Source`` and ``X-WC-Webhook-Delivery-ID`` (``deliver``).
- **Ping.** When a webhook is saved active, WooCommerce POSTs the unsigned form body
  ``webhook_id=<N>`` and requires exactly ``200`` back ("Delivery URL returned response code",
  ``deliver_ping``): answered ``200`` as a handshake, never stored. It carries no signature, so
  it proves nothing and stores nothing.
- **Identity.** ``X-WC-Webhook-Delivery-ID`` is ``wp_hash(webhook id . time())``: new for every
  delivery, and the same for two deliveries of one webhook within one second, so it identifies
  neither the event nor the delivery. WooCommerce sends no event id and does not retry (a failed
  delivery counts towards disabling the webhook after 5). The identity is a hash of the topic and
  the body (``woocommerce:<sha256>``): the same content sent again is a duplicate, and two topics
  with the same body (``order.created``, ``order.updated``) stay two events. Type: the topic;
  object: the resource and the body's ``id``; time: ``date_modified_gmt`` (UTC without an offset).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.scheme import Scheme
from connectors.webhooks import Handshake, Reply, Verdict, WebhookRequest

SIGNATURE = "X-WC-Webhook-Signature"
TOPIC = "X-WC-Webhook-Topic"
ID_PREFIX = "woocommerce:"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    event_id="hash",  # of the topic and the body: see identity() (the scheme hashes the body)
    id_prefix=ID_PREFIX,
    event_type=f"header:{TOPIC}",
    object_type="header:X-WC-Webhook-Resource",
    object_id="body:id",
    occurred_at="body:date_modified_gmt",
    delivery_id="header:X-WC-Webhook-Delivery-ID",
    carried=(
        "x-wc-webhook-topic",
        "x-wc-webhook-resource",
        "x-wc-webhook-event",
        "x-wc-webhook-id",
        "x-wc-webhook-source",
        "x-wc-webhook-delivery-id",
        "user-agent",
    ),
)

_PING = re.compile(rb"webhook_id=[0-9]{1,20}")


def identity(topic: str | None, body: bytes) -> str:
    """The event's id: the SHA-256 of the topic, a newline and the raw body."""
    return ID_PREFIX + hashlib.sha256((topic or "").encode() + b"\n" + body).hexdigest()


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    if request.header(SIGNATURE) is None and _PING.fullmatch(request.body.strip()):
        webhook = request.body.strip().decode()
        return Handshake(Reply(200), f"ping ({webhook})")
    verdict = scheme_check.verify(SCHEME, request, secrets, tolerance=options.tolerance_seconds)
    if isinstance(verdict, ParsedEvent):
        topic = request.header(TOPIC)
        return dataclasses.replace(verdict, event_id=identity(topic, request.body))
    return verdict


def _order(number: int, status: str, now: datetime) -> dict[str, Any]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "id": number,
        "parent_id": 0,
        "number": str(number),
        "order_key": f"wc_order_{number:x}",
        "created_via": "checkout",
        "version": "9.4.2",
        "status": status,
        "currency": "USD",
        "date_created": stamp,
        "date_created_gmt": stamp,
        "date_modified": stamp,
        "date_modified_gmt": stamp,
        "discount_total": "0.00",
        "shipping_total": "10.00",
        "total": "29.35",
        "total_tax": "1.35",
        "customer_id": 0,
        "billing": {
            "first_name": "John",
            "last_name": "Doe",
            "address_1": "969 Market",
            "city": "San Francisco",
            "state": "CA",
            "postcode": "94103",
            "country": "US",
            "email": "john.doe@example.com",
        },
        "payment_method": "bacs",
        "payment_method_title": "Direct Bank Transfer",
        "line_items": [
            {
                "id": number + 1,
                "name": "Woo Single #1",
                "product_id": 93,
                "quantity": 2,
                "subtotal": "6.00",
                "total": "6.00",
                "sku": "",
                "price": 3,
            }
        ],
    }


def _product(number: int, now: datetime) -> dict[str, Any]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "id": number,
        "name": "Premium Quality",
        "slug": "premium-quality",
        "type": "simple",
        "status": "publish",
        "date_created": stamp,
        "date_created_gmt": stamp,
        "date_modified": stamp,
        "date_modified_gmt": stamp,
        "sku": "",
        "price": "21.99",
        "regular_price": "21.99",
        "stock_status": "instock",
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    resource, _, event = event_type.partition(".")
    now = datetime.now(UTC)
    number = random.randint(1_000, 999_999_999)  # a fresh order or product: a fresh event
    if resource == "product":
        document = _product(number, now)
    else:
        document = _order(number, "processing" if event == "created" else "completed", now)
    body = compact_json(document)
    headers = {
        "content-type": "application/json",
        "user-agent": "WooCommerce/9.4.2 Hookshot (WordPress/6.7.1)",
        "x-wc-webhook-source": "https://shop.example.com/",
        "x-wc-webhook-topic": event_type,
        "x-wc-webhook-resource": resource,
        "x-wc-webhook-event": event,
        "x-wc-webhook-id": "12",
        "x-wc-webhook-delivery-id": token(32),  # wp_hash(): 32 hex digits
    }
    return Sample(identity(event_type, body), body, headers)


SAMPLES = Catalogue(("order.created", "order.updated", "product.updated"), _sample)

PROVIDER = dataclasses.replace(declared("woocommerce", SCHEME, samples=SAMPLES), verify=verify)
