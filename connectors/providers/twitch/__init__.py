"""Twitch EventSub over webhooks, received (``kind = "twitch"``): signed messages, the callback's
challenge answered, revocations acknowledged.

Facts (source: Twitch, "Handling Webhook Events",
https://dev.twitch.tv/docs/eventsub/handling-webhook-events/ and "EventSub",
https://dev.twitch.tv/docs/eventsub/):

- Headers: ``Twitch-Eventsub-Message-Id``, ``Twitch-Eventsub-Message-Timestamp`` (RFC 3339 with
  nanoseconds, "2023-07-19T14:56:51.634234626Z"), ``Twitch-Eventsub-Message-Type``
  (``notification``, ``webhook_callback_verification``, ``revocation``),
  ``Twitch-Eventsub-Message-Signature: sha256=<hex>``, ``Twitch-Eventsub-Subscription-Type``,
  ``-Subscription-Version``, ``-Message-Retry``.
- Signature: HMAC-SHA256, hex, of the message id, then the timestamp as sent, then the raw body
  (nothing between them), keyed with the subscription's ``secret`` (10-100 characters, chosen by
  the application when it creates the subscription; used as is).
- Replays: "make sure the value in the timestamp field isn't older than 10 minutes" (tolerance 600 s
  here), and a resent message keeps its message id.
- ``webhook_callback_verification``: the body carries ``challenge``; the callback answers ``200``
  with the challenge as its body, raw, ``text/plain`` (signed like every message: checked first).
- ``revocation``: the subscription was revoked (``subscription.status``: ``user_removed``,
  ``authorization_revoked``, ``notification_failures_exceeded``, ``version_removed``); Twitch expects
  a 2XX and sends nothing more for it. hookledger answers ``204`` and logs it as a ``handshake``
  whose description names the subscription, its type and the reason; it is not stored as an event
  (there is no event to process, only a subscription to re-create).
- ``notification``: ``{"subscription": {"type": …, …}, "event": {…}}``. Identity: the message id
  header; type: ``subscription.type``; time: the message timestamp (events carry differently named
  times); object: the broadcaster (``event.broadcaster_user_id``) where the event has one.

No official Python library verifies EventSub messages (Twitch's own examples are JavaScript and the
Go Twitch CLI); the vector is computed with the documented algorithm.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import keys_of, signer
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Challenge, Scheme
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Reply,
    Verdict,
    WebhookRequest,
    load_json,
    text_or_none,
)

MESSAGE_ID = "Twitch-Eventsub-Message-Id"
TIMESTAMP = "Twitch-Eventsub-Message-Timestamp"
MESSAGE_TYPE = "Twitch-Eventsub-Message-Type"
SIGNATURE = "Twitch-Eventsub-Message-Signature"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed=f"{{header:{MESSAGE_ID}}}{{header:{TIMESTAMP}}}{{body}}",
    algorithm="hmac-sha256",
    encoding="hex",
    prefix="sha256=",
    timestamp=f"header:{TIMESTAMP}",
    time_format="iso",
    tolerance=600,
    event_id=f"header:{MESSAGE_ID}",
    event_type="body:subscription.type",
    occurred_at=f"header:{TIMESTAMP}",
    challenges=(
        Challenge(
            when=f"header:{MESSAGE_TYPE}=webhook_callback_verification", echo="body:challenge"
        ),
    ),
    carried=(
        MESSAGE_ID.lower(),
        MESSAGE_TYPE.lower(),
        "twitch-eventsub-message-retry",
        "twitch-eventsub-subscription-type",
        "twitch-eventsub-subscription-version",
    ),
)

# Twitch's examples answer notifications and revocations with 204
REVOCATION_ACK = Reply(204)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if isinstance(verdict, Handshake):  # the callback verification, signature checked
        return verdict
    message_type = request.header(MESSAGE_TYPE)
    if message_type == "revocation":
        return Handshake(REVOCATION_ACK, _revocation(request.body))
    if message_type != "notification" or not isinstance(verdict, ParsedEvent):
        raise BadPayload(f"unknown {MESSAGE_TYPE} {message_type!r}")
    document = load_json(request.body, required=True)
    event = document.get("event") if isinstance(document, dict) else None
    broadcaster = (
        text_or_none(event.get("broadcaster_user_id")) if isinstance(event, dict) else None
    )
    if broadcaster:
        verdict = dataclasses.replace(verdict, object_type="broadcaster", object_id=broadcaster)
    return verdict


def _revocation(body: bytes) -> str:
    document = load_json(body, required=True)
    subscription = document.get("subscription") if isinstance(document, dict) else None
    subscription = subscription if isinstance(subscription, dict) else {}
    return (
        f"revocation of subscription {text_or_none(subscription.get('id'))}"
        f" ({text_or_none(subscription.get('type'))}):"
        f" {text_or_none(subscription.get('status'))}"
    )


# -- samples, shaped after the payloads in "EventSub Subscription Types" and the webhook guide -----


def _subscription(event_type: str, version: str, condition: dict[str, str]) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "status": "enabled",
        "type": event_type,
        "version": version,
        "cost": 0,
        "condition": condition,
        "transport": {"method": "webhook", "callback": "https://example.com/webhooks/callback"},
        "created_at": _now(),
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"  # nanoseconds, as Twitch


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    broadcaster = {
        "broadcaster_user_id": "1337",
        "broadcaster_user_login": "cooler_user",
        "broadcaster_user_name": "Cooler_User",
    }
    if event_type == "channel.follow":
        version = "2"
        condition = {"broadcaster_user_id": "1337", "moderator_user_id": "1337"}
        event: dict[str, object] = {
            "user_id": "1234",
            "user_login": "cool_user",
            "user_name": "Cool_User",
            **broadcaster,
            "followed_at": _now(),
        }
    elif event_type == "stream.online":
        version, condition = "1", {"broadcaster_user_id": "1337"}
        event = {
            "id": str(uuid.uuid4().int)[:10],
            **broadcaster,
            "type": "live",
            "started_at": _now(),
        }
    else:  # channel.subscribe
        version, condition = "1", {"broadcaster_user_id": "1337"}
        event = {
            "user_id": "1234",
            "user_login": "cool_user",
            "user_name": "Cool_User",
            **broadcaster,
            "tier": "1000",
            "is_gift": False,
        }
    body = {"subscription": _subscription(event_type, version, condition), "event": event}
    message_id = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        MESSAGE_ID.lower(): message_id,
        MESSAGE_TYPE.lower(): "notification",
        "twitch-eventsub-message-retry": "0",
        "twitch-eventsub-subscription-type": event_type,
        "twitch-eventsub-subscription-version": version,
    }
    return Sample(message_id, compact_json(body), headers)


SAMPLES = Catalogue(("channel.follow", "stream.online", "channel.subscribe"), _build)

PROVIDER = Provider(
    "twitch",
    verify=_verify,
    sign=signer(SCHEME),
    sensitive_headers=lambda options: SCHEME.header_names(),
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME"]
