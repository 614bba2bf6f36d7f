"""Stripe's webhook signature and identity: pure functions from (headers, raw body, secrets, clock) to
a verdict, and the event a verified delivery holds.

``Stripe-Signature`` signs the raw bytes, so verification happens before any parsing. Each configured
secret is tried (rotation) and each comparison is constant-time. Identity: the body's ``id``.
Facts and test vectors: ``docs/providers.md`` and ``tests/fixtures/providers/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from connectors.parsing import (
    BadPayload,
    ParsedEvent,
    epoch_time,
    json_path_get,
    load_json,
    required_id,
    text_or_none,
)
from connectors.webhooks import (
    SignatureError,
    check_timestamp,
    hmac_digest,
    require_header,
    same_digest,
)

Headers = Mapping[str, str]  # keys lower-cased


def stripe_sign(body: bytes, secret: str, timestamp: int) -> str:
    """The ``Stripe-Signature`` header value Stripe would send (for tests and the sandbox)."""
    digest = hmac_digest(secret.encode(), f"{timestamp}.".encode() + body).hex()
    return f"t={timestamp},v1={digest}"


def verify_stripe(
    headers: Headers, body: bytes, secrets: Iterable[str], *, now: float, tolerance: int = 300
) -> None:
    """``Stripe-Signature: t=..,v1=..[,v1=..]``: hex HMAC-SHA256 of ``{t}.{body}``, key = secret as is.

    Like stripe-python (``stripe/_webhook.py``): only ``v1`` counts, any ``v1`` may match, only an old
    timestamp is rejected (Stripe's SDK does not reject future ones).
    """
    header = require_header(headers, "Stripe-Signature")
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise SignatureError("Stripe-Signature has a malformed timestamp") from None
        elif key == "v1":
            candidates.append(value)
    if timestamp is None:
        raise SignatureError("Stripe-Signature has no timestamp")
    if not candidates:
        raise SignatureError("Stripe-Signature has no v1 signature")
    signed = f"{timestamp}.".encode() + body
    for secret in secrets:
        expected = hmac_digest(secret.encode(), signed).hex()
        if any(same_digest(expected, c) for c in candidates):
            check_timestamp(timestamp, now, tolerance, reject_future=False)
            return
    raise SignatureError("Stripe-Signature does not match")


def _request_id(request: Any) -> str | None:
    """Stripe's ``request``: ``{"id": "req_…", "idempotency_key": …}``; API versions before
    2017-05-25 sent the id as a string."""
    if isinstance(request, str):
        return request or None
    return text_or_none(request.get("id")) if isinstance(request, Mapping) else None


def parse_stripe(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    doc = load_json(body, required=True)
    if not isinstance(doc, dict):
        raise BadPayload("body is not a JSON object")
    if doc.get("object") == "v2.core.event":  # a thin event: its object by reference only
        related = doc.get("related_object")
        related = related if isinstance(related, dict) else {}
        object_type, object_id = text_or_none(related.get("type")), text_or_none(related.get("id"))
    else:
        obj = json_path_get(doc, "data.object")
        obj = obj if isinstance(obj, dict) else {}
        object_type, object_id = text_or_none(obj.get("object")), text_or_none(obj.get("id"))
    return ParsedEvent(
        event_id=required_id(doc.get("id"), "body field id"),
        event_type=text_or_none(doc.get("type")),
        object_type=object_type,
        object_id=object_id,
        occurred_at=epoch_time(doc.get("created")),
        api_version=text_or_none(doc.get("api_version")),
        account=text_or_none(doc.get("account")),
        request_id=_request_id(doc.get("request")),
    )
