"""Shopify's webhook signature and identity: pure functions from (headers, raw body, secrets) to a
verdict, and the event a verified delivery holds.

``X-Shopify-Hmac-Sha256`` signs the raw bytes, so verification happens before any parsing. Each
configured secret is tried (rotation) and each comparison is constant-time. Identity:
``X-Shopify-Webhook-Id`` (kept across retries; ``X-Shopify-Event-Id`` is shared by every topic one
merchant action fires, so it is kept but is not the key). Facts and test vectors:
``docs/providers.md`` and ``tests/fixtures/providers/``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping

from connectors.parsing import ParsedEvent, iso_time, json_object, required_id, text_or_none
from connectors.webhooks import SignatureError, hmac_digest, require_header

Headers = Mapping[str, str]  # keys lower-cased


def shopify_sign(body: bytes, secret: str) -> str:
    return base64.b64encode(hmac_digest(secret.encode(), body)).decode()


def verify_shopify(headers: Headers, body: bytes, secrets: Iterable[str]) -> None:
    """``X-Shopify-Hmac-Sha256``: base64 HMAC-SHA256 of the raw body, compared decoded."""
    header = require_header(headers, "X-Shopify-Hmac-Sha256")
    try:
        given = base64.b64decode(header, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("X-Shopify-Hmac-Sha256 is not valid base64") from None
    for secret in secrets:
        if hmac.compare_digest(hmac_digest(secret.encode(), body), given):
            return
    raise SignatureError("X-Shopify-Hmac-Sha256 does not match")


def parse_shopify(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    webhook_id = required_id(headers.get("x-shopify-webhook-id"), "header X-Shopify-Webhook-Id")
    topic = headers.get("x-shopify-topic")
    doc = json_object(body)
    resource = topic.split("/", 1)[0] if topic else None
    object_type = resource[:-1] if resource and resource.endswith("s") else resource
    return ParsedEvent(
        event_id=webhook_id,
        delivery_id=webhook_id,
        event_type=topic,
        object_type=object_type,
        object_id=text_or_none(doc.get("id")),
        occurred_at=iso_time(headers.get("x-shopify-triggered-at")),
        api_version=headers.get("x-shopify-api-version"),
    )
