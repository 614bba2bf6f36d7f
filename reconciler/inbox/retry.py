"""Retry policy, pure: how a failure is classified and when the next attempt is due.

Transient: connection errors, timeouts, HTTP 408, 429 and 5xx, :class:`TransientError`, database
operational errors (locks, lost connections). Ambiguous: the request went out and no answer came
(:class:`AmbiguousError`; httpx's read timeout, read error or a server that disconnected without an
answer): retried like a transient failure, but the handler's ``verify`` is asked first. Permanent: other 4xx (and 3xx: redirects are not
followed), :class:`PermanentError`, and data errors in a handler (``ValueError``, ``KeyError``,
``TypeError``, integrity violations, values a column cannot hold) which the same input will raise again.
Backoff and ``Retry-After`` are the project's one policy (``connectors.retry``), shared with the
providers' HTTP client.
"""

from __future__ import annotations

import httpx
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from connectors.retry import full_jitter
from reconciler.errors import AmbiguousError, PermanentError, TransientError
from reconciler.outgoing import NO_ANSWER
from reconciler.outgoing import classify_status as classify_status
from reconciler.storage.models import ErrorClass

PERMANENT_TYPES: tuple[type[BaseException], ...] = (
    PermanentError,
    ValueError,
    KeyError,
    TypeError,
    LookupError,
    IntegrityError,
    DataError,  # a value the column cannot hold: retrying cannot help
)
TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    TransientError,
    OperationalError,
    httpx.TransportError,
    TimeoutError,
    ConnectionError,
)


# Sent, and no answer read: whether it took effect is unknown.
AMBIGUOUS_TYPES: tuple[type[BaseException], ...] = (AmbiguousError, *NO_ANSWER)


def classify_exception(exc: BaseException) -> ErrorClass:
    if isinstance(exc, AMBIGUOUS_TYPES):
        return ErrorClass.AMBIGUOUS
    if isinstance(exc, TRANSIENT_TYPES):
        return ErrorClass.TRANSIENT
    if isinstance(exc, PERMANENT_TYPES):
        return ErrorClass.PERMANENT
    # Unknown failures (a bug fixed by the next deploy, a dependency down) are retried, bounded by
    # max_attempts, rather than dead-lettered on the first try.
    return ErrorClass.TRANSIENT


backoff_delay = full_jitter  # seconds after failed attempt ``attempt`` (1-based), full jitter
