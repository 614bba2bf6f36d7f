"""Masking of secrets and configured PII in payloads shown to people (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

MASK = "<masked>"
# Keys whose values are credentials wherever they appear in a payload (case-insensitive, substring
# match on the normalised name: "client_secret", "webhookSecret", "access_token" ...).
SECRET_KEY_PARTS = ("secret", "password", "passwd", "token", "api_key", "apikey", "authorization")
_NORMALISE = re.compile(r"[^a-z0-9]")
# Payment data is masked by its value too, whatever key holds it: a card number (13-19 digits, spaces
# or dashes allowed, passing the Luhn check) or an IBAN (passing its mod-97 check). Numbers stored as
# JSON numbers (ids) are never touched.
_CARD = re.compile(r"\d(?:[ -]?\d){12,18}")
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_valid(text: str) -> bool:
    compact = text.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def is_payment_data(value: str) -> bool:
    """A card number or an IBAN (pure)."""
    text = value.strip()
    if _CARD.fullmatch(text):
        digits = re.sub(r"[ -]", "", text)
        # card numbers start with 2-6 (Mastercard 2-series, Amex, Visa, Mastercard,
        # Discover/UnionPay): long numeric ids starting otherwise are left alone
        return digits[0] in "23456" and _luhn(digits)
    return bool(_IBAN.fullmatch(text)) and _iban_valid(text)


def _norm(key: str) -> str:
    return _NORMALISE.sub("", key.lower())


class Masker:
    """Replaces the values of secret keys and of the configured PII keys, at any depth."""

    def __init__(self, pii_fields: Iterable[str] = ()) -> None:
        self._pii = frozenset(_norm(f) for f in pii_fields)
        self._secret_parts = tuple(_norm(p) for p in SECRET_KEY_PARTS)

    def hides(self, key: str) -> bool:
        k = _norm(key)
        return k in self._pii or any(part in k for part in self._secret_parts)

    def mask(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (MASK if value[k] is not None and self.hides(str(k)) else self.mask(value[k]))
                for k in value
            }
        if isinstance(value, list):
            return [self.mask(v) for v in value]
        if isinstance(value, str) and is_payment_data(value):
            return MASK
        return value

    def mask_body(self, body: bytes) -> str:
        """A stored body pretty-printed with masks; a body that is not JSON is not shown at all
        (it cannot be masked field by field)."""
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return f"<{len(body)} bytes, not JSON: not shown>"
        return json.dumps(self.mask(data), indent=2, sort_keys=True, ensure_ascii=False)
