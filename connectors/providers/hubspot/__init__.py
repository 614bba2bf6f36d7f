"""HubSpot's webhooks, received (``kind = "hubspot"``): signature v3, a batch of events per request.

Facts, with their sources:

- Signature: ``X-HubSpot-Signature-v3``, the base64 HMAC-SHA256, keyed with the app's client secret
  (as written, UTF-8), of ``method + URI + body + timestamp``; the timestamp is
  ``X-HubSpot-Request-Timestamp`` in Unix milliseconds. "Reject the request if the timestamp is older
  than 5 minutes." The URI is the full URL HubSpot called (scheme, host, path, query) with these
  percent-escapes decoded first: ``%3A : %2F / %3F ? %40 @ %21 ! %24 $ %27 ' %28 ( %29 ) %2A * %2C ,
  %3B ;`` (others, ``%26`` and ``%3D`` among them, stay encoded).
  https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation
  https://developers.hubspot.com/changelog/introducing-version-3-of-webhook-signatures
  Official library: hubspot-api-client ``hubspot.utils.signature.Signature`` (12.0.0) computes the
  same HMAC over the URI it is given (it does not decode it: the caller does) and refuses a timestamp
  older than 300 s (it accepts any future one; hookledger refuses one beyond the window too).
  The older ``X-HubSpot-Signature`` (v1/v2: a plain SHA-256 with the secret inside) is not checked.
- Body: a JSON array of events (up to 100), each with ``eventId``, ``subscriptionId``, ``portalId``,
  ``appId``, ``occurredAt`` (ms), ``subscriptionType`` (``contact.creation``, ``object.propertyChange``
  …), ``attemptNumber`` (0 on the first try, then 1, 2 … on retries), ``objectId`` and, for generic
  subscriptions, ``objectTypeId``. https://developers.hubspot.com/docs/api/webhooks
- Identity: HubSpot documents ``eventId`` as "not guaranteed to be unique", so each event is stored
  as ``<portalId>:<subscriptionId>:<eventId>:<occurredAt>``: all four stay the same when an event is
  sent again (only ``attemptNumber`` changes, left out of the content fingerprint), and two events
  that share an ``eventId`` still differ by account, subscription or time.
- No handshake: subscriptions are made in the app's settings or through the API.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.options import SourceOptions
from connectors.parsing import epoch_time, required_id, text_or_none
from connectors.provider import Provider, headers_named
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    Handshake,
    ParsedEvent,
    Reply,
    Verdict,
    WebhookRequest,
    load_json,
)

SIGNATURE = "X-HubSpot-Signature-v3"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{method}{url}{body}{timestamp}",
    algorithm="hmac-sha256",
    encoding="base64",
    timestamp="header:X-HubSpot-Request-Timestamp",
    time_format="unix_ms",
    tolerance=300,
    # per event of the top-level array (read by this package: a scheme's ``events`` path cannot name
    # the document itself); the stored id is composite, see the module's docstring
    event_id="body:eventId",
    event_type="body:subscriptionType",
    occurred_at="body:occurredAt",
    object_id="body:objectId",
)

# the percent-escapes HubSpot decodes in the URI before signing (and only these)
_DECODED = {
    "%3A": ":",
    "%2F": "/",
    "%3F": "?",
    "%40": "@",
    "%21": "!",
    "%24": "$",
    "%27": "'",
    "%28": "(",
    "%29": ")",
    "%2A": "*",
    "%2C": ",",
    "%3B": ";",
}
_ESCAPE = re.compile("|".join(_DECODED), re.IGNORECASE)


def signed_uri(url: str) -> str:
    """The URI as HubSpot signs it: the listed escapes decoded, in one pass (``%253A`` stays
    ``%3A``)."""
    return _ESCAPE.sub(lambda match: _DECODED[match.group(0).upper()], url)


def event_identity(event: Mapping[str, Any]) -> ParsedEvent:
    event_id = required_id(event.get("eventId"), "eventId")
    parts = [text_or_none(event.get(k)) or "" for k in ("portalId", "subscriptionId")]
    occurred = event.get("occurredAt")
    kind = text_or_none(event.get("subscriptionType"))
    object_type = text_or_none(event.get("objectTypeId"))
    if object_type is None and kind and not kind.startswith("object."):
        object_type = kind.partition(".")[0]
    moment = None
    if isinstance(occurred, int) and not isinstance(occurred, bool):
        moment = epoch_time(occurred / 1000)
    return ParsedEvent(
        event_id=required_id(":".join([*parts, event_id, text_or_none(occurred) or ""]), "eventId"),
        event_type=kind,
        object_type=object_type,
        object_id=text_or_none(event.get("objectId")),
        occurred_at=moment,
    )


def read_batch(body: bytes) -> Verdict:
    """Every event of the array, each stored on its own identity."""
    document = load_json(body, required=True)
    if not isinstance(document, list):
        raise BadPayload("body is not a JSON array of HubSpot events")
    if not document:
        return Handshake(Reply(200), "a delivery with no events")
    items = []
    for event in document:
        if not isinstance(event, dict):
            raise BadPayload("an item of the array is not a JSON object")
        own = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        items.append(BatchItem(event_identity(event), own.encode("utf-8", "surrogatepass")))
    return Batch(tuple(items))


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    signed = dataclasses.replace(request, url=signed_uri(request.url))
    scheme_check.check_signature(
        SCHEME, signed, secrets, scheme_check.Keys(), tolerance=options.tolerance_seconds
    )
    return read_batch(request.body)


def sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return scheme_check.sign(SCHEME, headers, body, secret, now, signed_uri(url))


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now_ms = int(time.time() * 1000)
    event: dict[str, Any] = {
        "eventId": uuid.uuid4().int % 4_000_000_000,
        "subscriptionId": 2_881_778,
        "portalId": 62_515,
        "appId": 1_160_452,
        "occurredAt": now_ms,
        "subscriptionType": event_type,
        "attemptNumber": 0,
        "objectId": 1_246_965 + now_ms % 100_000,
        "changeSource": "CRM",
    }
    if event_type.endswith(".propertyChange"):
        event |= {"propertyName": "lifecyclestage", "propertyValue": "customer"}
    else:
        event["changeFlag"] = "NEW"
    identity = event_identity(event)
    return Sample(identity.event_id, compact_json([event]), {"content-type": "application/json"})


SAMPLES = Catalogue(("contact.creation", "contact.propertyChange", "deal.creation"), _sample)

PROVIDER = Provider(
    "hubspot",
    verify=verify,
    sign=sign,
    as_sent=lambda body: b"[" + body + b"]",  # a delivery is a JSON array of events
    sensitive_headers=headers_named(SIGNATURE, "X-HubSpot-Signature"),
    fingerprint_ignore=("attemptNumber",),
    samples=SAMPLES,
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
)
