"""Clerk's webhooks (``kind = "clerk"``): delivered through Svix, signed the Svix way.

Facts, each with its source:

- "Clerk uses Svix to send our webhooks"; the endpoint's signing secret (``whsec_…``) is on its page
  in the Clerk Dashboard (https://clerk.com/docs/integrations/webhooks/overview). Clerk's own
  ``verifyWebhook`` reads the ``svix-id``, ``svix-timestamp`` and ``svix-signature`` headers and checks
  them as Standard Webhooks (``@clerk/backend`` ``src/webhooks.ts``, shown at
  https://app.unpkg.com/@clerk/backend@2.29.2/files/dist/webhooks.mjs.map).
- Svix: the signed content is ``{svix-id}.{svix-timestamp}.{raw body}``, HMAC-SHA256 keyed with the
  base64-decoded part of the secret after ``whsec_``, base64; ``svix-signature`` is a
  space-delimited list of ``v1,<base64>`` (several while a secret rotates: any may match); the
  timestamp is Unix seconds, refused more than five minutes away either way; ``svix-id`` "will be
  the same when the same webhook is being resent"
  (https://docs.svix.com/receiving/verifying-payloads/how-manual). The ``svix`` library (2.9.1,
  ``Webhook.verify``) is the reference the tests check both ways.
- Identity: ``svix-id``. The body is ``{"data": {…}, "object": "event", "type", "timestamp",
  "instance_id"}``: ``type`` is the event type (``user.created``, ``session.created``,
  ``organization.updated``, …), ``data`` the resource (a User for ``user.*``: its ``id`` and
  ``object``), ``timestamp`` the event's time in milliseconds since 1970 (the overview's example,
  same page).
- No handshake.
"""

from __future__ import annotations

import time
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
    occurred_at="body:timestamp",
    object_type="body:data.object",
    object_id="body:data.id",
    carried=("svix-id",),
)


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    msg_id = f"msg_{token(27)}"
    now_ms = int(time.time() * 1000)
    user_id = f"user_{token(27)}"
    data: dict[str, Any]
    if event_type.startswith("session."):
        data = {
            "object": "session",
            "id": f"sess_{token(27)}",
            "user_id": user_id,
            "client_id": f"client_{token(27)}",
            "status": "active",
            "created_at": now_ms,
            "updated_at": now_ms,
            "last_active_at": now_ms,
            "expire_at": now_ms + 7 * 86_400_000,
            "abandon_at": now_ms + 30 * 86_400_000,
        }
    else:
        email_id = f"idn_{token(27)}"
        data = {
            "object": "user",
            "id": user_id,
            "first_name": "Example",
            "last_name": "Example",
            "username": None,
            "email_addresses": [
                {
                    "object": "email_address",
                    "id": email_id,
                    "email_address": "example@example.org",
                    "verification": {"status": "verified", "strategy": "ticket"},
                    "linked_to": [],
                }
            ],
            "primary_email_address_id": email_id,
            "external_id": None,
            "public_metadata": {},
            "private_metadata": {},
            "unsafe_metadata": {},
            "two_factor_enabled": False,
            "created_at": now_ms,
            "updated_at": now_ms,
        }
    document = {
        "data": data,
        "event_attributes": {
            "http_request": {"client_ip": "0.0.0.0", "user_agent": "Mozilla/5.0 (hookledger)"}
        },
        "instance_id": "ins_2sample0000000000000000000",
        "object": "event",
        "timestamp": now_ms,
        "type": event_type,
    }
    headers = {"content-type": "application/json", "svix-id": msg_id}
    return Sample(msg_id, compact_json(document), headers)


SAMPLES = Catalogue(("user.created", "user.updated", "session.created"), _sample)

PROVIDER: Provider = declared(
    "clerk",
    SCHEME,
    samples=SAMPLES,
    # the user's identity and where they signed in from
    personal_fields=(
        "email_address",
        "phone_number",
        "first_name",
        "last_name",
        "username",
        "client_ip",
        "user_agent",
    ),
)
