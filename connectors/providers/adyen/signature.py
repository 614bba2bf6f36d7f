"""Adyen's HMAC signature of one ``NotificationRequestItem``: base64 HMAC-SHA256, keyed with the
hex HMAC key, over the item's signed fields joined with ``:`` (``Adyen.util.generate_notification_sig``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

from connectors.webhooks import SignatureError, hmac_digest, same_digest

SIGNED_FIELDS = (
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "value",
    "currency",
    "eventCode",
    "success",
)


def _signed_text(item: Mapping[str, Any]) -> str:
    amount = item.get("amount")
    amount = amount if isinstance(amount, Mapping) else {}
    values = {**item, "value": amount.get("value", ""), "currency": amount.get("currency", "")}
    return ":".join("" if values.get(k) is None else str(values.get(k)) for k in SIGNED_FIELDS)


def adyen_sign(item: Mapping[str, Any], hex_key: str) -> str:
    """An item's ``additionalData.hmacSignature`` as Adyen computes it."""
    try:
        key = binascii.unhexlify(hex_key.strip())
    except (binascii.Error, ValueError):
        raise SignatureError("the Adyen HMAC key is not hexadecimal") from None
    try:
        signed = _signed_text(item).encode()
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text Adyen could have signed
        raise SignatureError("a signed field is not UTF-8 text (a lone surrogate)") from None
    return base64.b64encode(hmac_digest(key, signed)).decode()


def verify_item(item: Mapping[str, Any], secrets: Iterable[str], where: str) -> None:
    extra = item.get("additionalData")
    given = extra.get("hmacSignature") if isinstance(extra, Mapping) else None
    if not isinstance(given, str) or not given:
        raise SignatureError(f"{where} has no additionalData.hmacSignature")
    for secret in secrets:
        if same_digest(adyen_sign(item, secret), given):
            return
    raise SignatureError(f"{where}: additionalData.hmacSignature does not match")
