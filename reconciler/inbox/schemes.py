"""Verify then parse a delivery for one configured source (signature first: nothing is parsed unsigned)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from connectors import parsing, signatures
from connectors.parsing import ParsedEvent
from reconciler.config import SourceSettings


@dataclass(frozen=True)
class SourceVerifier:
    source: SourceSettings
    secrets: tuple[str, ...]

    @property
    def extra_sensitive_headers(self) -> frozenset[str]:
        header = self.source.signature_header
        return frozenset({header.lower()}) if header else frozenset()

    def verify(self, headers: Mapping[str, str], body: bytes, *, now: float) -> ParsedEvent:
        """Raise :class:`~reconciler.errors.RejectedDelivery` or return the event's identity.

        ``headers`` must have lower-cased names.
        """
        src = self.source
        kind = src.kind
        if kind == "stripe":
            signatures.verify_stripe(
                headers, body, self.secrets, now=now, tolerance=src.tolerance_seconds
            )
            return parsing.parse_stripe(headers, body)
        if kind == "github":
            signatures.verify_github(headers, body, self.secrets)
            return parsing.parse_github(headers, body)
        if kind == "shopify":
            signatures.verify_shopify(headers, body, self.secrets)
            return parsing.parse_shopify(headers, body)
        if kind == "standard":
            signatures.verify_standard(
                headers, body, self.secrets, now=now, tolerance=src.tolerance_seconds
            )
            return parsing.parse_standard(headers, body)
        assert src.signature_header is not None  # enforced by config validation
        signatures.verify_generic(
            headers,
            body,
            self.secrets,
            header=src.signature_header,
            algorithm=src.signature_algorithm,
            encoding=src.signature_encoding,
            prefix=src.signature_prefix,
        )
        return parsing.parse_generic(
            headers,
            body,
            id_header=src.id_header,
            id_json_path=src.id_json_path,
            type_header=src.type_header,
            type_json_path=src.type_json_path,
        )
