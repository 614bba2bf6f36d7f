"""Box webhooks (V2), received (``kind = "box"``): two signatures over the body and the delivery
time, two keys for rotation.

Facts (sources: Box, "Signature Verification",
https://developer.box.com/guides/webhooks/v2/signatures-v2/ and "Rotate signatures",
https://developer.box.com/guides/webhooks/handle/rotate-signatures/; the official SDK
``box-sdk-gen``, ``WebhooksManager.validate_message`` and ``internal.utils.compute_webhook_signature``):

- Headers: ``BOX-DELIVERY-ID``, ``BOX-DELIVERY-TIMESTAMP`` (ISO 8601 with an offset,
  "2020-01-01T00:00:00-07:00"), ``BOX-SIGNATURE-ALGORITHM: HmacSHA256``, ``BOX-SIGNATURE-VERSION: 1``,
  ``BOX-SIGNATURE-PRIMARY`` and ``BOX-SIGNATURE-SECONDARY``.
- Signature: HMAC-SHA256, base64, of the raw body's bytes followed by the timestamp's bytes as sent,
  keyed with the application's primary key (``-PRIMARY``) and secondary key (``-SECONDARY``), both
  generated in the Developer Console and used as is. Two keys exist so one can be rotated while the
  other still verifies: configure both as the source's signing secrets; every secret is tried
  against both headers (the SDK pairs them, primary with primary; a key matching the other header
  is still the application's own key).
- The SDK refuses a signature version other than ``1`` or an algorithm other than ``HmacSHA256``
  (it cannot compute those): so does this provider.
- Time: "Ensure the timestamp in the BOX-DELIVERY-TIMESTAMP header of the payload is not older than
  ten minutes" (the SDK's ``max_age=600``): tolerance 600 s.
- The SDK also tries a second form of the body with non-ASCII text escaped; that form exists for
  callers that hand it a re-serialised body (box/box-python-sdk-gen#596: Box signs the raw body).
  hookledger has the raw bytes and checks those only.
- Body: ``{"type": "webhook_event", "id": …, "created_at": …, "trigger": "FILE.UPLOADED",
  "webhook": {…}, "created_by": {…}, "source": {"id": …, "type": "file", …}}``
  (https://developer.box.com/guides/webhooks/v2/). Identity: the event's ``id`` (a retry carries the
  same one; ``BOX-DELIVERY-ID`` names the delivery); type: ``trigger``; time: ``created_at``; object:
  ``source``. Box has no subscription handshake.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import keys_of
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

PRIMARY = "box-signature-primary"
SECONDARY = "box-signature-secondary"
TIMESTAMP = "box-delivery-timestamp"
VERSION = "box-signature-version"
ALGORITHM = "box-signature-algorithm"

SCHEME = Scheme(
    signatures=(f"header:{PRIMARY}", f"header:{SECONDARY}"),
    signed="{body}{timestamp}",
    algorithm="hmac-sha256",
    encoding="base64",
    timestamp=f"header:{TIMESTAMP}",
    time_format="iso",
    tolerance=600,
    event_id="body:id",
    event_type="body:trigger",
    occurred_at="body:created_at",
    object_id="body:source.id",
    object_type="body:source.type",
    delivery_id="header:box-delivery-id",
    carried=("box-delivery-id",),
)

# what the SDK can verify (and so what Box sends today)
FORM = {VERSION: "1", ALGORITHM: "HmacSHA256"}


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    for name, expected in FORM.items():
        given = request.header(name)
        if given is None:
            raise SignatureError(f"missing header {name}")
        if given.strip() != expected:
            raise SignatureError(f"{name} is {given.strip()!r}; only {expected!r} is known")
    return scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )


def _sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    """Signed as Box signs with its primary key (``-SECONDARY`` left out)."""
    return {**scheme_check.sign(SCHEME, headers, body, secret, now, url), **FORM}


# -- samples, shaped after the payload in https://developer.box.com/guides/webhooks/v2/ -----------

_SOURCES: dict[str, dict[str, Any]] = {
    "FILE.UPLOADED": {"type": "file", "name": "Q3 report.pdf", "sequence_id": "0"},
    "FILE.PREVIEWED": {"type": "file", "name": "Test-Image-3.png", "sequence_id": "2"},
    "FOLDER.CREATED": {"type": "folder", "name": "Contracts", "sequence_id": "0"},
}


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event_id = str(uuid.uuid4())
    source = {"id": str(int(token(12), 16) % 10**11), **_SOURCES[event_type]}
    body = {
        "type": "webhook_event",
        "id": event_id,
        "created_at": datetime.now(UTC).astimezone().isoformat(timespec="seconds"),
        "trigger": event_type,
        "webhook": {"id": "53", "type": "webhook"},
        "created_by": {
            "type": "user",
            "id": "226067247",
            "name": "John Q. Developer",
            "login": "johnq@dev.name",
        },
        "source": source,
        "additional_info": [],
    }
    headers = {"content-type": "application/json", "box-delivery-id": str(uuid.uuid4())}
    return Sample(event_id, compact_json(body), headers)


SAMPLES = Catalogue(tuple(_SOURCES), _build)

PROVIDER = Provider(
    "box",
    verify=_verify,
    sign=_sign,
    sensitive_headers=lambda options: SCHEME.header_names(),
    tolerance=SCHEME.tolerance,
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME"]
