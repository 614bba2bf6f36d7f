"""GoCardless webhooks, received (``kind = "gocardless"``): one signed delivery, several events.

Facts, with their sources:

- **Signature.** ``Webhook-Signature``: the lower-case hex HMAC-SHA256 of the raw body, keyed with
  the webhook endpoint's secret as the dashboard shows it (used as is). No timestamp is signed, so
  there is no time window. Sources: "Stay up to date with webhooks"
  (https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks) and the
  official library, ``gocardless_pro.webhooks.parse`` / ``_verify_signature`` (gocardless-pro
  3.22.0): ``hmac.new(secret, body, sha256).hexdigest()`` compared with the header.
- **Refusal.** "Webhooks with an invalid signature must return a 498 Token Invalid error" (GoCardless
  API reference, "Webhooks" overview, https://developer.gocardless.com/api-reference/#appendix-webhooks):
  a refused signature is a :class:`InvalidToken`, a ``SignatureError`` answered 498.
- **Batch.** The body is ``{"events": [...], "meta": {"webhook_id": "WB…"}}``: "Webhooks may contain
  multiple events" (up to 250), each stored on its own identity. Unknown events "should be ignored,
  and return 204 No Content": any 2xx is a success; hookledger's usual 200 is one.
- **Identity.** Each event's ``id`` (``EV…``); type ``<resource_type>.<action>`` (``payments.
  confirmed``, ``mandates.cancelled``), object ``resource_type`` and ``links.<resource>`` (the
  resource type singular: ``links.payment``); time ``created_at`` (ISO 8601); delivery
  ``meta.webhook_id`` (the whole delivery's id, the same on every event of it).
"""

from __future__ import annotations

import dataclasses
import random
import string
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent, json_path_get, load_json, text_or_none
from connectors.providers.gocardless.api import BUDGET, build
from connectors.scheme import Scheme
from connectors.webhooks import Batch, BatchItem, SignatureError, Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("header:Webhook-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id="body:id",
    event_type="body:action",  # composed with resource_type below (the scheme names one place)
    object_type="body:resource_type",
    occurred_at="body:created_at",
    events="events",
)

TOKEN_INVALID = 498  # GoCardless: "Webhooks with an invalid signature must return a 498"


class InvalidToken(SignatureError):
    """A signature GoCardless' endpoint contract answers with 498 Token Invalid."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.status_code = TOKEN_INVALID


def _identity(event: ParsedEvent, item: Any, webhook_id: str | None) -> ParsedEvent:
    resource = event.object_type
    action = event.event_type
    links = item.get("links") if isinstance(item, dict) else None
    singular = resource[:-1] if resource and resource.endswith("s") else resource
    object_id = text_or_none(links.get(singular)) if isinstance(links, dict) and singular else None
    return dataclasses.replace(
        event,
        event_type=f"{resource}.{action}" if resource and action else action,
        object_id=object_id,
        delivery_id=webhook_id,
    )


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    try:
        verdict = scheme_check.verify(SCHEME, request, secrets, tolerance=options.tolerance_seconds)
    except SignatureError as exc:
        raise InvalidToken(exc.reason) from None
    if not isinstance(verdict, Batch):
        return verdict
    document = load_json(request.body, required=True)  # read and checked by scheme_check
    webhook_id = text_or_none(json_path_get(document, "meta.webhook_id"))
    items = document["events"]
    return Batch(
        tuple(
            BatchItem(_identity(entry.event, raw, webhook_id), entry.body, entry.content_type)
            for entry, raw in zip(verdict.items, items, strict=True)
        ),
        verdict.ack,
    )


def _gc_id(prefix: str) -> str:
    return prefix + "".join(random.choices(string.ascii_uppercase + string.digits, k=12))


# details as GoCardless' examples show them (origin, cause, description; a bank's scheme and code)
_DETAILS: dict[str, dict[str, str]] = {
    "payments.confirmed": {
        "origin": "gocardless",
        "cause": "payment_confirmed",
        "description": "Enough time has passed since the payment was submitted for the banks to "
        "return an error, so this payment is now confirmed.",
    },
    "payments.failed": {
        "origin": "bank",
        "cause": "insufficient_funds",
        "description": "The customer's account had insufficient funds to make this payment.",
        "scheme": "sepa_core",
        "reason_code": "AM04",
    },
    "mandates.cancelled": {
        "origin": "bank",
        "cause": "bank_account_disabled",
        "description": "Your customer closed their bank account.",
        "scheme": "bacs",
        "reason_code": "ADDACS-B",
    },
}


def _event(event_type: str) -> dict[str, Any]:
    resource, _, action = event_type.partition(".")
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {
        "id": _gc_id("EV"),
        "created_at": now,
        "resource_type": resource,
        "action": action,
        "links": {resource[:-1]: _gc_id("PM" if resource == "payments" else "MD")},
        "details": dict(_DETAILS[event_type]),
        "metadata": {},
    }


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event = _event(event_type)
    # a delivery of one event: its identity is the event's (a batch's first event)
    body = compact_json({"events": [event], "meta": {"webhook_id": _gc_id("WB")}})
    return Sample(event["id"], body, {"content-type": "application/json"})


SAMPLES = Catalogue(("payments.confirmed", "payments.failed", "mandates.cancelled"), _sample)

PROVIDER = dataclasses.replace(
    declared("gocardless", SCHEME, samples=SAMPLES, build=build, budget=BUDGET), verify=verify
)
