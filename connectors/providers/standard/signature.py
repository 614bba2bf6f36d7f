"""The event a verified Standard Webhooks delivery holds (identity: the ``webhook-id`` header); the
signature itself is the shared ``connectors.standard_webhooks``, re-exported here for the kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from connectors.parsing import (
    ParsedEvent,
    epoch_time,
    iso_time,
    json_object,
    required_id,
    text_or_none,
)
from connectors.standard_webhooks import standard_key, standard_sign, verify_standard

__all__ = ["parse_standard", "standard_key", "standard_sign", "verify_standard"]

Headers = Mapping[str, str]  # keys lower-cased


def parse_standard(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    msg_id = required_id(headers.get("webhook-id"), "header webhook-id")
    doc = json_object(body)
    data = doc.get("data")
    data = data if isinstance(data, dict) else {}
    event_type = text_or_none(doc.get("type"))
    return ParsedEvent(
        event_id=msg_id,
        delivery_id=msg_id,
        event_type=event_type,
        object_type=text_or_none(data.get("object"))
        or (event_type.split(".", 1)[0] if event_type else None),
        object_id=text_or_none(data.get("id")),
        occurred_at=iso_time(doc.get("timestamp")) or epoch_time(headers.get("webhook-timestamp")),
    )
