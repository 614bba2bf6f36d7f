"""Verify then parse a delivery for one configured source (signature first: nothing is parsed
unsigned). How each provider signs and names its events is its own (``connectors.registry``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from connectors.fingerprint import Segment
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.webhooks import SignatureError, Verdict, WebhookRequest, same_digest
from reconciler.config import SourceSettings
from reconciler.sources import options_of, provider


@dataclass(frozen=True)
class SourceVerifier:
    source: SourceSettings
    secrets: tuple[str, ...]
    basic_auth: str | None = None  # the Authorization value deliveries must carry, if any
    options: SourceOptions = field(init=False)
    provider: Provider = field(init=False)
    fingerprint_ignore: tuple[tuple[Segment, ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        # the receiver needs no API key: the options carry none
        object.__setattr__(self, "options", options_of(self.source, secrets=False))
        object.__setattr__(self, "provider", provider(self.source.kind))
        object.__setattr__(self, "fingerprint_ignore", self.source.fingerprint_paths())

    @property
    def sensitive_headers(self) -> frozenset[str]:
        return self.provider.sensitive_headers(self.options)

    def verify(self, request: WebhookRequest) -> Verdict:
        """Raise :class:`~reconciler.errors.RejectedDelivery` or return the provider's verdict: the
        event's identity, with the answer it expects, or a handshake (``connectors.webhooks``).
        With ``basic_auth_env``, a delivery without those credentials is refused first."""
        if self.basic_auth is not None:
            given = request.header("authorization") or ""
            if not same_digest(self.basic_auth, given):
                raise SignatureError("missing or wrong HTTP Basic credentials (basic_auth_env)")
        return self.provider.verify(self.options, request, self.secrets)
