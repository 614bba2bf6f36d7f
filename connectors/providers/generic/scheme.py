"""The ``generic`` kind's signature, configured: its ``[[sources]]`` keys, and the
:class:`connectors.scheme.Scheme` they describe. One set of keys says what most providers do, so a
provider hookledger has no package for is received by configuration alone (docs/connectors.md,
"A provider by configuration": Paddle, Square, Zendesk and Mailgun as examples)."""

from __future__ import annotations

import functools
from typing import Literal

from connectors.options import ProviderKeys
from connectors.scheme import Algorithm, Scheme, SchemeError, SignatureList

# today's short names, and the rest of the scheme's algorithms
_ALGORITHMS: dict[str, Algorithm] = {
    "sha1": "hmac-sha1",
    "sha256": "hmac-sha256",
    "sha512": "hmac-sha512",
    "ed25519": "ed25519",
    "ecdsa-p256": "ecdsa-p256",
    "token": "token",
    "basic": "basic",
}


class GenericKeys(ProviderKeys):
    """How a generic sender signs its deliveries and names its events."""

    signature_header: str | None = None
    signature_json_path: str | None = None  # the signature inside the body (Mailgun)
    signature_algorithm: Literal[
        "sha1", "sha256", "sha512", "ed25519", "ecdsa-p256", "token", "basic"
    ] = "sha256"
    signature_encoding: Literal["hex", "base64", "base64url"] = "hex"
    signature_prefix: str = ""
    # the header is a k=v list: the signature is under this key (Paddle "h1", Stripe-like "v1")
    signature_list_key: str | None = None
    signature_list_separator: str = ","
    signature_pair_separator: str = "="
    # what is signed: "body", or a template ("{timestamp}:{body}", "{url}{body}", docs/connectors.md)
    signed_payload: str = "body"
    secret_encoding: Literal["raw", "base64", "whsec"] = "raw"
    timestamp_header: str | None = None
    timestamp_json_path: str | None = None
    timestamp_list_key: str | None = None  # the time is a key of the signature list ("ts", "t")
    timestamp_format: Literal["unix", "unix_ms", "iso"] = "unix"
    public_key: str | None = None  # ed25519 (hex or base64) or ecdsa-p256 (base64 DER)
    id_header: str | None = None
    id_json_path: str | None = None
    type_header: str | None = None
    type_json_path: str | None = None
    time_json_path: str | None = None
    events_json_path: str | None = None  # a delivery carrying several events (a list)


def _one(what: str, keys: GenericKeys, **places: str) -> str | None:
    """The place one of the keys names (``places``: key -> where), refusing two for one thing."""
    given = {
        key: f"{where}:{getattr(keys, key)}" for key, where in places.items() if getattr(keys, key)
    }
    if len(given) > 1:
        named = " and ".join(f"'{key}'" for key in given)
        raise SchemeError(f"keys {named} are two places for one {what}: keep one")
    return next(iter(given.values()), None)


@functools.lru_cache(maxsize=64)
def scheme_of(keys: GenericKeys) -> Scheme:
    """The scheme the keys describe, or a SchemeError naming the key that cannot work."""
    signature = _one("signature", keys, signature_header="header", signature_json_path="body")
    if signature is None:
        raise SchemeError("kind 'generic' needs key 'signature_header' or 'signature_json_path'")
    event_id = _one("id", keys, id_header="header", id_json_path="body")
    if event_id is None:
        raise SchemeError("kind 'generic' needs key 'id_header' or 'id_json_path'")
    stamp = _timestamp(keys)
    signed = "{body}" if keys.signed_payload == "body" else keys.signed_payload
    listed = None
    if keys.signature_list_key:
        listed = SignatureList(
            keys.signature_list_key, keys.signature_list_separator, keys.signature_pair_separator
        )
    return Scheme(
        signatures=(signature,),
        signed=signed,
        algorithm=_ALGORITHMS[keys.signature_algorithm],
        encoding=keys.signature_encoding,
        prefix=keys.signature_prefix,
        listed=listed,
        secret=keys.secret_encoding,
        timestamp=stamp,
        time_format=keys.timestamp_format,
        event_id=event_id,
        event_type=_one("type", keys, type_header="header", type_json_path="body"),
        occurred_at=f"body:{keys.time_json_path}" if keys.time_json_path else None,
        delivery_id=f"header:{keys.id_header}" if keys.id_header else None,
        events=keys.events_json_path,
        carried=tuple(h for h in (keys.id_header, keys.type_header) if h),
    )


def _timestamp(keys: GenericKeys) -> str | None:
    return _one(
        "timestamp",
        keys,
        timestamp_header="header",
        timestamp_json_path="body",
        timestamp_list_key="list",
    )
