"""Webhook signature schemes: pure functions from (headers, raw body, secrets, clock) to a verdict.

Every scheme signs the raw bytes, so verification happens before any parsing. Each configured secret
is tried (rotation) and each comparison is constant-time (:func:`hmac.compare_digest`).
Facts and test vectors: ``shared/providers.md`` and ``shared/fixtures/providers/``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping
from typing import Literal

from connectors.webhooks import (
    SignatureError,
    check_timestamp,
    hmac_digest,
    require_header,
    same_digest,
)

Headers = Mapping[str, str]  # keys lower-cased

# --- Stripe ---------------------------------------------------------------------------------------


def stripe_sign(body: bytes, secret: str, timestamp: int) -> str:
    """The ``Stripe-Signature`` header value Stripe would send (for tests and the sandbox)."""
    digest = hmac_digest(secret.encode(), f"{timestamp}.".encode() + body).hex()
    return f"t={timestamp},v1={digest}"


def verify_stripe(
    headers: Headers, body: bytes, secrets: Iterable[str], *, now: float, tolerance: int = 300
) -> None:
    """``Stripe-Signature: t=..,v1=..[,v1=..]``: hex HMAC-SHA256 of ``{t}.{body}``, key = secret as is.

    Like stripe-python (``stripe/_webhook.py``): only ``v1`` counts, any ``v1`` may match, only an old
    timestamp is rejected (Stripe's SDK does not reject future ones).
    """
    header = require_header(headers, "Stripe-Signature")
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise SignatureError("Stripe-Signature has a malformed timestamp") from None
        elif key == "v1":
            candidates.append(value)
    if timestamp is None:
        raise SignatureError("Stripe-Signature has no timestamp")
    if not candidates:
        raise SignatureError("Stripe-Signature has no v1 signature")
    signed = f"{timestamp}.".encode() + body
    for secret in secrets:
        expected = hmac_digest(secret.encode(), signed).hex()
        if any(same_digest(expected, c) for c in candidates):
            check_timestamp(timestamp, now, tolerance, reject_future=False)
            return
    raise SignatureError("Stripe-Signature does not match")


# --- GitHub ---------------------------------------------------------------------------------------


def github_sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac_digest(secret.encode(), body).hex()


def verify_github(headers: Headers, body: bytes, secrets: Iterable[str]) -> None:
    """``X-Hub-Signature-256: sha256=<hex>`` over the raw body. No timestamp is signed."""
    header = require_header(headers, "X-Hub-Signature-256")
    if not header.startswith("sha256="):
        raise SignatureError("X-Hub-Signature-256 does not start with sha256=")
    given = header[len("sha256=") :]
    for secret in secrets:
        if same_digest(hmac_digest(secret.encode(), body).hex(), given):
            return
    raise SignatureError("X-Hub-Signature-256 does not match")


# --- Shopify --------------------------------------------------------------------------------------


def shopify_sign(body: bytes, secret: str) -> str:
    return base64.b64encode(hmac_digest(secret.encode(), body)).decode()


def verify_shopify(headers: Headers, body: bytes, secrets: Iterable[str]) -> None:
    """``X-Shopify-Hmac-Sha256``: base64 HMAC-SHA256 of the raw body, compared decoded."""
    header = require_header(headers, "X-Shopify-Hmac-Sha256")
    try:
        given = base64.b64decode(header, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("X-Shopify-Hmac-Sha256 is not valid base64") from None
    for secret in secrets:
        if hmac.compare_digest(hmac_digest(secret.encode(), body), given):
            return
    raise SignatureError("X-Shopify-Hmac-Sha256 does not match")


# --- Standard Webhooks (Svix) ---------------------------------------------------------------------


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


# --- generic --------------------------------------------------------------------------------------


def generic_sign(
    body: bytes,
    secret: str,
    *,
    algorithm: str = "sha256",
    encoding: Literal["hex", "base64"] = "hex",
    prefix: str = "",
) -> str:
    digest = hmac_digest(secret.encode(), body, algorithm)
    text = digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()
    return prefix + text


def verify_generic(
    headers: Headers,
    body: bytes,
    secrets: Iterable[str],
    *,
    header: str,
    algorithm: str = "sha256",
    encoding: Literal["hex", "base64"] = "hex",
    prefix: str = "",
) -> None:
    """A configured HMAC over the raw body: header name, algorithm, hex or base64, optional prefix."""
    value = require_header(headers, header)
    if prefix:
        if not value.startswith(prefix):
            raise SignatureError(f"{header} does not start with {prefix}")
        value = value[len(prefix) :]
    if encoding == "hex":
        try:
            given = bytes.fromhex(value)
        except ValueError:
            raise SignatureError(f"{header} is not valid hex") from None
    else:
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise SignatureError(f"{header} is not valid base64") from None
    for secret in secrets:
        if hmac.compare_digest(hmac_digest(secret.encode(), body, algorithm), given):
            return
    raise SignatureError(f"{header} does not match")
