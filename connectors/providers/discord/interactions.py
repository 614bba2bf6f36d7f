"""Discord's interactions, received (``kind = "discord_interactions"``): the application's
"Interactions Endpoint URL", signed like Discord's webhook events and answered within 3 seconds.

Facts (docs/providers.md "Discord interactions", with sources):

- The signature is the ``discord`` kind's (``connectors.providers.discord.verify_discord``): Ed25519 over
  ``X-Signature-Timestamp`` followed by the raw body, checked with the application's public key.
  Discord sends invalid signatures on purpose to test the endpoint; they must get 401, PINGs too.
- ``{"type": 1}`` is a PING: answered ``{"type": 1}`` (PONG) as JSON, never an event.
- ``APPLICATION_COMMAND`` (2), ``MESSAGE_COMPONENT`` (3) and ``MODAL_SUBMIT`` (5) are events,
  identified by the interaction's ``id`` (a snowflake, which also carries its creation time). The
  initial response is due within 3 seconds, so each is answered at once, after it is stored, with a
  deferred response; the handler follows up through the interaction's ``token`` (15 minutes).
- ``APPLICATION_COMMAND_AUTOCOMPLETE`` (4) can only be answered with choices, at once (no deferred
  response exists for it, nor a follow-up): answered with none, never an event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from connectors.options import SourceOptions
from connectors.provider import Provider, headers_named
from connectors.providers.discord import SIGNATURE, DiscordKeys, public_key_rule, verify_discord
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Received,
    Reply,
    Verdict,
    WebhookRequest,
    epoch_time,
    load_json,
    required_id,
    text_or_none,
)

PING = 1
APPLICATION_COMMAND = 2
MESSAGE_COMPONENT = 3
AUTOCOMPLETE = 4
MODAL_SUBMIT = 5
# interaction type -> (event type, what its object is, the key of data naming it)
EVENTS = {
    APPLICATION_COMMAND: ("APPLICATION_COMMAND", "command", "name"),
    MESSAGE_COMPONENT: ("MESSAGE_COMPONENT", "component", "custom_id"),
    MODAL_SUBMIT: ("MODAL_SUBMIT", "modal", "custom_id"),
}
# interaction callback types
PONG = 1
DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE = 5
DEFERRED_UPDATE_MESSAGE = 6
AUTOCOMPLETE_RESULT = 8
# Discord's epoch, 2015-01-01T00:00:00Z in ms: a snowflake's top 42 bits count ms from it
DISCORD_EPOCH_MS = 1420070400000


class DiscordInteractionsKeys(DiscordKeys):
    # how a stored interaction is acknowledged: "channel_message" (type 5, the user sees "thinking…"
    # and the handler's PATCH of @original is the reply) or "update_message" (type 6, for components:
    # no loading state, the handler edits the message the component is on)
    deferred_response: Literal["channel_message", "update_message"] = "channel_message"


def _json_reply(document: Mapping[str, object]) -> Reply:
    return Reply(200, json.dumps(document, separators=(",", ":")).encode(), "application/json")


def deferred_type(interaction_type: int, from_message: bool, setting: str) -> int:
    """The deferred response for a stored interaction. DEFERRED_UPDATE_MESSAGE is only valid for
    component-based interactions: a component, or a modal opened from one (it carries ``message``);
    a command is always answered DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE."""
    update = setting == "update_message" and (
        interaction_type == MESSAGE_COMPONENT or (interaction_type == MODAL_SUBMIT and from_message)
    )
    return DEFERRED_UPDATE_MESSAGE if update else DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE


def snowflake_id(value: object) -> str:
    """The interaction's id: a snowflake, decimal digits that fit in 64 bits."""
    text = required_id(value, "interaction id")
    if not (text.isascii() and text.isdigit() and int(text) < 2**64):
        raise BadPayload("interaction id is not a snowflake (a decimal number)")
    return text


def parse_interaction(body: bytes, deferred_response: str = "channel_message") -> Verdict:
    document = load_json(body, required=True)
    if not isinstance(document, dict):
        raise BadPayload("body is not a JSON object")
    kind = document.get("type")
    if isinstance(kind, bool) or not isinstance(kind, int):
        raise BadPayload(f"interaction type {text_or_none(kind)!r} is not an integer")
    if kind == 0 or "event" in document:  # Webhook Events (type 1 is an event there): wrong URL
        raise BadPayload("a Discord webhook event: its URL needs a source of kind 'discord'")
    if kind == PING:
        return Handshake(_json_reply({"type": PONG}), "PING")
    if kind == AUTOCOMPLETE:
        # nothing could answer it later: no choices now beats Discord's "loading options failed"
        no_choices = _json_reply({"type": AUTOCOMPLETE_RESULT, "data": {"choices": []}})
        return Handshake(no_choices, "APPLICATION_COMMAND_AUTOCOMPLETE: answered with no choices")
    if kind not in EVENTS:
        raise BadPayload(f"unknown Discord interaction type {str(kind)[:20]}")
    event_id = snowflake_id(document.get("id"))
    event_type, object_type, name_key = EVENTS[kind]
    data = document.get("data")
    object_id = text_or_none(data.get(name_key)) if isinstance(data, dict) else None
    event = ParsedEvent(
        event_id=event_id,
        event_type=event_type,
        object_type=object_type if object_id else None,
        object_id=object_id or None,
        occurred_at=epoch_time(((int(event_id) >> 22) + DISCORD_EPOCH_MS) / 1000),
    )
    from_message = isinstance(document.get("message"), dict)
    answer = {"type": deferred_type(kind, from_message, deferred_response)}
    return Received(event, _json_reply(answer))


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    keys = options.own(DiscordInteractionsKeys)
    assert keys.public_key is not None  # the provider's rule requires it
    verify_discord(
        request.headers,
        request.body,
        keys.public_key,
        now=request.now,
        tolerance=options.tolerance_seconds,
    )
    return parse_interaction(request.body, keys.deferred_response)


PROVIDER = Provider(
    "discord_interactions",
    verify=_verify,
    keys=DiscordInteractionsKeys,
    validate=public_key_rule,
    signed_with_secret=False,
    sensitive_headers=headers_named(SIGNATURE),
)
