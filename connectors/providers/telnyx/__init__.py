"""Telnyx's webhooks (API v2, ``kind = "telnyx"``): Ed25519-signed, checked with the account's key.

Facts, each with its source:

- Each request carries ``telnyx-signature-ed25519`` (base64, 64 bytes) and ``telnyx-timestamp``
  (Unix seconds); the signed message is ``{timestamp}|{raw body}``, checked with the account's
  Ed25519 public key, base64 (32 bytes) as Mission Control shows it ("Keys & Credentials" → "Public
  Key"): a configuration value, ``public_key``, not a secret
  (https://developers.telnyx.com/docs/development/sdk/python/webhooks,
  https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks). The official library
  ``telnyx`` (4.189.0, ``telnyx/lib/webhook_verification.py``: ``SIGNATURE_HEADER``,
  ``TIMESTAMP_HEADER``, ``f"{timestamp_header}|{payload_str}"``) is the reference the tests check
  both ways.
- Time window: the library refuses a timestamp more than ``TIMESTAMP_TOLERANCE_SECONDS = 300`` from
  now, either way (``abs(current_time - webhook_time)``): the same here, ``tolerance_seconds`` 300.
- A delivery is ``{"data": {"record_type": "event", "id", "event_type", "occurred_at", "payload":
  {…}}, "meta": {"attempt", "delivered_to"}}``: ``data.id`` is the event's id (a retry, ``meta.attempt``
  2, 3, …, carries the same), ``data.event_type`` its type (``message.sent``, ``message.finalized``,
  ``message.received``, ``call.initiated``, …), ``data.occurred_at`` its ISO 8601 time; the resource is
  ``data.payload`` (``record_type`` and ``id``)
  (https://developers.telnyx.com/api-reference/callbacks/delivery-update,
  https://developers.telnyx.com/api-reference/callbacks/inbound-message).
- No handshake. Signed with Telnyx's private key: hookledger cannot sign a delivery (``sign`` is
  None); the samples are unsigned.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme

SIGNATURE = "telnyx-signature-ed25519"
TIMESTAMP = "telnyx-timestamp"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{timestamp}|{body}",
    algorithm="ed25519",
    encoding="base64",
    timestamp=f"header:{TIMESTAMP}",
    tolerance=300,
    event_id="body:data.id",
    event_type="body:data.event_type",
    occurred_at="body:data.occurred_at",
    object_type="body:data.payload.record_type",
    object_id="body:data.payload.id",
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event_id = str(uuid.uuid4())
    outbound = event_type != "message.received"
    ours = {"phone_number": "+18445550001", "carrier": "TELNYX LLC", "line_type": "VoIP"}
    theirs = {
        "phone_number": "+18665550001",
        "carrier": "T-MOBILE USA, INC.",
        "line_type": "Wireless",
    }
    status = {"message.sent": "sent", "message.finalized": "delivered"}.get(event_type, "delivered")
    payload: dict[str, Any] = {
        "record_type": "message",
        "direction": "outbound" if outbound else "inbound",
        "id": str(uuid.uuid4()),
        "type": "SMS",
        "messaging_profile_id": "4000eba1-a0c0-4563-9925-b25e842a7cb6",
        "organization_id": "b448f9cc-a842-4784-98e9-03c1a5872950",
        "from": ours if outbound else theirs,
        "to": [{**(theirs if outbound else ours), "status": status}],
        "cc": [],
        "text": "Hello, World!",
        "media": [],
        "encoding": "GSM-7",
        "parts": 1,
        "tags": ["sample"],
        "cost": {"amount": "0.0051", "currency": "USD"},
        "received_at": _now(),
        "webhook_url": "https://www.example.com/hooks",
    }
    if outbound:
        payload |= {"sent_at": _now(), "errors": []}
    if event_type == "message.finalized":
        payload["completed_at"] = _now()
    document = {
        "data": {
            "record_type": "event",
            "id": event_id,
            "event_type": event_type,
            "occurred_at": _now(),
            "payload": payload,
        },
        "meta": {"attempt": 1, "delivered_to": "https://www.example.com/hooks"},
    }
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("message.sent", "message.finalized", "message.received"), _sample)

PROVIDER: Provider = declared(
    "telnyx",
    SCHEME,
    # none for `hookledger send`: only Telnyx holds the private key (SAMPLES serve the tests)
    # phone numbers and message text, as for Twilio
    personal_fields=("from", "to", "cc", "text", "subject"),
)
