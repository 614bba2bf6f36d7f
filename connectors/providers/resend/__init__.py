"""Resend's webhooks (``kind = "resend"``): delivered through Svix, signed the Svix way.

Facts, each with its source:

- Resend signs each request with its endpoint's signing secret (``whsec_…``, on the webhook's page
  and in the Webhooks API's answers) and sends the Svix headers ``svix-id``, ``svix-timestamp`` and
  ``svix-signature``; its SDK's ``webhooks.verify`` takes exactly those, or the Svix libraries do
  (https://resend.com/docs/webhooks/verify-webhooks-requests).
- Svix: the signed content is ``{svix-id}.{svix-timestamp}.{raw body}``, HMAC-SHA256 keyed with the
  base64-decoded part of the secret after ``whsec_``, base64; ``svix-signature`` is a
  space-delimited list of ``v1,<base64>`` (several while a secret rotates: any may match); the
  timestamp is Unix seconds, refused more than five minutes away either way; ``svix-id`` "will be
  the same when the same webhook is being resent"
  (https://docs.svix.com/receiving/verifying-payloads/how-manual). The ``svix`` library
  (2.9.1, ``Webhook.verify``, tolerance 5 minutes) is the reference the tests check both ways.
- Identity: ``svix-id`` (the message id, stable across retries). The body is ``{"type", "created_at",
  "data": {…}}``: ``type`` is the event type (``email.sent``, ``email.delivered``,
  ``email.bounced``, ``contact.created``, …), ``created_at`` its ISO 8601 time, ``data.email_id``
  the email of an ``email.*`` event (https://resend.com/docs/dashboard/webhooks/event-types).
- No handshake.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme, SignatureList

SCHEME = Scheme(
    signatures=("header:svix-signature",),
    signed="{id}.{timestamp}.{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    listed=SignatureList(key="v1", separator=" ", pair=","),
    secret="whsec",
    timestamp="header:svix-timestamp",
    tolerance=300,
    event_id="header:svix-id",
    event_type="body:type",
    occurred_at="body:created_at",
    object_id="body:data.email_id",
    carried=("svix-id",),
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    msg_id = f"msg_{token(27)}"
    email_id = f"{token(8)}-{token(4)}-{token(4)}-{token(4)}-{token(12)}"
    data: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "email_id": email_id,
        "from": "Acme <onboarding@resend.dev>",
        "to": ["delivered@resend.dev"],
        "subject": "A sample from hookledger",
        "tags": {"category": "confirm_email"},
    }
    if event_type == "email.bounced":
        data["bounce"] = {
            "message": "The recipient's email address does not exist.",
            "subType": "General",
            "type": "Permanent",
        }
    document = {"type": event_type, "created_at": _now(), "data": data}
    headers = {"content-type": "application/json", "svix-id": msg_id}
    return Sample(msg_id, compact_json(document), headers)


SAMPLES = Catalogue(("email.sent", "email.delivered", "email.bounced"), _sample)

PROVIDER: Provider = declared(
    "resend",
    SCHEME,
    samples=SAMPLES,
    # the addresses and the subject of the email
    personal_fields=("from", "to", "subject"),
)
