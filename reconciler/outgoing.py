"""An outgoing POST and what its answer means: the one classification that forwarding an event
(``inbox.forward``) and publishing an outbox message (``outbox.publisher``) share.

- 2xx: done.
- Not (wholly) sent: a connection that could not be made, a connect/write/pool timeout; or an
  answer another attempt may change (408, 429, 5xx, ``connectors.retry.transient_status``):
  **transient**, retried with backoff (``Retry-After`` honoured).
- Sent and no answer read (read timeout, read error, a server that hung up): **ambiguous**, it may
  have taken effect; the retry carries the same ``Idempotency-Key``.
- Any other answer (4xx; 3xx, since redirects are not followed): **permanent**.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from connectors.retry import parse_retry_after, transient_status
from reconciler.logs import escape_control
from reconciler.states import ErrorClass

# Sent, and no answer read: whether it took effect is unknown.
NO_ANSWER = (httpx.ReadTimeout, httpx.ReadError, httpx.RemoteProtocolError)
SNIPPET = 200  # characters of an error answer's body kept in the message


@dataclass(frozen=True)
class Answer:
    """What came of one POST: ``error_class`` None is success."""

    status_code: int | None  # None: no HTTP answer at all
    error_class: ErrorClass | None
    message: str = ""  # why it failed, one line naming the URL ("" on success)
    retry_after: float | None = None  # seconds, from the answer's Retry-After

    @property
    def ok(self) -> bool:
        return self.error_class is None


def post(
    client: httpx.Client,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float | None = None,
) -> Answer:
    """POST ``content`` to ``url`` and classify the outcome (never raises for a transport error)."""
    limits = (
        client.timeout if timeout is None else httpx.Timeout(timeout, connect=min(timeout, 5.0))
    )
    try:
        response = client.post(url, content=content, headers=dict(headers), timeout=limits)
    except NO_ANSWER as exc:
        return Answer(
            None, ErrorClass.AMBIGUOUS, f"{url}: sent, no answer ({exc.__class__.__name__})"
        )
    except httpx.TimeoutException as exc:  # connect, write or pool: not (wholly) sent
        return Answer(None, ErrorClass.TRANSIENT, f"{url} timed out ({exc.__class__.__name__})")
    except httpx.TransportError as exc:
        return Answer(None, ErrorClass.TRANSIENT, f"{url} failed: {exc.__class__.__name__}: {exc}")
    status = response.status_code
    error_class = classify_status(status)
    if error_class is None:
        return Answer(status, None)
    # a stranger's text on one line: its line breaks read as spaces, other controls escaped
    snippet = escape_control(response.text[:SNIPPET].replace("\n", " ").replace("\r", " "))
    message = f"{url} answered HTTP {status}: {snippet}"
    retry_after = None
    if error_class is ErrorClass.TRANSIENT:
        retry_after = parse_retry_after(response.headers.get("retry-after"), time.time())
    return Answer(status, error_class, message, retry_after)


def classify_status(status_code: int) -> ErrorClass | None:
    """None for success (2xx)."""
    if 200 <= status_code < 300:
        return None
    return ErrorClass.TRANSIENT if transient_status(status_code) else ErrorClass.PERMANENT
