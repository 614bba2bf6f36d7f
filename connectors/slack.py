"""Slack's Events API, received (``kind = "slack"``): signed requests, the URL-verification handshake.

Facts (docs/providers.md "Slack", with sources):

- Every request carries ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature: v0=<hex>``, the
  HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` with the app's signing secret; Slack's own SDK
  refuses a timestamp more than five minutes away from now, either side
  (``slack_sdk.signature.SignatureVerifier``).
- When an app's Request URL is set, Slack sends ``{"type": "url_verification", "challenge": …}`` and
  expects the challenge back: a handshake, answered and never stored as an event.
- An event is ``{"type": "event_callback", "event_id": "Ev…", "event_time": …, "event": {"type":
  …}}``; a retry of it (``X-Slack-Retry-Num``, ``X-Slack-Retry-Reason``) carries the same
  ``event_id``, so it is a duplicate. ``app_rate_limited`` tells the app Slack is dropping its events
  for a minute: answered, logged, not an event.

Slack has no API that lists the events it sent: a ``slack`` source is receive-only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from connectors.options import SourceOptions
from connectors.provider import Provider, kept
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    check_timestamp,
    epoch_time,
    hmac_digest,
    load_json,
    require_header,
    required_id,
    same_digest,
    text_or_none,
)

SIGNATURE = "X-Slack-Signature"
TIMESTAMP = "X-Slack-Request-Timestamp"


def slack_sign(body: bytes, secret: str, timestamp: int) -> str:
    """The ``X-Slack-Signature`` value Slack would send (tests, the sandbox, the drill)."""
    return "v0=" + hmac_digest(secret.encode(), f"v0:{timestamp}:".encode() + body).hex()


def verify_slack(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    *,
    now: float,
    tolerance: int = 300,
) -> None:
    stamp = require_header(headers, TIMESTAMP)
    if not (stamp.isascii() and stamp.isdigit()):
        raise SignatureError(f"{TIMESTAMP} is not a Unix time")
    given = require_header(headers, SIGNATURE)
    if not given.startswith("v0="):
        raise SignatureError(f"{SIGNATURE} does not start with v0=")
    for secret in secrets:
        if same_digest(slack_sign(body, secret, int(stamp)), given):
            check_timestamp(int(stamp), now, tolerance, reject_future=True)
            return
    raise SignatureError(f"{SIGNATURE} does not match")


def parse_slack(body: bytes) -> Verdict:
    document = load_json(body, required=True)
    if not isinstance(document, dict):
        raise BadPayload("body is not a JSON object")
    kind = document.get("type")
    if kind == "url_verification":
        challenge = document.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise BadPayload("url_verification without a challenge")
        answer = json.dumps({"challenge": challenge}).encode()
        return Handshake(Reply(200, answer, "application/json"), "url_verification")
    if kind == "app_rate_limited":
        return Handshake(Reply(200), "app_rate_limited: Slack is dropping this app's events")
    if kind != "event_callback":
        raise BadPayload(f"unknown Slack request type {text_or_none(kind)!r}")
    event: Any = document.get("event")
    event = event if isinstance(event, dict) else {}
    inner = text_or_none(event.get("type"))
    item = event.get("item")
    channel = text_or_none(event.get("channel")) or (
        text_or_none(item.get("channel")) if isinstance(item, dict) else None
    )
    return ParsedEvent(
        event_id=required_id(document.get("event_id"), "event_id"),
        event_type=inner,
        object_type="channel" if channel else None,
        object_id=channel,
        occurred_at=epoch_time(document.get("event_time")),
    )


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verify_slack(
        request.headers,
        request.body,
        secrets,
        now=request.now,
        tolerance=options.tolerance_seconds,
    )
    return parse_slack(request.body)


def _sign(
    options: SourceOptions, headers: Mapping[str, str], body: bytes, secret: str, now: float
) -> dict[str, str]:
    return {
        "content-type": headers.get("content-type") or "application/json",
        **kept(headers, "x-slack-retry-num", "x-slack-retry-reason"),
        TIMESTAMP.lower(): str(int(now)),
        SIGNATURE.lower(): slack_sign(body, secret, int(now)),
    }


PROVIDER = Provider(
    "slack",
    verify=_verify,
    sign=_sign,
    sensitive_headers=lambda options: frozenset({SIGNATURE.lower()}),
)
