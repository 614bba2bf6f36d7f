"""The exception root of hookledger, and the connectors' errors.

They sit here, on the bottom floor, because every layer raises them: the connectors, the inbox and
the reconciler above them (``reconciler.errors`` draws the whole tree and adds the rest). Lower-level
httpx errors are translated into connector errors at the boundary.

::

    HookledgerError                 hookledger failed
    ├── ConfigError                 the configuration file or environment is invalid
    ├── RejectedDelivery            an inbound webhook is refused (carries the HTTP status, a reason)
    └── ConnectorError              a provider API call failed (carries the source name)
        ├── AuthError               401/403: the key is wrong or lacks a permission (names which)
        ├── NotFoundError           404 for a named event, delivery or object
        ├── UnavailableError        retries exhausted (429, 5xx, connection errors, timeouts)
        ├── MalformedResponseError  not JSON, or a field the connector needs is missing
        └── UnsupportedError        the provider has no API for this (e.g. Stripe redelivery)
"""

from __future__ import annotations


class HookledgerError(Exception):
    """hookledger failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(HookledgerError):
    """The configuration is invalid."""


class RejectedDelivery(HookledgerError):
    """The delivery was rejected."""

    def __init__(self, status_code: int, reason: str, *, retry_after: int | None = None) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.reason = reason
        # seconds the sender should wait before sending it again (a 503's Retry-After)
        self.retry_after = retry_after


class ConnectorError(HookledgerError):
    """The provider API call failed."""


class AuthError(ConnectorError):
    """The provider refused the credentials."""


class NotFoundError(ConnectorError):
    """The provider does not know that id."""


class UnavailableError(ConnectorError):
    """The provider did not answer successfully within the retry budget."""


class MalformedResponseError(ConnectorError):
    """The provider's answer cannot be read."""


class UnsupportedError(ConnectorError):
    """The provider offers no API for this."""
