"""Calendly's webhooks, received (``kind = "calendly"``): ``t=<s>,v1=<hex>`` over ``{t}.{body}``.

Facts, with their sources:

- Signature: ``Calendly-Webhook-Signature: t=<Unix s>,v1=<hex>``, the hex HMAC-SHA256 of
  ``"{t}.{body}"`` keyed with the webhook signing key (chosen when a subscription is created with a
  personal access token, generated for an OAuth app), as written. Calendly's example refuses a
  ``t`` more than 3 minutes old ("tolerance"): 180 s.
  https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures
  https://developer.calendly.com/docs/webhooks/overview
- Calendly publishes no library that verifies webhooks (the ``calendly`` package on PyPI is an
  unofficial 2019 API wrapper): the tests rely on the documented scheme.
- Body: ``{"event": "invitee.created", "created_at": "2025-…Z", "created_by": "https://api.calendly.com/users/…",
  "payload": {"uri": "https://api.calendly.com/scheduled_events/…/invitees/…", …}}``: the type is
  ``event``, the time ``created_at``, the object ``payload.uri``.
  (Calendly's "Webhook payload" reference)
- Identity: Calendly sends no event id. Each event is stored as ``<event>:<payload.uri>:<created_at>``:
  ``payload.uri`` names the invitee (or routing form submission) the event is about, ``event`` tells
  its creation from its cancellation, and ``created_at`` (when Calendly made the webhook event, the
  same in every retry) tells apart two events of one type about one invitee (a no-show marked, unmarked
  and marked again). A body without them is stored on a hash of its bytes (``calendly:<sha256>``).
- No handshake.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions
from connectors.parsing import MAX_ID_LENGTH, json_path_get, text_or_none
from connectors.provider import Provider, headers_named
from connectors.scheme import Scheme, SignatureList
from connectors.webhooks import ParsedEvent, Verdict, WebhookRequest

SIGNATURE = "Calendly-Webhook-Signature"
API = "https://api.calendly.com"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{timestamp}.{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    listed=SignatureList(key="v1", separator=",", pair="="),
    timestamp="list:t",
    time_format="unix",
    tolerance=180,
    # refined by this package: <event>:<payload.uri>:<created_at> (the hash when they are absent)
    event_id="hash",
    id_prefix="calendly:",
    event_type="body:event",
    occurred_at="body:created_at",
    object_id="body:payload.uri",
)


def event_id_of(document: Any) -> str | None:
    """``<event>:<payload.uri>:<created_at>``, or None where one is missing."""
    parts = [
        text_or_none(json_path_get(document, path)) if isinstance(document, dict) else None
        for path in ("event", "payload.uri", "created_at")
    ]
    if not all(p and p.strip() for p in parts):
        return None
    text = ":".join(p.strip() for p in parts if p)
    return text if len(text) <= MAX_ID_LENGTH else None


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    view = scheme_check.check_signature(
        SCHEME, request, secrets, scheme_check.Keys(), tolerance=options.tolerance_seconds
    )
    verdict = scheme_check.read_events(SCHEME, view)
    own = event_id_of(view.document)
    if own is not None and isinstance(verdict, ParsedEvent):
        return dataclasses.replace(verdict, event_id=own)
    return verdict


def sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return scheme_check.sign(SCHEME, headers, body, secret, now, url)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC)
    event_uri = f"{API}/scheduled_events/{token(16).upper()}"
    payload: dict[str, Any]
    if event_type.startswith("routing_form_submission"):
        payload = {
            "uri": f"{API}/routing_form_submissions/{uuid.uuid4()}",
            "routing_form": f"{API}/routing_forms/{token(16).upper()}",
            "questions_and_answers": [{"question": "Email", "answer": "john@example.com"}],
            "created_at": _iso(now),
        }
    else:
        payload = {
            "uri": f"{event_uri}/invitees/{token(16).upper()}",
            "email": "john@example.com",
            "name": "John Doe",
            "status": "canceled" if event_type == "invitee.canceled" else "active",
            "timezone": "America/New_York",
            "event": event_uri,
            "created_at": _iso(now - timedelta(seconds=int(time.time()) % 60)),
            "updated_at": _iso(now),
            "rescheduled": False,
        }
        if event_type == "invitee.canceled":
            payload["cancellation"] = {"canceled_by": "John Doe", "reason": "Conflict"}
    document = {
        "created_at": _iso(now),
        "created_by": f"{API}/users/{token(16).upper()}",
        "event": event_type,
        "payload": payload,
    }
    event_id = event_id_of(document) or ""
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(
    ("invitee.created", "invitee.canceled", "routing_form_submission.created"), _sample
)

PROVIDER = Provider(
    "calendly",
    verify=verify,
    sign=sign,
    sensitive_headers=headers_named(SIGNATURE),
    samples=SAMPLES,
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
)
