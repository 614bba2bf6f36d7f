"""Adyen's standard webhooks, received (``kind = "adyen"``): a delivery that holds a batch of
``NotificationRequestItem``s, each signed on its own, acknowledged with ``[accepted]``.

Facts (docs/providers.md "Adyen", with sources):

- The body is ``{"live": "false", "notificationItems": [{"NotificationRequestItem": {...}}, ...]}``.
- Each item carries ``additionalData.hmacSignature``: base64 of HMAC-SHA256, keyed with the HMAC key
  (hex, from the Customer Area), over ``pspReference:originalReference:merchantAccountCode:
  merchantReference:value:currency:eventCode:success`` (an absent field as an empty string), as the
  Adyen library's ``Adyen.util.generate_notification_sig`` computes it.
- Adyen expects ``[accepted]`` in a 200 answer; until then it sends the batch again.
- An item's identity: its ``pspReference``, ``eventCode`` and ``success`` (an AUTHORISATION that failed
  and one that succeeded are two events; a resent item is a duplicate).

One item that does not verify refuses the whole delivery (401 naming it), so nothing is half-stored:
Adyen resends the batch.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

from connectors import samples
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    ParsedEvent,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    hmac_digest,
    iso_time,
    load_json,
    required_id,
    same_digest,
    text_or_none,
)

SIGNED_FIELDS = (
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "value",
    "currency",
    "eventCode",
    "success",
)
ACCEPTED = Reply(200, b"[accepted]", "text/plain; charset=utf-8")


def _signed_text(item: Mapping[str, Any]) -> str:
    amount = item.get("amount")
    amount = amount if isinstance(amount, Mapping) else {}
    values = {**item, "value": amount.get("value", ""), "currency": amount.get("currency", "")}
    return ":".join("" if values.get(k) is None else str(values.get(k)) for k in SIGNED_FIELDS)


def adyen_sign(item: Mapping[str, Any], hex_key: str) -> str:
    """An item's ``additionalData.hmacSignature`` as Adyen computes it."""
    try:
        key = binascii.unhexlify(hex_key.strip())
    except (binascii.Error, ValueError):
        raise SignatureError("the Adyen HMAC key is not hexadecimal") from None
    try:
        signed = _signed_text(item).encode()
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text Adyen could have signed
        raise SignatureError("a signed field is not UTF-8 text (a lone surrogate)") from None
    return base64.b64encode(hmac_digest(key, signed)).decode()


def verify_item(item: Mapping[str, Any], secrets: Iterable[str], where: str) -> None:
    extra = item.get("additionalData")
    given = extra.get("hmacSignature") if isinstance(extra, Mapping) else None
    if not isinstance(given, str) or not given:
        raise SignatureError(f"{where} has no additionalData.hmacSignature")
    for secret in secrets:
        if same_digest(adyen_sign(item, secret), given):
            return
    raise SignatureError(f"{where}: additionalData.hmacSignature does not match")


def items_of(body: bytes) -> list[dict[str, Any]]:
    document = load_json(body, required=True)
    listed = document.get("notificationItems") if isinstance(document, dict) else None
    if not isinstance(listed, list) or not listed:
        raise BadPayload("body has no notificationItems")
    items = []
    for n, wrapper in enumerate(listed):
        item = wrapper.get("NotificationRequestItem") if isinstance(wrapper, dict) else None
        if not isinstance(item, dict):
            raise BadPayload(f"notification item {n} has no NotificationRequestItem")
        items.append(item)
    return items


def parse_item(item: Mapping[str, Any], where: str) -> ParsedEvent:
    psp = required_id(item.get("pspReference"), f"{where} pspReference")
    code = text_or_none(item.get("eventCode"))
    success = text_or_none(item.get("success"))
    if not code or success not in ("true", "false"):
        raise BadPayload(f"{where} has no eventCode or no success true/false")
    return ParsedEvent(
        event_id=required_id(f"{psp}:{code}:{success}", f"{where} identity"),
        event_type=code if success == "true" else f"{code}.failed",
        object_type="payment",
        object_id=text_or_none(item.get("originalReference")) or psp,
        occurred_at=iso_time(item.get("eventDate")),
    )


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    items = items_of(request.body)
    batch = []
    for n, item in enumerate(items):
        where = f"notification item {n}"
        verify_item(item, secrets, where)
        body = json.dumps({"NotificationRequestItem": item}, separators=(",", ":")).encode()
        batch.append(BatchItem(parse_item(item, where), body))
    return Batch(tuple(batch), ACCEPTED)


PROVIDER = Provider("adyen", verify=_verify, samples=samples.ADYEN)
