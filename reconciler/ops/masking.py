"""Masking of secrets, configured PII and providers' personal fields in payloads shown to people
(pure: values in, values out)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from connectors.parsing import decode_payload
from connectors.registry import provider
from reconciler.config import Settings
from reconciler.payment_text import MASK, is_payment_data, mask_payment_text

__all__ = ["MASK", "Masker", "is_payment_data", "mask_payment_text", "masker_for"]

# Keys whose values are credentials wherever they appear in a payload (case-insensitive, substring
# match on the normalised name: "client_secret", "webhookSecret", "access_token" ...).
SECRET_KEY_PARTS = ("secret", "password", "passwd", "token", "api_key", "apikey", "authorization")
_NORMALISE = re.compile(r"[^a-z0-9]")
# Payment data is masked by its value too, whatever key holds it, whole or inside any text
# (reconciler.payment_text).


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
        if isinstance(value, str):
            return MASK if is_payment_data(value) else mask_payment_text(value)
        return value

    def mask_body(self, body: bytes, content_type: str | None = None) -> str:
        """A stored body pretty-printed with masks (a form body as its fields); a body that is
        neither JSON nor a form is not shown at all (it cannot be masked field by field)."""
        try:
            data = decode_payload(body, content_type)
        except (ValueError, RecursionError):
            return f"<{len(body)} bytes, neither JSON nor a form: not shown>"
        return json.dumps(self.mask(data), indent=2, sort_keys=True, ensure_ascii=False)


def masker_for(settings: Settings, *sources: str) -> Masker:
    """The masker for payloads of these sources (none named: of any configured source): the
    ``[dashboard] mask_fields``, and the personal fields their providers name (Twilio's ``From``,
    ``To``, ``Body``) unless ``[dashboard] show_personal_fields`` is on."""
    fields = list(settings.dashboard.mask_fields)
    if not settings.dashboard.show_personal_fields:
        for source in settings.sources:
            if not sources or source.name in sources:
                fields += provider(source.kind).personal_fields
    return Masker(fields)
