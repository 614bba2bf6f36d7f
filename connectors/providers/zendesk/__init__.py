"""Zendesk's webhooks, received (``kind = "zendesk"``): event subscriptions and trigger webhooks.

Facts, with their sources:

- Signature: ``X-Zendesk-Webhook-Signature`` = base64(HMAC-SHA256(TIMESTAMP + BODY)), keyed with the
  webhook's signing secret as Zendesk shows it (the text itself, not base64-decoded), where TIMESTAMP
  is ``X-Zendesk-Webhook-Signature-Timestamp`` as sent (ISO 8601, ``2021-10-26T18:22:00Z``). "These
  signatures will also help prevent against replay attacks"; Zendesk states no window, so the
  default 300 s applies. Test requests sent before a webhook exists are signed with the static
  secret ``dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ==``.
  https://developer.zendesk.com/documentation/webhooks/verifying/
- Zendesk publishes no library that verifies webhooks (zenpy and node-zendesk are community API
  clients without it): the tests rely on the documented formula and the static test secret.
- Event subscriptions (``zen:event-type:ticket.created`` …) send ``{"id", "type", "time",
  "account_id", "subject", "detail", "event", "zendesk_event_version"}``: the id is ``id``, the type
  ``type``, the time ``time``, the object ``detail.id``.
  (Zendesk's "Webhook event types" reference)
- Trigger and automation webhooks send the JSON body the admin wrote: one without an ``id`` is
  stored on a hash of its bytes (``zendesk:<sha256>``), so a retry is a duplicate; put
  ``{{ticket.id}}`` and ``{{ticket.updated_at_with_timestamp}}`` in such a body so that two
  firings differ.
- ``X-Zendesk-Webhook-Invocation-Id`` names the invocation (kept as the delivery id);
  ``X-Zendesk-Webhook-Id`` the webhook.
- No handshake.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.options import SourceOptions
from connectors.provider import Provider, headers_named
from connectors.scheme import Scheme
from connectors.webhooks import Verdict, WebhookRequest

SIGNATURE = "X-Zendesk-Webhook-Signature"
TEST_SECRET = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ=="

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{timestamp}{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    timestamp="header:X-Zendesk-Webhook-Signature-Timestamp",
    time_format="iso",
    tolerance=300,
    event_id="body:id",
    event_type="body:type",
    occurred_at="body:time",
    object_id="body:detail.id",
    delivery_id="header:X-Zendesk-Webhook-Invocation-Id",
    carried=("x-zendesk-webhook-id", "x-zendesk-webhook-invocation-id"),
)
# a trigger or automation webhook's own body, without an ``id``
TRIGGER_SCHEME = dataclasses.replace(
    SCHEME, event_id="hash", id_prefix="zendesk:", event_type=None, occurred_at=None, object_id=None
)


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    view = scheme_check.check_signature(
        SCHEME, request, secrets, scheme_check.Keys(), tolerance=options.tolerance_seconds
    )
    document = view.document
    if isinstance(document, dict) and "id" in document:
        return scheme_check.read_events(SCHEME, view)
    return scheme_check.read_events(TRIGGER_SCHEME, view)


def sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return scheme_check.sign(SCHEME, headers, body, secret, now, url)


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event_id = str(uuid.uuid4())
    ticket = str(35_000 + int(time.time()) % 10_000)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    detail: dict[str, Any] = {
        "id": ticket,
        "subject": "A sample from hookledger",
        "status": "NEW",
        "priority": "NORMAL",
        "requester_id": "8447388090494",
        "created_at": now,
        "updated_at": now,
    }
    event: dict[str, Any] = {}
    if event_type.endswith("status_changed"):
        detail["status"] = "OPEN"
        event = {"current": "OPEN", "previous": "NEW"}
    elif event_type.endswith("comment_added"):
        event = {"comment": {"id": "10026", "body": "Thanks!", "is_public": True}}
    document = {
        "account_id": 12_514_403,
        "detail": detail,
        "event": event,
        "id": event_id,
        "subject": f"zen:ticket:{ticket}",
        "time": now,
        "type": event_type,
        "zendesk_event_version": "2022-11-06",
    }
    headers = {
        "content-type": "application/json",
        "x-zendesk-webhook-id": "01GZ6V2MTB12KYZQ3VBV8X9F1Q",
        "x-zendesk-webhook-invocation-id": str(uuid.uuid4().int % 10**12),
    }
    return Sample(event_id, compact_json(document), headers)


SAMPLES = Catalogue(
    (
        "zen:event-type:ticket.created",
        "zen:event-type:ticket.status_changed",
        "zen:event-type:ticket.comment_added",
    ),
    _sample,
)

PROVIDER = Provider(
    "zendesk",
    verify=verify,
    sign=sign,
    sensitive_headers=headers_named(SIGNATURE),
    samples=SAMPLES,
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
)
