"""Forward an event to the application: POST the original body, classify the answer
(``reconciler.outgoing``: the same rules as the outbox's publisher).

``Idempotency-Key: <source>:<event_id>`` lets the receiving app deduplicate retries and replays.
Redirects are not followed (a 3xx is a misconfiguration, treated as permanent).
"""

from __future__ import annotations

import httpx

from reconciler.errors import AmbiguousError, PermanentError, TransientError
from reconciler.inbox.handlers import Event
from reconciler.outgoing import post
from reconciler.storage.models import ErrorClass

USER_AGENT = "hookledger-worker"


def make_forward_client(
    timeout: float, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        transport=transport,
    )


def forward_headers(event: Event) -> dict[str, str]:
    headers = {
        "Content-Type": event.content_type or "application/json",
        "Idempotency-Key": f"{event.source}:{event.event_id}",
        "X-Hookledger-Source": event.source,
        "X-Hookledger-Event-Id": event.event_id,
        "X-Hookledger-Attempt": str(event.attempt),
        "X-Correlation-Id": event.correlation_id,
    }
    if event.event_type:
        headers["X-Hookledger-Event-Type"] = event.event_type
    return headers


def forward_event(client: httpx.Client, url: str, event: Event) -> int:
    """POST the event; return the 2xx status or raise Transient/Ambiguous/PermanentError."""
    answer = post(client, url, event.body, forward_headers(event))
    if answer.ok and answer.status_code is not None:
        return answer.status_code
    message = f"forward to {answer.message}"
    if answer.error_class is ErrorClass.AMBIGUOUS:
        # the app may have applied it; the retry sends the same Idempotency-Key
        raise AmbiguousError(message)
    if answer.error_class is ErrorClass.TRANSIENT:
        raise TransientError(message, retry_after=answer.retry_after)
    raise PermanentError(message)
