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

import random
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from connectors.retry import full_jitter
from reconciler.errors import AmbiguousError, PermanentError, TransientError
from reconciler.outgoing import NO_ANSWER
from reconciler.outgoing import classify_status as classify_status
from reconciler.payment_text import mask_payment_text
from reconciler.storage.models import ErrorClass, EventStatus

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


@dataclass(frozen=True)
class Failure:
    """What a failed attempt leaves on its event: dead or failed (retried at ``next_attempt_at``),
    the error's class and the message stored, logged and shown to operators."""

    status: EventStatus
    error_class: ErrorClass
    message: str
    next_attempt_at: datetime | None


def failure_of(
    exc: BaseException,
    attempt: int,
    *,
    max_attempts: int,
    backoff_base: float,
    backoff_max: float,
    now: datetime,
    rng: random.Random,
    force_dead: bool = False,
    hung: bool = False,
) -> Failure:
    """The outcome of attempt ``attempt`` (1-based) that raised ``exc``: permanent errors and the
    last allowed attempt are dead; others are retried after a jittered backoff, or the error's own
    ``retry_after`` when longer. ``hung``: dead with class ``hung`` (``[worker] max_hangs``)."""
    error_class = ErrorClass.HUNG if hung else classify_exception(exc)
    message = f"{exc.__class__.__name__}: {exc}"
    if error_class is ErrorClass.TRANSIENT and not isinstance(exc, TransientError):
        message += "\n" + "".join(traceback.format_exception(exc, limit=-3))
    # never a card number a handler put in its error (the traceback repeats the error's text)
    message = mask_payment_text(message)
    dead = hung or force_dead or error_class is ErrorClass.PERMANENT or attempt >= max_attempts
    if dead:
        return Failure(EventStatus.DEAD, error_class, message[:8000], None)
    delay = backoff_delay(attempt, backoff_base, backoff_max, rng)
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int | float):
        delay = max(delay, float(retry_after))
    return Failure(EventStatus.FAILED, error_class, message[:8000], now + timedelta(seconds=delay))
