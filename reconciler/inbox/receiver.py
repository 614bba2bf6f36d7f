"""The webhook receiver (Starlette ASGI app).

``POST /webhooks/{source}``: read the raw body (bounded), verify the signature for the source's kind,
insert-if-new the event and append the delivery in one transaction (group-committed), answer 200
``{"status": "accepted" | "duplicate" | "conflict", "event_id": ...}`` (a conflict is the event
id again with other content: 2xx, since the first copy is safely stored and a 4xx would make the
provider retry it for days; it is flagged for an operator, never applied).
No business work happens in the request.
Errors share one JSON shape: ``{"status": "rejected" | "error", "reason": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connectors.webhooks import Handshake, Reply, WebhookRequest
from reconciler.config import Settings
from reconciler.errors import ConfigError, RejectedDelivery
from reconciler.inbox.committer import GroupCommitter
from reconciler.inbox.confirming import ConfirmGate, QueueFull
from reconciler.inbox.conflicts import conflicting_fields
from reconciler.inbox.edge import RETRY_AFTER_SECONDS, ConcurrencyLimit
from reconciler.inbox.intake import items_of
from reconciler.inbox.limiter import PerClientLimiter
from reconciler.inbox.metrics import ReceiverMetrics
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord
from reconciler.logs import log_delivery
from reconciler.sources import provider
from reconciler.storage.models import DeliveryOutcome
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)

UNKNOWN_SOURCE_LABEL = "_unknown"
# what a 503 for the database asks the provider to wait: an outage is seldom over within a second
STORAGE_RETRY_AFTER_SECONDS = 5


class _TooLarge(Exception):
    pass


def build_verifiers(settings: Settings) -> dict[str, SourceVerifier]:
    """Verifiers for every enabled source; refuses to start when a signing secret is missing."""
    verifiers: dict[str, SourceVerifier] = {}
    problems: list[str] = []
    for source in settings.sources:
        if not source.enabled:
            continue
        try:
            needs_secret = provider(source.kind).signed_with_secret or source.signing_secret_env
            secrets = source.signing_secrets() if needs_secret else ()
            verifiers[source.name] = SourceVerifier(source, secrets, source.basic_auth())
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("\n".join(problems))
    return verifiers


def _fields(item: IncomingEvent) -> dict[str, str]:
    """The log fields of a delivery (a redelivered event keeps its first delivery's correlation id)."""
    return {
        "source": item.source,
        "event_id": item.parsed.event_id,
        "correlation_id": item.correlation_id,
    }


def _reject_body(reason: str, status: str = "rejected") -> dict[str, str]:
    return {"status": status, "reason": reason}


def _refusal(status_code: int, reason: str, retry_after: int | None = None) -> Response:
    """A refusal in the shared shape; every 503 says when to send it again (Retry-After)."""
    headers = None
    if status_code == 503:
        headers = {"Retry-After": str(retry_after or RETRY_AFTER_SECONDS)}
    status = "error" if status_code >= 500 else "rejected"
    return JSONResponse(_reject_body(reason, status), status_code=status_code, headers=headers)


def confirm_gates(
    settings: Settings, verifiers: dict[str, SourceVerifier], metrics: ReceiverMetrics
) -> dict[str, ConfirmGate]:
    """A gate of its own for each source whose deliveries are confirmed through the provider's
    API (``reconciler.inbox.confirming``)."""
    receiver = settings.receiver
    return {
        name: ConfirmGate(
            name,
            verifier.confirm_key,
            verifier.confirm,
            queue=receiver.confirm_queue,
            concurrency=receiver.confirm_concurrency,
            window_seconds=receiver.confirm_window_seconds,
            on_call=metrics.confirm_calls.labels(name).inc,
        )
        for name, verifier in verifiers.items()
        if verifier.confirms_by_api
    }


def _answer(reply: Reply) -> Response:
    # a handshake echoes text its caller chose (Dropbox's unsigned challenge): never sniffed as HTML
    return Response(
        reply.body,
        status_code=reply.status,
        media_type=reply.content_type,
        headers={"X-Content-Type-Options": "nosniff"},
    )


def called_url(public_url: str | None, request: Request) -> str:
    """The URL the provider called: behind a proxy the receiver sees its own host and scheme, so
    ``[receiver] public_url`` (with the request's path and query) is what a provider signed."""
    if public_url is None:
        return str(request.url)
    query = request.url.query
    return public_url.rstrip("/") + request.url.path + (f"?{query}" if query else "")


def create_app(
    settings: Settings,
    engine: Engine,
    *,
    verifiers: dict[str, SourceVerifier] | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    verifiers = build_verifiers(settings) if verifiers is None else verifiers
    max_body = settings.receiver.max_body_bytes
    body_timeout = settings.receiver.body_timeout_seconds
    public_url = settings.receiver.public_url
    committer = GroupCommitter(
        engine, writers=settings.receiver.writers, max_batch=settings.receiver.batch_max_size
    )
    metrics = ReceiverMetrics(
        engine,
        [t.name for t in settings.outbox.targets],
        [s.name for s in settings.sources if s.enabled],
        [t.name for t in settings.notify],
    )
    unknown_limiter = PerClientLimiter(settings.receiver.unknown_source_log_per_minute)
    known_limiter = PerClientLimiter(
        settings.receiver.rejected_log_per_minute, max_clients=1_000, what="configured sources"
    )
    gates = confirm_gates(settings, verifiers, metrics)

    async def _read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_body:
            raise _TooLarge
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body:
                raise _TooLarge
        return bytes(body)

    async def _reject(
        record: RejectedRecord, *, known: bool = True, retry_after: int | None = None
    ) -> Response:
        log.info(
            "delivery rejected",
            extra={"source": record.source, "reason": record.reason, "status": record.status_code},
        )
        address = record.remote_addr or ""
        if known:
            allowed = known_limiter.allow(f"{record.source}\n{address}", clock())
        else:
            allowed = unknown_limiter.allow(address, clock())
        if allowed:
            try:
                await committer.submit(record)
            except Exception:
                log.exception("could not log a rejected delivery", extra={"source": record.source})
        else:
            metrics.unlogged.inc()
        # Only configured names become label values: strangers cannot grow the metrics.
        label = record.source if known else UNKNOWN_SOURCE_LABEL
        metrics.deliveries.labels(label, DeliveryOutcome.REJECTED.value).inc()
        metrics.rejected.labels(label, str(record.status_code)).inc()
        return _refusal(record.status_code, record.reason, retry_after)

    async def receive(request: Request) -> Response:
        name: str = request.path_params["source"]
        verifier = verifiers.get(name)
        if verifier is None:
            remote = request.client.host if request.client else None
            record = RejectedRecord(name, 404, "unknown source", utcnow(), remote)
            return await _reject(record, known=False)
        allowed = verifier.provider.methods
        if request.method not in allowed:  # a browser or a probe, not the provider: not logged
            reason = f"method {request.method} not allowed: this source's provider uses " + (
                ", ".join(allowed)
            )
            return JSONResponse(
                _reject_body(reason, "error"),
                status_code=405,
                headers={"Allow": ", ".join(allowed)},
            )
        gate = gates.get(name)
        if gate is None:
            return await _receive(request, name, verifier, None)
        try:
            with gate.place():  # its own queue: never the shared slots (edge.ConcurrencyLimit)
                return await _receive(request, name, verifier, gate)
        except QueueFull:
            metrics.confirm_busy.labels(name).inc()
            reason = f"{gate.queue} deliveries of this source are waiting for the provider's API"
            return _refusal(503, reason)

    async def _receive(
        request: Request, name: str, verifier: SourceVerifier, gate: ConfirmGate | None
    ) -> Response:
        arrived = time.perf_counter()
        received_at = utcnow()
        remote = request.client.host if request.client else None
        try:
            async with asyncio.timeout(body_timeout):
                body = await _read_body(request)
        except _TooLarge:
            reason = f"body larger than {max_body} bytes"
            return await _reject(RejectedRecord(name, 413, reason, received_at, remote))
        except TimeoutError:
            reason = f"body not received in full within {body_timeout:g} s"
            return await _reject(RejectedRecord(name, 408, reason, received_at, remote))
        except ClientDisconnect:
            # nobody is left to answer, and nothing was stored: one line, not a traceback
            log.info("client disconnected before sending the whole body", extra={"source": name})
            metrics.disconnected.labels(name).inc()
            return Response(status_code=400)
        headers = dict(request.headers)  # Starlette lower-cases header names
        incoming = WebhookRequest(
            method=request.method,
            url=called_url(public_url, request),
            headers=headers,
            body=body,
            now=clock(),
            query=tuple(request.query_params.multi_items()),
        )
        try:
            if gate is not None:  # a call to the provider, on the gate's own threads
                verifier.check_credentials(incoming)
                verdict = await gate.ask(incoming)
            else:
                verdict = verifier.verify(incoming)
        except RejectedDelivery as exc:
            return await _reject(
                RejectedRecord(name, exc.status_code, exc.reason, received_at, remote),
                retry_after=exc.retry_after,
            )
        if isinstance(verdict, Handshake):
            return await _handshake(name, verdict, received_at, remote)
        intake = items_of(verifier, verdict, incoming, received_at, remote)
        if isinstance(intake, RejectedRecord):  # nothing of it is stored: the provider resends it
            return await _reject(intake)
        items = list(intake.items)
        try:
            outcomes = await committer.submit_all(items)
        except Exception:
            # Not stored, so not acknowledged: the provider will retry.
            log.exception("storing a delivery failed", extra=_fields(items[0]))
            return _refusal(503, "storage unavailable", STORAGE_RETRY_AFTER_SECONDS)
        for item, outcome in zip(items, outcomes, strict=True):
            metrics.deliveries.labels(name, outcome.value).inc()
            if outcome is DeliveryOutcome.CONFLICT:
                log.warning(
                    "a redelivery with other content: kept, not applied", extra=_fields(item)
                )
            else:
                log_delivery(
                    log,
                    _fields(item),
                    item.parsed.event_type,
                    outcome.value,
                    time.perf_counter() - arrived,
                )
        metrics.ack_seconds.labels(name).observe(time.perf_counter() - arrived)
        if intake.ack is not None:  # what the provider expects (a duplicate is acknowledged alike)
            return _answer(intake.ack)
        answers: list[dict[str, Any]] = [
            {"status": o.value, "event_id": i.parsed.event_id}
            for i, o in zip(items, outcomes, strict=True)
        ]
        for answer, item, outcome in zip(answers, items, outcomes, strict=True):
            if outcome is DeliveryOutcome.CONFLICT:  # which fields differ, for whoever sent it
                answer["fields"] = await asyncio.to_thread(_conflict_fields, item)
        if len(items) == 1:
            return JSONResponse(answers[0])
        return JSONResponse({"status": "stored", "events": answers})

    def _conflict_fields(item: IncomingEvent) -> list[str]:
        try:
            with engine.connect() as conn:
                return conflicting_fields(
                    conn,
                    item.source,
                    item.parsed.event_id,
                    item.body,
                    item.fingerprint_ignore,
                    item.content_type,
                )
        except Exception:  # stored and flagged already: the answer goes out without the list
            log.warning("could not list a conflict's fields", extra=_fields(item))
            return []

    async def _handshake(
        name: str, verdict: Handshake, received_at: datetime, remote: str | None
    ) -> Response:
        record = RejectedRecord(
            name,
            verdict.reply.status,
            verdict.what,
            received_at,
            remote,
            outcome=DeliveryOutcome.HANDSHAKE,
        )
        try:
            await committer.submit(record)
        except Exception:  # the answer matters more than its log line
            log.exception("could not log a handshake", extra={"source": name})
        metrics.deliveries.labels(name, DeliveryOutcome.HANDSHAKE.value).inc()
        log.info("handshake answered: %s", verdict.what, extra={"source": name})
        return _answer(verdict.reply)

    def _db_ok() -> bool:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True

    async def healthz(request: Request) -> Response:
        try:
            await asyncio.to_thread(_db_ok)
        except Exception as exc:
            log.warning("health check failed: %s", exc.__class__.__name__)
            return _refusal(503, "database unreachable", STORAGE_RETRY_AFTER_SECONDS)
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(request: Request) -> Response:
        payload = await asyncio.to_thread(generate_latest, metrics.registry)
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse(_reject_body(str(exc.detail), "error"), status_code=exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await committer.start()
        try:
            yield
        finally:
            await committer.stop()
            for gate in gates.values():
                gate.close()
            for verifier in verifiers.values():
                verifier.close()

    return Starlette(
        routes=[
            # GET too, for a provider that notifies with one; each source's provider says which
            Route("/webhooks/{source}", receive, methods=["POST", "GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
        middleware=[
            Middleware(
                ConcurrencyLimit,
                limit=settings.receiver.limit_concurrency,
                on_refused=metrics.busy.inc,
                exempt=frozenset(f"/webhooks/{name}" for name in gates),
            )
        ],
    )
