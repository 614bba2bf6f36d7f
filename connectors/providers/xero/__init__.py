"""Xero webhooks, received (``kind = "xero"``): a base64 HMAC of the body, several events a delivery,
the "Intent to receive" validation passed.

Facts (sources: Xero, "Configuring your server",
https://developer.xero.com/documentation/webhooks/configuring-your-server and "Webhooks overview",
https://developer.xero.com/documentation/guides/webhooks/overview/; Xero's SDKs ``xero-python``
(15.2.0, read) and ``xero-node`` have no webhook helper, so there is no library to cross-check with):

- Header ``x-xero-signature``: "the payload hashed using HMACSHA256 with your webhook signing key and
  base64 encoded"; the key is the "Webhook key" of the app's webhook page, used as is.
- No timestamp is signed: no replay window. ``entropy`` makes every body unique.
- The endpoint must answer "within 5 seconds with a 200 O.K status code", with "no body in the
  response" and no cookies, and "if the signature is invalid a 401 Unauthorised".
- Intent to receive: when a subscription is created, re-enabled or its URL changed, Xero sends a
  series of requests ``{"events": [], "firstEventSequence": 0, "lastEventSequence": 0,
  "entropy": …}``, some signed correctly and some not: "the receiving url must respond with status:
  200 Ok for all correctly signed payloads and respond with status: 401 Unauthorized for all
  incorrectly signed payloads". So a delivery with no events is a ``handshake`` (200, empty body),
  and any bad signature is a 401 (``SignatureError``).
- Events: ``{"events": [{"resourceUrl", "resourceId", "eventDateUtc", "eventType": "UPDATE",
  "eventCategory": "INVOICE", "tenantId", "tenantType"}], …}``: a batch, each event stored on its own.
  Xero sends no event id: each event's identity is ``xero:`` + the SHA-256 of the event's compact
  JSON, so the same event resent (in the same or another delivery) is a duplicate. Type:
  ``eventCategory.eventType`` (``INVOICE.UPDATE``); object: ``eventCategory`` and ``resourceId``;
  time: ``eventDateUtc``; account: ``tenantId`` (the organisation). The events carry no data: the
  resource is read through ``resourceUrl``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import keys_of, signer
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import (
    Batch,
    BatchItem,
    Handshake,
    Reply,
    Verdict,
    WebhookRequest,
    text_or_none,
)

SIGNATURE = "x-xero-signature"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    events="events",
    event_id="hash",
    id_prefix="xero:",
    event_type="body:eventType",
    occurred_at="body:eventDateUtc",
    object_id="body:resourceId",
    object_type="body:eventCategory",
)

# "It responds within 5 seconds with a 200 O.K status code; there is no body in the response"
ACK = Reply(200)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if isinstance(verdict, Handshake):  # no events: the Intent to receive, correctly signed
        return Handshake(ACK, "intent to receive (a delivery with no events)")
    if not isinstance(verdict, Batch):
        return verdict
    return Batch(tuple(_named(item) for item in verdict.items), ack=ACK)


def _named(item: BatchItem) -> BatchItem:
    """The type as ``INVOICE.UPDATE`` and the organisation as the account."""
    document = json.loads(item.body)
    category = text_or_none(document.get("eventCategory"))
    kind = text_or_none(document.get("eventType"))
    event = dataclasses.replace(
        item.event,
        event_type=f"{category}.{kind}" if category and kind else kind or category,
        account=text_or_none(document.get("tenantId")),
    )
    return dataclasses.replace(item, event=event)


def event_id(event: Mapping[str, object]) -> str:
    """The identity this provider gives one event of a delivery."""
    compact = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return SCHEME.id_prefix + hashlib.sha256(compact.encode()).hexdigest()


# -- samples, shaped after the example of the webhooks overview ---------------------------------

_RESOURCES = {"INVOICE": "Invoices", "CONTACT": "Contacts", "CREDITNOTE": "CreditNotes"}


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    category, _, kind = event_type.partition(".")
    resource = str(uuid.uuid4())
    event = {
        "resourceUrl": f"https://api.xero.com/api.xro/2.0/{_RESOURCES[category]}/{resource}",
        "resourceId": resource,
        "eventDateUtc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3],
        "eventType": kind,
        "eventCategory": category,
        "tenantId": "c2cc9b6e-9458-4c7d-93cc-f02b81b0594f",
        "tenantType": "ORGANISATION",
    }
    sequence = int(datetime.now(UTC).timestamp())
    body = {
        "events": [event],
        "firstEventSequence": sequence,
        "lastEventSequence": sequence,
        "entropy": token(10).upper(),
    }
    return Sample(event_id(event), compact_json(body), {"content-type": "application/json"})


SAMPLES = Catalogue(("INVOICE.UPDATE", "INVOICE.CREATE", "CONTACT.CREATE"), _build)

PROVIDER = Provider(
    "xero",
    verify=_verify,
    sign=signer(SCHEME),
    sensitive_headers=lambda options: SCHEME.header_names(),
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME", "event_id"]
