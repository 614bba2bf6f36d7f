"""An OAuth 2.0 client-credentials token (RFC 6749 §4.4) on a provider's HTTP client: fetched on
first use and again shortly before it expires, one fetch at a time however many threads ask (the
receiver confirms deliveries on several). GoPay and PayPal authorise their API calls this way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from connectors.errors import MalformedResponseError
from connectors.http import ProviderClient, decode_json, redact_url

EARLY = 60.0  # a token is renewed this many seconds before the provider says it expires


class ClientCredentials:
    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        token_path: str,
        credentials: tuple[str, str],
        form: Mapping[str, str],
        permission: str,
        default_ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.client = client
        self.token_path = token_path
        self.credentials = credentials
        self.form = dict(form)
        self.permission = permission
        self.default_ttl = default_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._expires = 0.0
        self.tokens_fetched = 0

    def authorise(self) -> None:
        """An access token on the client, fetched again shortly before it expires."""
        with self._lock:
            if self.clock() < self._expires:
                return
            response = self.client.request(
                "POST",
                self.token_path,
                form=self.form,
                auth=self.credentials,
                permission=self.permission,
            )
            try:
                body = decode_json(response.content)
                token = str(body["access_token"])
                ttl = float(body.get("expires_in", self.default_ttl))
            except (ValueError, KeyError, TypeError):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(response.request.url)} gave no "
                    "access_token"
                ) from None
            self.client.set_header("Authorization", f"Bearer {token}")
            self._expires = self.clock() + max(ttl - EARLY, 0.0)
            self.tokens_fetched += 1
