"""Connector errors. Lower-level httpx errors are translated here, at the boundary.

::

    ConnectorError              a provider API call failed (carries the source name)
    ├── AuthError               401/403: the key is wrong or lacks a permission (names which)
    ├── NotFoundError           404 for a named event, delivery or object
    ├── UnavailableError        retries exhausted (429, 5xx, connection errors, timeouts)
    ├── MalformedResponseError  not JSON, or a field the connector needs is missing
    └── UnsupportedError        the provider has no API for this (e.g. Stripe redelivery)
"""

from __future__ import annotations

from reconciler.errors import HookledgerError


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
