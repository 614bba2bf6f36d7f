"""DocuSign Connect (``kind = "docusign"``): HMAC, one ``X-DocuSign-Signature-<n>`` per key.

Facts, each with its source:

- **Signature.** With "Include HMAC Signature" set on the Connect configuration, each message carries
  ``X-DocuSign-Signature-1`` (and ``-2``, ``-3``, … one per active Connect HMAC key): base64
  HMAC-SHA256 of the whole raw body ("the entire body of the POST request is used, including line
  endings"), keyed with the key as DocuSign showed it (UTF-8 bytes). One matching header is enough.
  https://developers.docusign.com/platform/webhooks/connect/validate (the ``ComputeHash`` /
  ``HashIsValid`` example: ``HMACSHA256(Encoding.UTF8.GetBytes(secret))``, ``Convert.ToBase64String``;
  "There will be one x-docusign-signature header value for each" key);
  https://developers.docusign.com/platform/webhooks/connect/hmac ; docusign/code-examples-php
  ``src/ConnectWebhookHMACValidation.php``. DocuSign's Python SDK (docusign-esign 6.1.0) has no
  verifier. Up to 100 keys are read (``-1`` … ``-100``): that limit is from
  https://www.skills.sh/hookdeck/webhook-skills/docusign-webhooks, not from DocuSign's own pages.
- **Time window.** None: nothing signed carries a time the receiver can hold to a window (a retry is
  the same message, later).
- **Format.** JSON SIM only (DocuSign's default and recommendation); an XML or aggregate JSON message
  (no ``event``) is a 400 saying so.
- **Identity.** JSON SIM messages are ``{"event": "envelope-completed", "apiVersion": "v2.1", "uri":
  …, "retryCount": 0, "configurationId": …, "generatedDateTime": "<ISO 8601>", "data":
  {"accountId": …, "userId": …, "envelopeId": …, [recipientId, envelopeSummary …]}}``
  (https://developers.docusign.com/platform/webhooks/connect/json-sim-event-model). DocuSign sends
  **no event id**, and a retry changes ``retryCount``; so the identity is the SHA-256 of the
  message with ``retryCount`` left out, keys sorted (``docusign:<hex>``): a retry is a duplicate,
  another event (another ``event``, envelope, recipient or ``generatedDateTime``) is not. The type
  is ``event``, the time ``generatedDateTime``, the object the envelope (``data.envelopeId``).
- **Handshakes.** None (DocuSign's other authentications, OAuth for Connect, Basic and mutual TLS,
  are outside hookledger).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import load_json
from connectors.scheme import Scheme
from connectors.webhooks import BadPayload, ParsedEvent, Verdict, WebhookRequest

KEYS = 100  # X-DocuSign-Signature-1 … -100
ID_PREFIX = "docusign:"
# what changes between deliveries of one message, left out of its identity
_PER_DELIVERY = ("retryCount",)

SCHEME = Scheme(
    signatures=tuple(f"header:X-DocuSign-Signature-{n}" for n in range(1, KEYS + 1)),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="base64",
    event_id="hash",
    id_prefix=ID_PREFIX,
    event_type="body:event",
    occurred_at="body:generatedDateTime",
    object_id="body:data.envelopeId",
)


def identity(document: Any) -> str:
    """The message's identity: SHA-256 of its JSON with keys sorted, ``retryCount`` left out."""
    if isinstance(document, dict):
        document = {k: v for k, v in document.items() if k not in _PER_DELIVERY}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ID_PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    account, envelope = str(uuid.uuid4()), str(uuid.uuid4())
    data: dict[str, Any] = {
        "accountId": account,
        "userId": str(uuid.uuid4()),
        "envelopeId": envelope,
    }
    if event_type.startswith("recipient-"):
        data["recipientId"] = "1"
    document = {
        "event": event_type,
        "apiVersion": "v2.1",
        "uri": f"/restapi/v2.1/accounts/{account}/envelopes/{envelope}",
        "retryCount": 0,
        "configurationId": 10000001,
        "generatedDateTime": now,
        "data": data,
    }
    body = compact_json(document)
    return Sample(identity(document), body, {"content-type": "application/json"})


SAMPLES = Catalogue(("envelope-completed", "envelope-sent", "recipient-completed"), _sample)

_DECLARED = declared("docusign", SCHEME, samples=SAMPLES)


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    """The scheme's verdict (any signature header, any secret), its identity the message's own."""
    verdict = _DECLARED.verify(options, request, secrets)
    if isinstance(verdict, ParsedEvent):
        if verdict.event_type is None:
            raise BadPayload(
                "not a JSON SIM message (no 'event'): set the Connect configuration's data format"
                " to JSON SIM (REST v2.1)"
            )
        document = load_json(request.body, required=True)
        kind = "envelope" if verdict.object_id else None
        return dataclasses.replace(verdict, event_id=identity(document), object_type=kind)
    return verdict


PROVIDER = dataclasses.replace(_DECLARED, verify=verify)
