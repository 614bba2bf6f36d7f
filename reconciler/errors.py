"""The one exception root of hookledger.

::

    HookledgerError
    ├── ConfigError            the configuration file or environment is invalid
    ├── DatabaseError          the database failed, in one line naming it, password masked (its
    │                          subclasses, unavailable, busy and refused: ``reconciler.storage.failures``)
    ├── NoSuchRecordError      an event, message or discrepancy named by the user does not exist
    ├── ActionRefusedError     an operator action is not allowed in the record's current state
    ├── RejectedDelivery       an inbound webhook is refused (carries the HTTP status and a reason)
    ├── ConnectorError         a provider API call failed (its subclasses: ``connectors.errors``)
    └── HandlerError           raised by event handlers to classify a failure
        ├── TransientError     retry later with backoff (timeouts, 429, 5xx, locks)
        │   ├── AmbiguousError sent, no answer: it may have taken effect (``verify`` asked first)
        │   └── HandlerTimeout the attempt ran past handler_timeout_seconds and was abandoned
        └── PermanentError     retrying cannot help: dead-letter at once (validation, other 4xx)

The docstring of each class is its default message. The root, ``ConfigError`` and
``RejectedDelivery`` are defined in ``connectors.errors`` (the bottom floor, so that connectors raise
them too) and are the same classes here; ``ConnectorError`` and the connectors' own errors under it
(among them ``NotFoundError``, a provider's 404) are drawn there.
"""

from __future__ import annotations

from connectors.errors import ConfigError as ConfigError
from connectors.errors import HookledgerError as HookledgerError
from connectors.errors import RejectedDelivery as RejectedDelivery


class DatabaseError(HookledgerError):
    """The database failed."""


class NoSuchRecordError(HookledgerError):
    """No such record.

    (Apart from ``connectors.errors.NotFoundError``, a provider's 404: this is hookledger's own
    records, named by an operator.)"""


class ActionRefusedError(HookledgerError):
    """The action is not allowed in the record's current state."""


class HandlerError(HookledgerError):
    """The event handler failed."""


class TransientError(HandlerError):
    """A transient failure: the event will be retried with backoff."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AmbiguousError(TransientError):
    """The request was sent and no answer came: it may or may not have taken effect. Before the
    event is retried the worker asks the handler's ``verify`` function, if it has one."""


class HandlerTimeout(TransientError):
    """handler_timeout: the attempt ran past [worker] handler_timeout_seconds and was abandoned
    (its process killed, its transactions rolled back)."""


class PermanentError(HandlerError):
    """A permanent failure: retrying cannot help, the event is dead-lettered."""
