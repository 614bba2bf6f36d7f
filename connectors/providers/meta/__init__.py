"""Meta webhooks (Facebook Pages, Instagram, WhatsApp Business, Messenger), received
(``kind = "meta"``): ``X-Hub-Signature-256`` over the body; the GET verification request answered
with its challenge when its verify token is the source's.

Facts (sources: Meta, "Getting Started" with Webhooks,
https://developers.facebook.com/docs/graph-api/webhooks/getting-started ("Verification Requests",
"Event Notifications", "Validating Payloads"); "Meta Webhooks for Messenger Platform",
https://developers.facebook.com/docs/messenger-platform/webhook-reference; WhatsApp Cloud API
"Webhooks", https://developers.facebook.com/docs/whatsapp/cloud-api/guides/set-up-webhooks):

- Verification: ``GET <callback>?hub.mode=subscribe&hub.challenge=<int>&hub.verify_token=<text>``,
  unsigned, when the callback URL is set (dashboard or ``/{app}/subscriptions``). The endpoint
  checks that ``hub.verify_token`` is the token given to Meta and answers ``200`` with
  ``hub.challenge`` as the body; Meta's sample answers ``403`` otherwise. The token is the source's
  ``verify_token_env`` (required for this kind); a wrong or missing one is a ``403``.
- Notifications: ``POST``, ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the payload, keyed
  with the App Secret>`` (App Dashboard > Settings > Basic; used as is). Meta signs "an escaped
  unicode version of the payload, with lowercase hex digits", which is the body as sent (non-ASCII
  arrives escaped), so the raw bytes are checked. No timestamp is signed: no replay window. The
  legacy ``X-Hub-Signature`` (SHA-1) is not used (masked all the same).
- Body: ``{"object": "page" | "instagram" | "whatsapp_business_account" | "user" | …, "entry":
  [{"id": …, "time": …, "changes": [{"field": …, "value": …}]} | {"id", "time", "messaging": […]}]}``.
  Meta "may batch" several entries (up to 1000) in one delivery, and sends no event id. Each entry is
  stored as an event of its own (a :class:`connectors.webhooks.Batch`), its identity ``meta:`` + the
  SHA-256 of the entry's compact JSON: a delivery resent as it was, or with its entries batched
  another way, stores each entry once; a per-delivery hash would store the same entry again when
  Meta re-batches it. Type: ``{object}.{field}`` of the entry's first change (``page.feed``,
  ``whatsapp_business_account.messages``), or ``{object}.messaging`` (Messenger); object: the
  ``object`` and the entry's ``id`` (the Page, Instagram account or WhatsApp Business Account);
  time: the entry's ``time`` (seconds, or milliseconds for Messenger; WhatsApp sends none).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from connectors import scheme_check
from connectors.declared import VerifyTokenKeys, keys_of, signer
from connectors.errors import RejectedDelivery
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.providers.meta.samples import SAMPLES
from connectors.scheme import Challenge, Scheme
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    SignatureError,
    Verdict,
    WebhookRequest,
    text_or_none,
)

SIGNATURE = "X-Hub-Signature-256"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    prefix="sha256=",
    events="entry",
    event_id="hash",
    id_prefix="meta:",
    event_type=None,
    occurred_at="body:time",
    object_id="body:id",
    challenges=(
        Challenge(
            when="query:hub.mode=subscribe",
            echo="query:hub.challenge",
            signed=False,
            token="query:hub.verify_token",
            method="GET",
        ),
    ),
)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    if request.method.upper() == "GET":
        if request.query_value("hub.mode") != "subscribe":
            raise BadPayload("a GET that is no verification request (hub.mode=subscribe)")
        try:
            return scheme_check.verify(SCHEME, request, secrets, keys_of(options))
        except SignatureError as exc:  # Meta's sample answers a wrong token with 403
            raise RejectedDelivery(403, exc.reason) from None
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if not isinstance(verdict, Batch):
        return verdict  # a delivery with no entries: acknowledged, nothing stored
    document = json.loads(request.body)  # verify has read it: a JSON object with a list "entry"
    kind = text_or_none(document.get("object")) or "unknown"
    return Batch(tuple(_named(item, kind) for item in verdict.items), ack=verdict.ack)


def _named(item: BatchItem, kind: str) -> BatchItem:
    entry: Any = json.loads(item.body)
    field = None
    if isinstance(entry, dict):
        changes = entry.get("changes")
        if isinstance(changes, list) and changes and isinstance(changes[0], dict):
            field = text_or_none(changes[0].get("field"))
        elif "messaging" in entry:
            field = "messaging"
        elif "standby" in entry:
            field = "standby"
    event = dataclasses.replace(
        item.event,
        event_type=f"{kind}.{field}" if field else kind,
        object_type=kind if item.event.object_id else None,
    )
    return dataclasses.replace(item, event=event)


def _rule(values: Mapping[str, Any]) -> str | None:
    if not values.get("verify_token_env"):
        return (
            "kind 'meta' needs key 'verify_token_env' (the variable holding the verify token "
            "given to Meta with the callback URL)"
        )
    return None


MASKED = SCHEME.header_names() | {"x-hub-signature"}

PROVIDER = Provider(
    "meta",
    verify=_verify,
    sign=signer(SCHEME),
    keys=VerifyTokenKeys,
    validate=_rule,
    receive_credentials=("verify_token_env",),
    sensitive_headers=lambda options: MASKED,
    tolerance=SCHEME.tolerance,
    methods=("POST", "GET"),
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME"]
