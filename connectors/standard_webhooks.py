"""Standard Webhooks (https://www.standardwebhooks.com) signatures: the scheme of the ``standard``
kind and of the senders built on Svix, and the one hookledger signs its own outgoing messages with
(the outbox, notifications). Pure functions; shared, so signing an outgoing message imports no
provider.

``webhook-signature`` signs the raw bytes, so verification happens before any parsing. Each configured
secret is tried (rotation) and each comparison is constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping

from connectors.webhooks import SignatureError, check_timestamp, hmac_digest, require_header

Headers = Mapping[str, str]  # keys lower-cased


def standard_key(secret: str) -> bytes:
    """``whsec_<base64>`` → key bytes. Unpadded base64 is accepted, as the reference library does."""
    raw = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    try:
        return base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(
            "the configured Standard Webhooks secret is not valid base64"
        ) from None


def standard_sign(body: bytes, secret: str, msg_id: str, timestamp: int) -> str:
    digest = hmac_digest(standard_key(secret), f"{msg_id}.{timestamp}.".encode() + body)
    return "v1," + base64.b64encode(digest).decode()


def verify_standard(
    headers: Headers, body: bytes, secrets: Iterable[str], *, now: float, tolerance: int = 300
) -> None:
    """``webhook-signature``: space-separated ``v1,<b64>`` over ``{id}.{timestamp}.{body}``.

    The timestamp must be within the tolerance in both directions (the reference libraries use 5 min).
    """
    msg_id = require_header(headers, "webhook-id")
    ts_raw = require_header(headers, "webhook-timestamp")
    header = require_header(headers, "webhook-signature")
    try:
        timestamp = int(ts_raw)
    except ValueError:
        raise SignatureError("webhook-timestamp is not an integer") from None
    candidates = []
    for entry in header.split():
        version, _, value = entry.partition(",")
        if version == "v1" and value:
            try:
                candidates.append(base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                continue
    if not candidates:
        raise SignatureError("webhook-signature has no v1 signature")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    for secret in secrets:
        expected = hmac_digest(standard_key(secret), signed)
        if any(hmac.compare_digest(expected, c) for c in candidates):
            check_timestamp(timestamp, now, tolerance, reject_future=True)
            return
    raise SignatureError("webhook-signature does not match")
