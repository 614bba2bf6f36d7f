"""SendGrid's Event Webhook (``kind = "sendgrid"``): ECDSA-signed batches of events.

Facts, each with its source:

- With the Signed Event Webhook on, SendGrid generates an ECDSA key pair, signs each POST with the
  private key and sends ``X-Twilio-Email-Event-Webhook-Signature`` (base64 of the DER signature) and
  ``X-Twilio-Email-Event-Webhook-Timestamp``; the receiver verifies with the public key the console
  shows (base64 of the DER ``SubjectPublicKeyInfo``, P-256): ``public_key``, a configuration value
  (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
- The signed message is the timestamp followed by the raw body, ECDSA with SHA-256: the official
  library ``sendgrid`` (6.12.5, ``sendgrid/helpers/eventwebhook/__init__.py``:
  ``timestamped_payload = (timestamp + payload).encode('utf-8')``, ``ec.ECDSA(hashes.SHA256())``,
  the key loaded as PEM around the console's base64), which the tests check both ways.
- Time window: neither the documentation nor the library checks the timestamp or names a window;
  hookledger refuses one more than ``tolerance_seconds`` away, 300 s by default (our choice, as for
  other timed schemes; ``0`` turns it off).
- The body is a JSON **array** of events, each ``{"email", "timestamp", "event", "sg_event_id",
  "sg_message_id", …}``: ``sg_event_id`` is the event's unique id, ``event`` its type
  (``processed``, ``delivered``, ``open``, ``click``, ``bounce``, …), ``timestamp`` its Unix time,
  ``sg_message_id`` the message (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event).
  Each event is stored on its own identity (a :class:`Batch`); an empty array is answered 200 and
  stores nothing.
- No handshake. Signed with SendGrid's private key: hookledger cannot sign a delivery (``sign`` is
  None); the samples are unsigned.

The scheme's ``events`` is a path into the body; the body itself (a top-level array) has none, so
this package reads the batch itself after :func:`connectors.scheme_check.check_signature`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
import uuid
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared, keys_of
from connectors.options import SourceOptions
from connectors.parsing import epoch_time, load_json, required_id, text_or_none
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    Handshake,
    ParsedEvent,
    Reply,
    Verdict,
    WebhookRequest,
)

SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{timestamp}{body}",
    algorithm="ecdsa-p256",
    encoding="base64",
    timestamp=f"header:{TIMESTAMP}",
    tolerance=300,
    # read relative to each event of the top-level array (see the module's docstring)
    event_id="body:sg_event_id",
    event_type="body:event",
    occurred_at="body:timestamp",
    object_id="body:sg_message_id",
)


def read_batch(body: bytes) -> Verdict:
    """The events of a verified delivery: one per item of the top-level array."""
    document = load_json(body, required=True)
    if not isinstance(document, list):
        raise BadPayload("body is not a JSON array of events")
    if not document:
        return Handshake(Reply(200), "a delivery with no events")
    items = []
    for index, item in enumerate(document):
        if not isinstance(item, dict):
            raise BadPayload(f"event {index} is not a JSON object")
        message = text_or_none(item.get("sg_message_id"))
        event = ParsedEvent(
            event_id=required_id(item.get("sg_event_id"), f"{index}.sg_event_id"),
            event_type=text_or_none(item.get("event")),
            object_type="message" if message else None,
            object_id=message,
            occurred_at=epoch_time(item.get("timestamp")),
        )
        own = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
        items.append(BatchItem(event, own.encode("utf-8", "surrogatepass")))
    return Batch(tuple(items))


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    scheme_check.check_signature(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    return read_batch(request.body)


def _event(event_type: str, now: int, message_id: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "email": "example@test.com",
        "timestamp": now,
        "smtp-id": f"<{message_id[:20]}@ismtpd-555>",
        "event": event_type,
        "category": ["cat facts"],
        "sg_event_id": base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
        "sg_message_id": message_id,
    }
    if event_type == "delivered":
        event |= {"response": "250 OK", "ip": "168.1.1.1", "tls": 1}
    elif event_type == "open":
        event |= {
            "useragent": "Mozilla/4.0 (compatible; MSIE 6.1; Windows XP)",
            "ip": "255.255.255.255",
        }
    elif event_type == "bounce":
        event |= {
            "reason": "500 unknown recipient",
            "status": "5.0.0",
            "type": "bounce",
            "bounce_classification": "Invalid Address",
        }
    return event


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = int(time.time())
    message_id = f"{uuid.uuid4().hex[:20]}.filter0001.16648.5515E0B88.0"
    # SendGrid batches: the message's processed event with the one asked for
    events = [_event("processed", now, message_id)]
    if event_type != "processed":
        events.append(_event(event_type, now, message_id))
    body = compact_json(events)
    return Sample(str(events[-1]["sg_event_id"]), body, {"content-type": "application/json"})


SAMPLES = Catalogue(("delivered", "open", "bounce", "processed"), _sample)

PROVIDER: Provider = dataclasses.replace(
    declared(
        "sendgrid",
        SCHEME,
        # none for `hookledger send`: only SendGrid holds the private key (SAMPLES serve the tests)
        # the recipient, and where and how they opened or clicked
        personal_fields=("email", "ip", "useragent"),
    ),
    verify=_verify,
)
