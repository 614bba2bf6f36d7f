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

import json
from collections.abc import Mapping
from typing import Any

from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.providers.adyen.samples import ADYEN as SAMPLES
from connectors.providers.adyen.signature import verify_item
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    ParsedEvent,
    Reply,
    Verdict,
    WebhookRequest,
    iso_time,
    load_json,
    required_id,
    text_or_none,
)

ACCEPTED = Reply(200, b"[accepted]", "text/plain; charset=utf-8")


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


PROVIDER = Provider("adyen", verify=_verify, samples=SAMPLES)
