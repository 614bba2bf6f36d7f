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

- Interactivity (``payload=<JSON>``) and slash commands (form fields) are form bodies signed the same
  way; each carries a ``trigger_id`` unique to the interaction, its identity here, and is acknowledged
  with an empty 200.

Slack has no API that lists the events it sent: a ``slack`` source is receive-only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from connectors.options import SourceOptions
from connectors.provider import Provider, headers_named, kept
from connectors.providers.slack.samples import SLACK as SAMPLES
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Received,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    check_timestamp,
    decode_payload,
    epoch_time,
    hmac_digest,
    is_form,
    load_json,
    require_header,
    required_id,
    same_digest,
    text_or_none,
)

FORM = "application/x-www-form-urlencoded"
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


def parse_slack(body: bytes, content_type: str | None = None) -> Verdict:
    if is_form(content_type):
        return _parse_form(body)
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


# Interactivity and slash commands are acknowledged with an empty 200 (Slack shows a non-empty answer
# to a slash command in the channel)
EMPTY_ACK = Reply(200)


def _parse_form(body: bytes) -> Verdict:
    """Interactivity (``payload=<JSON>``: a button, a modal's submission, a shortcut) or a slash
    command (its own fields). Each carries a ``trigger_id`` unique to the interaction: its identity."""
    try:
        document = decode_payload(body, FORM)
    except ValueError:
        raise BadPayload("the form body is not readable (UTF-8 fields)") from None
    if not isinstance(document, dict):
        raise BadPayload("the form's payload is not a JSON object")
    if "command" in document:  # a slash command
        command = text_or_none(document.get("command"))
        channel = text_or_none(document.get("channel_id"))
        event_type = f"slash_command.{command}" if command else "slash_command"
    else:
        kind = text_or_none(document.get("type"))
        box = document.get("channel")
        channel = text_or_none(box.get("id")) if isinstance(box, dict) else None
        event_type = f"interactivity.{kind}" if kind else "interactivity"
    event = ParsedEvent(
        event_id=required_id(document.get("trigger_id"), "trigger_id"),
        event_type=event_type,
        object_type="channel" if channel else None,
        object_id=channel,
    )
    return Received(event, EMPTY_ACK)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verify_slack(
        request.headers,
        request.body,
        secrets,
        now=request.now,
        tolerance=options.tolerance_seconds,
    )
    return parse_slack(request.body, request.header("content-type"))


def _sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return {
        "content-type": headers.get("content-type") or "application/json",
        **kept(headers, "x-slack-retry-num", "x-slack-retry-reason"),
        TIMESTAMP.lower(): str(int(now)),
        SIGNATURE.lower(): slack_sign(body, secret, int(now)),
    }


PROVIDER = Provider(
    "slack",
    samples=SAMPLES,
    verify=_verify,
    sign=_sign,
    sensitive_headers=headers_named(SIGNATURE),
)
