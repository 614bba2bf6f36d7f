"""Forward an event to the application: POST the original body, classify the answer.

``Idempotency-Key: <source>:<event_id>`` lets the receiving app deduplicate retries and replays.
Redirects are not followed (a 3xx is a misconfiguration, treated as permanent).
"""

from __future__ import annotations

import httpx

from reconciler.errors import AmbiguousError, PermanentError, TransientError
from reconciler.inbox.handlers import Event
from reconciler.inbox.retry import classify_status, parse_retry_after
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
    try:
        response = client.post(url, content=event.body, headers=forward_headers(event))
    except (httpx.ReadTimeout, httpx.ReadError, httpx.RemoteProtocolError) as exc:
        # the request went out and no answer came: the app may have applied it; the retry sends
        # the same Idempotency-Key
        raise AmbiguousError(
            f"forward to {url}: sent, no answer ({exc.__class__.__name__})"
        ) from exc
    except httpx.TimeoutException as exc:  # connect, write or pool: not (wholly) sent
        raise TransientError(f"forward to {url} timed out ({exc.__class__.__name__})") from exc
    except httpx.TransportError as exc:
        raise TransientError(f"forward to {url} failed: {exc.__class__.__name__}: {exc}") from exc
    verdict = classify_status(response.status_code)
    if verdict is None:
        return response.status_code
    snippet = response.text[:200].replace("\n", " ")
    message = f"forward to {url} answered HTTP {response.status_code}: {snippet}"
    if verdict is ErrorClass.TRANSIENT:
        raise TransientError(
            message, retry_after=parse_retry_after(response.headers.get("retry-after"))
        )
    raise PermanentError(message)
