"""Zoom webhooks, received (``kind = "zoom"``): ``x-zm-signature`` over the request timestamp and body;
the endpoint's URL validation answered with the token Zoom asks to be hashed.

Facts (sources: Zoom, "Using webhooks", https://developers.zoom.us/docs/api/webhooks/ ("Verify webhook
events", "Validate your webhook endpoint"); "Webhook URL validation enforcement",
https://developers.zoom.us/changelog/platform/webhook-url-validation/; Zoom's official library
``@zoom/rivet`` 0.4.0 (npm; ``CommonHttpRequest.isEventVerified``, ``hashUrlValidationEvent``)):

- Headers: ``x-zm-request-timestamp`` (Unix seconds) and ``x-zm-signature: v0=<hex>``.
- Signature: HMAC-SHA256, hex, of ``v0:{x-zm-request-timestamp}:{raw body}``, keyed with the event
  subscription's "Secret Token" (Marketplace, app's Features > Access; used as is).
- Time: Zoom documents no window and Rivet checks none; the usual 300 s applies here
  (``tolerance_seconds`` overrides it).
- URL validation: ``{"event": "endpoint.url_validation", "payload": {"plainToken": …}, "event_ts":
  …}``, sent when the URL is saved and every 72 hours, signed like every event (Rivet checks the
  signature first). The answer is ``200`` ``application/json`` ``{"plainToken": <the same>,
  "encryptedToken": <hex HMAC-SHA256 of plainToken with the Secret Token>}`` within 3 seconds: a
  computed answer, so this package checks the signature, finds the secret that matched and hashes
  the token with it. Logged as a ``handshake``, never stored as an event.
- Events: ``{"event": "meeting.started", "event_ts": <ms>, "payload": {"account_id": …, "object":
  {"id": …, …}}}``. Zoom sends no event id (nor a delivery id header): the identity is
  ``zoom:`` + the SHA-256 of the body, so a retry of the same event (the same body, re-signed with a
  new timestamp) is a duplicate. Type: ``event``; time: ``event_ts`` (milliseconds); object:
  ``payload.object.id``, its type the event's first word (``meeting``, ``recording``, ``user``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import random
import time
from datetime import UTC, datetime

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import keys_of, signer
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    load_json,
)

SIGNATURE = "x-zm-signature"
TIMESTAMP = "x-zm-request-timestamp"
URL_VALIDATION = "endpoint.url_validation"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="v0:{timestamp}:{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    prefix="v0=",
    timestamp=f"header:{TIMESTAMP}",
    time_format="unix",
    tolerance=300,
    event_id="hash",
    id_prefix="zoom:",
    event_type="body:event",
    occurred_at="body:event_ts",
    object_id="body:payload.object.id",
)


def encrypted_token(plain_token: str, secret: str) -> str:
    """The ``encryptedToken`` Zoom expects: hex HMAC-SHA256 of the plain token."""
    return hmac.new(secret.encode(), plain_token.encode(), hashlib.sha256).hexdigest()


def _matching_secret(request: WebhookRequest, secrets: tuple[str, ...], tolerance: int) -> str:
    """The secret that signed the request (its time checked once it is found)."""
    keys = scheme_check.Keys()
    error = SignatureError(f"missing signature ({SIGNATURE})")
    for secret in secrets:
        try:
            scheme_check.check_signature(SCHEME, request, (secret,), keys, tolerance=0)
        except SignatureError as exc:
            error = exc
            continue
        scheme_check.check_signature(SCHEME, request, (secret,), keys, tolerance=tolerance)
        return secret
    raise error


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    document = load_json(request.body, required=False)
    if isinstance(document, dict) and document.get("event") == URL_VALIDATION:
        secret = _matching_secret(request, secrets, options.tolerance_seconds)
        payload = document.get("payload")
        plain = payload.get("plainToken") if isinstance(payload, dict) else None
        if not isinstance(plain, str) or not plain:
            raise BadPayload("endpoint.url_validation without payload.plainToken")
        answer = {"plainToken": plain, "encryptedToken": encrypted_token(plain, secret)}
        return Handshake(
            Reply(200, json.dumps(answer).encode(), "application/json"), URL_VALIDATION
        )
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if isinstance(verdict, ParsedEvent) and verdict.object_id and verdict.event_type:
        verdict = dataclasses.replace(verdict, object_type=verdict.event_type.split(".", 1)[0])
    return verdict


# -- samples, shaped after the event examples of https://developers.zoom.us/docs/api/meetings/events/


def _meeting(meeting_id: int, now: datetime) -> dict[str, object]:
    return {
        "id": str(meeting_id),
        "uuid": token(22) + "==",
        "host_id": "x1yCzABCDEfg23HiJKl4mN",
        "topic": "My Meeting",
        "type": 2,
        "start_time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timezone": "America/Los_Angeles",
        "duration": 60,
    }


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC)
    meeting = _meeting(random.randrange(10**9, 10**11), now)
    if event_type == "meeting.ended":
        meeting["end_time"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if event_type == "recording.completed":
        meeting |= {
            "account_id": "AAAAAABBBB",
            "total_size": 761500,
            "recording_count": 1,
            "share_url": "https://example.zoom.us/rec/share/sample",
            "recording_files": [
                {
                    "id": token(36),
                    "meeting_id": meeting["uuid"],
                    "file_type": "MP4",
                    "file_size": 761500,
                    "status": "completed",
                    "recording_type": "shared_screen_with_speaker_view",
                }
            ],
        }
    body = compact_json(
        {
            "event": event_type,
            "event_ts": int(time.time() * 1000),
            "payload": {"account_id": "AAAAAABBBB", "object": meeting},
        }
    )
    event_id = SCHEME.id_prefix + hashlib.sha256(body).hexdigest()
    return Sample(event_id, body, {"content-type": "application/json"})


SAMPLES = Catalogue(("meeting.started", "meeting.ended", "recording.completed"), _build)

PROVIDER = Provider(
    "zoom",
    verify=_verify,
    sign=signer(SCHEME),
    sensitive_headers=lambda options: SCHEME.header_names(),
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME", "encrypted_token"]
