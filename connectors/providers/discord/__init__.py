"""Discord's webhook events, received (``kind = "discord"``): Ed25519-signed, a PING answered 204.

Facts (docs/providers.md "Discord", with sources):

- Each request carries ``X-Signature-Ed25519`` (hex) and ``X-Signature-Timestamp``; the signature is
  Ed25519 over the timestamp's bytes followed by the raw body, checked with the application's public
  key (hex, from the Developer Portal: a configuration value, not a secret).
- ``{"version": 1, "application_id": …, "type": 0}`` is a PING: answered ``204`` with no body, never
  an event. ``"type": 1`` is an event: ``{"event": {"type": "APPLICATION_AUTHORIZED", "timestamp":
  …, "data": {…}}}``.
- Discord sends no event id. The identity is derived from what Discord signed of the event: a hash of
  the event object (its type, time and data, keys sorted), so the same event sent again is a
  duplicate and two events never share one unless they are the same event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import Provider, headers_named
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    check_timestamp,
    iso_time,
    load_json,
    require_header,
    text_or_none,
)

SIGNATURE = "X-Signature-Ed25519"
TIMESTAMP = "X-Signature-Timestamp"


class DiscordKeys(ProviderKeys):
    # the application's public key (Developer Portal, "General Information"): 32 bytes in hex
    public_key: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")


def verify_discord(
    headers: Mapping[str, str], body: bytes, public_key: str, *, now: float, tolerance: int
) -> None:
    stamp = require_header(headers, TIMESTAMP)
    given = require_header(headers, SIGNATURE)
    if not (stamp.isascii() and stamp.isdigit()):
        raise SignatureError(f"{TIMESTAMP} is not a Unix time")
    try:
        signature = bytes.fromhex(given)
    except ValueError:
        raise SignatureError(f"{SIGNATURE} is not hexadecimal") from None
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519_public_key(public_key).verify(signature, stamp.encode() + body)
    except InvalidSignature:
        raise SignatureError(f"{SIGNATURE} does not match") from None
    check_timestamp(int(stamp), now, tolerance, reject_future=True)


def parse_discord(body: bytes) -> Verdict:
    document = load_json(body, required=True)
    if not isinstance(document, dict):
        raise BadPayload("body is not a JSON object")
    kind = document.get("type")
    if kind == 0:
        return Handshake(Reply(204), "PING")
    if kind != 1:
        raise BadPayload(f"unknown Discord webhook type {text_or_none(kind)!r}")
    event = document.get("event")
    if not isinstance(event, dict) or not text_or_none(event.get("type")):
        raise BadPayload("event without a type")
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = event.get("data")
    data = data if isinstance(data, dict) else {}
    guild = data.get("guild")
    user = data.get("user")
    obj_type, obj_id = (
        ("guild", text_or_none(guild.get("id")))
        if isinstance(guild, dict)
        else ("user", text_or_none(user.get("id")))
        if isinstance(user, dict)
        else (None, None)
    )
    return ParsedEvent(
        # surrogatepass: a lone surrogate (a valid JSON escape) still hashes, the same bytes
        # as before for every other text
        event_id="discord:"
        + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest(),
        event_type=text_or_none(event.get("type")),
        object_type=obj_type if obj_id else None,
        object_id=obj_id,
        occurred_at=iso_time(event.get("timestamp")),
    )


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    public_key = options.own(DiscordKeys).public_key
    assert public_key is not None  # the provider's rule requires it
    verify_discord(
        request.headers,
        request.body,
        public_key,
        now=request.now,
        tolerance=options.tolerance_seconds,
    )
    return parse_discord(request.body)


def ed25519_public_key(hex_key: str) -> Any:
    """The application's Ed25519 key. cryptography's OpenSSL bindings load here, once a Discord
    source is used: every other process is spared their memory and start-up."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(hex_key))


def public_key_rule(values: Mapping[str, object]) -> str | None:
    """The rule of every kind checked with the application's Ed25519 key (its ``public_key``)."""
    key = values.get("public_key")
    if not isinstance(key, str) or not key:
        kind = values.get("kind", "discord")
        return f"kind '{kind}' needs key 'public_key' (the application's, in hex)"
    try:
        ed25519_public_key(key)
    except ValueError:
        return "key 'public_key' is not an Ed25519 public key"
    return None


PROVIDER = Provider(
    "discord",
    verify=_verify,
    keys=DiscordKeys,
    validate=public_key_rule,
    signed_with_secret=False,
    sensitive_headers=headers_named(SIGNATURE),
)
