"""Verify then parse a delivery for one configured source (signature first: nothing is parsed
unsigned). How each provider signs and names its events is its own (``connectors.registry``)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass, field

from connectors.base import Connector
from connectors.errors import ConfigError, ConnectorError, RejectedDelivery
from connectors.fingerprint import Segment
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.webhooks import SignatureError, Verdict, WebhookRequest, same_digest
from reconciler.config import SourceSettings
from reconciler.sources import build_connector, options_of, provider

log = logging.getLogger(__name__)
_BUILD_LOCK = threading.Lock()


@dataclass(frozen=True)
class SourceVerifier:
    source: SourceSettings
    secrets: tuple[str, ...]
    basic_auth: str | None = None  # the Authorization value deliveries must carry, if any
    options: SourceOptions = field(init=False)
    provider: Provider = field(init=False)
    fingerprint_ignore: tuple[tuple[Segment, ...], ...] = field(init=False)
    _built: Connector | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the receiver needs no API key: the options carry none, only what receiving needs
        own = provider(self.source.kind)
        options = options_of(self.source, secrets=False)
        wanted = [key for key in own.receive_credentials if self.source.key(key)]
        if wanted:
            credentials = {key.removesuffix("_env"): self.source.credential(key) for key in wanted}
            options = dataclasses.replace(options, credentials=credentials)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "provider", own)
        object.__setattr__(self, "fingerprint_ignore", self.source.fingerprint_paths())

    @property
    def sensitive_headers(self) -> frozenset[str]:
        return self.provider.sensitive_headers(self.options)

    def verify(self, request: WebhookRequest) -> Verdict:
        """Raise :class:`~reconciler.errors.RejectedDelivery` or return the provider's verdict: the
        event's identity, with the answer it expects, or a handshake (``connectors.webhooks``).
        With ``basic_auth_env``, a delivery without those credentials is refused first."""
        self.check_credentials(request)
        if self.provider.confirm is not None:
            return self.confirm(request)
        return self.provider.verify(self.options, request, self.secrets)

    def check_credentials(self, request: WebhookRequest) -> None:
        """With ``basic_auth_env``: refuse a delivery without those credentials."""
        if self.basic_auth is not None:
            given = request.header("authorization") or ""
            if not same_digest(self.basic_auth, given):
                raise SignatureError("missing or wrong HTTP Basic credentials (basic_auth_env)")

    def confirm_key(self, request: WebhookRequest) -> str:
        """What a confirmation asks the provider about; BadPayload when malformed."""
        assert self.provider.confirm_key is not None
        return self.provider.confirm_key(request)

    @property
    def confirms_by_api(self) -> bool:
        """Its deliveries are confirmed through the provider's API: the receiver calls
        :meth:`verify` off the event loop."""
        return self.provider.confirm is not None

    def confirm(self, request: WebhookRequest) -> Verdict:
        """The provider's verdict read through its API (credentials checked by the caller)."""
        assert self.provider.confirm is not None
        try:
            return self.provider.confirm(self._connector(), request)
        except RejectedDelivery:
            raise
        except (ConnectorError, ConfigError) as exc:
            log.error(
                "could not confirm a delivery with the provider: %s",
                exc,
                extra={"source": self.source.name},
            )
            # not stored, not acknowledged: the provider sends it again
            raise RejectedDelivery(
                503, f"could not confirm it with the provider ({exc.__class__.__name__})"
            ) from None

    def _connector(self) -> Connector:
        """The source's connector, built once on first use with its credentials (one token
        cache for every confirmation)."""
        with _BUILD_LOCK:
            if self._built is None:
                object.__setattr__(self, "_built", build_connector(self.source))
            built = self._built
        assert built is not None
        return built

    def close(self) -> None:
        if self._built is not None:
            self._built.close()
