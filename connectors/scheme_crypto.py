"""The arithmetic of a :class:`connectors.scheme.Scheme`: secrets and signatures decoded, digests
encoded, public keys loaded and checked, signed times read. Pure functions; hostile text is a
:class:`SignatureError` (or no match), never another exception."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Any

from connectors.parsing import iso_time
from connectors.scheme import Scheme
from connectors.webhooks import SignatureError

HMAC = {"hmac-sha1": hashlib.sha1, "hmac-sha256": hashlib.sha256, "hmac-sha512": hashlib.sha512}


def digest(scheme: Scheme, secret: str, message: bytes) -> bytes:
    """The HMAC of ``message`` with the secret as the scheme writes it."""
    return hmac.new(secret_bytes(scheme, secret), message, HMAC[scheme.algorithm]).digest()


def secret_bytes(scheme: Scheme, secret: str) -> bytes:
    if scheme.secret == "raw":
        return secret.encode()
    raw = secret.removeprefix("whsec_") if scheme.secret == "whsec" else secret
    try:
        return base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("the configured signing secret is not valid base64") from None


def decoded(scheme: Scheme, text: str) -> bytes | None:
    if not text.isascii():
        return None
    try:
        if scheme.encoding == "hex":
            return bytes.fromhex(text)
        if scheme.encoding == "base64url":
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def encoded(scheme: Scheme, digest: bytes) -> str:
    if scheme.encoding == "hex":
        return digest.hex()
    if scheme.encoding == "base64url":
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return base64.b64encode(digest).decode()


def public_check(scheme: Scheme, message: bytes, given: list[bytes], public_key: str) -> bool:
    from cryptography.exceptions import InvalidSignature

    key = load_public_key(scheme, public_key)
    for candidate in given:
        try:
            if scheme.algorithm == "ed25519":
                key.verify(candidate, message)
            else:
                from cryptography.hazmat.primitives import hashes
                from cryptography.hazmat.primitives.asymmetric import ec

                key.verify(candidate, message, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            continue
        return True
    return False


def load_public_key(scheme: Scheme, text: str) -> Any:
    """The provider's public key as its console shows it (Ed25519: hex or base64; ECDSA P-256:
    base64 DER). A ValueError says it is none."""
    if scheme.algorithm == "ed25519":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            raw = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not hex or base64") from None
        return Ed25519PublicKey.from_public_bytes(raw)
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    try:
        key = load_der_public_key(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, TypeError):
        raise ValueError("not a base64 DER public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("not a P-256 public key")
    return key


def basic_credentials(credentials: str) -> bytes:
    try:
        return base64.b64decode(credentials, validate=True)
    except (binascii.Error, ValueError):
        return b""


def unix_time(scheme: Scheme, text: str, name: str) -> int:
    if scheme.time_format == "iso":
        moment = iso_time(text)
        if moment is None:
            raise SignatureError(f"{name} is not an ISO 8601 time")
        return int(moment.timestamp())
    if not (text.isascii() and text.isdigit() and len(text) <= 16):
        raise SignatureError(f"{name} is not a Unix time")
    return int(text) // 1000 if scheme.time_format == "unix_ms" else int(text)
