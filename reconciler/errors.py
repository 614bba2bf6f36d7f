"""The one exception root of hookledger.

::

    HookledgerError
    ├── ConfigError            the configuration file or environment is invalid
    ├── DatabaseError          the database cannot be reached or went away (names it, password masked)
    ├── NotFoundError          an event, source or record named by the user does not exist
    ├── ActionRefusedError     an operator action is not allowed in the record's current state
    ├── RejectedDelivery       an inbound webhook is refused (carries the HTTP status and a reason)
    └── HandlerError           raised by event handlers to classify a failure
        ├── TransientError     retry later with backoff (timeouts, 429, 5xx, locks)
        └── PermanentError     retrying cannot help: dead-letter at once (validation, other 4xx)

The docstring of each class is its default message.
"""

from __future__ import annotations


class HookledgerError(Exception):
    """hookledger failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(HookledgerError):
    """The configuration is invalid."""


class DatabaseError(HookledgerError):
    """The database cannot be reached."""


class NotFoundError(HookledgerError):
    """Not found."""


class ActionRefusedError(HookledgerError):
    """The action is not allowed in the record's current state."""


class RejectedDelivery(HookledgerError):
    """The delivery was rejected."""

    def __init__(self, status_code: int, reason: str) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.reason = reason


class HandlerError(HookledgerError):
    """The event handler failed."""


class TransientError(HandlerError):
    """A transient failure: the event will be retried with backoff."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(HandlerError):
    """A permanent failure: retrying cannot help, the event is dead-lettered."""
