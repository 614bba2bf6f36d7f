"""The webhook receiver (Starlette ASGI app).

``POST /webhooks/{source}`` runs the receiver's steps in order (``Receiver._receive``): read the raw
body (bounded), verify the signature for the source's kind (or confirm the delivery through the
provider's API), the items of the verdict, insert-if-new the events and append the delivery in one
transaction (group-committed), then answer. The steps that need no server are functions of
``reconciler.inbox.intake``, unit-tested there.

The answer is 200 ``{"status": "accepted" | "duplicate" | "conflict", "event_id": ...}`` (a
conflict is the event id again with other content: 2xx, since the first copy is safely stored and a
4xx would make the provider retry it for days; it is flagged for an operator, never applied).
No business work happens in the request.
Errors share one JSON shape: ``{"status": "rejected" | "error", "reason": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connectors.webhooks import Handshake, Verdict, WebhookRequest
from reconciler.config import Settings
from reconciler.errors import ConfigError, RejectedDelivery
from reconciler.inbox.committer import GroupCommitter
from reconciler.inbox.confirming import ConfirmGate, QueueFull
from reconciler.inbox.edge import RETRY_AFTER_SECONDS, ConcurrencyLimit
from reconciler.inbox.intake import Intake, TooLarge, answer_of, items_of, read_body, reply_response
from reconciler.inbox.limiter import PerClientLimiter
from reconciler.inbox.metrics import ReceiverMetrics
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord, Stored
from reconciler.logs import log_delivery
from reconciler.sources import provider
from reconciler.storage.models import DeliveryOutcome
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)

UNKNOWN_SOURCE_LABEL = "_unknown"
# what a 503 for the database asks the provider to wait: an outage is seldom over within a second
STORAGE_RETRY_AFTER_SECONDS = 5


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


def called_url(public_url: str | None, request: Request) -> str:
    """The URL the provider called: behind a proxy the receiver sees its own host and scheme, so
    ``[receiver] public_url`` (with the request's path and query) is what a provider signed."""
    if public_url is None:
        return str(request.url)
    query = request.url.query
    return public_url.rstrip("/") + request.url.path + (f"?{query}" if query else "")


class Receiver:
    """One receiver's parts (its sources' verifiers, the group committer, the limits on logging
    refusals, the confirmation gates, the metrics) and its endpoints. ``create_app`` assembles it."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        verifiers: dict[str, SourceVerifier],
        clock: Callable[[], float] = time.time,
    ) -> None:
        receiver = settings.receiver
        self.engine = engine
        self.verifiers = verifiers
        self.clock = clock
        self.max_body = receiver.max_body_bytes
        self.body_timeout = receiver.body_timeout_seconds
        self.public_url = receiver.public_url
        self.committer = GroupCommitter(
            engine, writers=receiver.writers, max_batch=receiver.batch_max_size
        )
        self.metrics = ReceiverMetrics(
            engine,
            [t.name for t in settings.outbox.targets],
            [s.name for s in settings.sources if s.enabled],
            [t.name for t in settings.notify],
        )
        self.unknown_limiter = PerClientLimiter(receiver.unknown_source_log_per_minute)
        self.known_limiter = PerClientLimiter(
            receiver.rejected_log_per_minute, max_clients=1_000, what="configured sources"
        )
        self.gates = confirm_gates(settings, verifiers, self.metrics)

    async def receive(self, request: Request) -> Response:
        """``/webhooks/{source}``: the source's verifier and, for a source confirmed through the
        provider's API, a place in its own queue; then :meth:`_receive`."""
        name: str = request.path_params["source"]
        verifier = self.verifiers.get(name)
        if verifier is None:
            remote = request.client.host if request.client else None
            record = RejectedRecord(name, 404, "unknown source", utcnow(), remote)
            return await self._reject(record, known=False)
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
        gate = self.gates.get(name)
        if gate is None:
            return await self._receive(request, verifier, None)
        try:
            with gate.place():  # its own queue: never the shared slots (edge.ConcurrencyLimit)
                return await self._receive(request, verifier, gate)
        except QueueFull:
            self.metrics.confirm_busy.labels(name).inc()
            reason = f"{gate.queue} deliveries of this source are waiting for the provider's API"
            return _refusal(503, reason)

    async def _receive(
        self, request: Request, verifier: SourceVerifier, gate: ConfirmGate | None
    ) -> Response:
        """The steps: read the body -> verify -> the items of the verdict -> store -> answer."""
        name = verifier.source.name
        arrived = time.perf_counter()
        received_at = utcnow()
        remote = request.client.host if request.client else None
        body = await self._read_body(request, name, received_at, remote)
        if isinstance(body, Response):
            return body
        incoming = WebhookRequest(
            method=request.method,
            url=called_url(self.public_url, request),
            headers=dict(request.headers),  # Starlette lower-cases header names
            body=body,
            now=self.clock(),
            query=tuple(request.query_params.multi_items()),
        )
        try:
            verdict = await self._verify(verifier, gate, incoming)
        except RejectedDelivery as exc:
            record = RejectedRecord(name, exc.status_code, exc.reason, received_at, remote)
            return await self._reject(record, retry_after=exc.retry_after)
        if isinstance(verdict, Handshake):
            return await self._handshake(name, verdict, received_at, remote)
        intake = items_of(verifier, verdict, incoming, received_at, remote)
        if isinstance(intake, RejectedRecord):  # nothing of it is stored: the provider resends it
            return await self._reject(intake)
        try:
            stored = await self.committer.submit_all(intake.items)
        except Exception:
            # Not stored, so not acknowledged: the provider will retry.
            log.exception("storing a delivery failed", extra=_fields(intake.items[0]))
            return _refusal(503, "storage unavailable", STORAGE_RETRY_AFTER_SECONDS)
        self._record(name, intake, stored, arrived)
        return answer_of(intake, stored)

    async def _read_body(
        self, request: Request, name: str, received_at: datetime, remote: str | None
    ) -> bytes | Response:
        """The body within ``[receiver] max_body_bytes`` and ``body_timeout_seconds``, or the
        refusal already answered."""
        declared = request.headers.get("content-length")
        try:
            async with asyncio.timeout(self.body_timeout):
                return await read_body(request.stream(), declared, self.max_body)
        except TooLarge:
            reason = f"body larger than {self.max_body} bytes"
            return await self._reject(RejectedRecord(name, 413, reason, received_at, remote))
        except TimeoutError:
            reason = f"body not received in full within {self.body_timeout:g} s"
            return await self._reject(RejectedRecord(name, 408, reason, received_at, remote))
        except ClientDisconnect:
            # nobody is left to answer, and nothing was stored: one line, not a traceback
            log.info("client disconnected before sending the whole body", extra={"source": name})
            self.metrics.disconnected.labels(name).inc()
            return Response(status_code=400)

    @staticmethod
    async def _verify(
        verifier: SourceVerifier, gate: ConfirmGate | None, incoming: WebhookRequest
    ) -> Verdict:
        """The provider's verdict (RejectedDelivery when refused): its signature checked here, or
        the delivery confirmed through its API on the gate's own threads."""
        if gate is None:
            return verifier.verify(incoming)
        verifier.check_credentials(incoming)
        return await gate.ask(incoming)

    def _record(self, name: str, intake: Intake, stored: Sequence[Stored], arrived: float) -> None:
        """Count and log each stored item (a conflict is a warning: kept, never applied)."""
        for item, done in zip(intake.items, stored, strict=True):
            self.metrics.deliveries.labels(name, done.outcome.value).inc()
            if done.outcome is DeliveryOutcome.CONFLICT:
                log.warning(
                    "a redelivery with other content: kept, not applied", extra=_fields(item)
                )
            else:
                log_delivery(
                    log,
                    _fields(item),
                    item.parsed.event_type,
                    done.outcome.value,
                    time.perf_counter() - arrived,
                )
        self.metrics.ack_seconds.labels(name).observe(time.perf_counter() - arrived)

    async def _reject(
        self, record: RejectedRecord, *, known: bool = True, retry_after: int | None = None
    ) -> Response:
        """The refusal, logged as a delivery unless its sender passed its limit (then counted)."""
        log.info(
            "delivery rejected",
            extra={"source": record.source, "reason": record.reason, "status": record.status_code},
        )
        address = record.remote_addr or ""
        if known:
            allowed = self.known_limiter.allow(f"{record.source}\n{address}", self.clock())
        else:
            allowed = self.unknown_limiter.allow(address, self.clock())
        if allowed:
            try:
                await self.committer.submit(record)
            except Exception:
                log.exception("could not log a rejected delivery", extra={"source": record.source})
        else:
            self.metrics.unlogged.inc()
        # Only configured names become label values: strangers cannot grow the metrics.
        label = record.source if known else UNKNOWN_SOURCE_LABEL
        self.metrics.deliveries.labels(label, DeliveryOutcome.REJECTED.value).inc()
        self.metrics.rejected.labels(label, str(record.status_code)).inc()
        return _refusal(record.status_code, record.reason, retry_after)

    async def _handshake(
        self, name: str, verdict: Handshake, received_at: datetime, remote: str | None
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
            await self.committer.submit(record)
        except Exception:  # the answer matters more than its log line
            log.exception("could not log a handshake", extra={"source": name})
        self.metrics.deliveries.labels(name, DeliveryOutcome.HANDSHAKE.value).inc()
        log.info("handshake answered: %s", verdict.what, extra={"source": name})
        return reply_response(verdict.reply)

    def _db_ok(self) -> bool:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True

    async def healthz(self, request: Request) -> Response:
        try:
            await asyncio.to_thread(self._db_ok)
        except Exception as exc:
            log.warning("health check failed: %s", exc.__class__.__name__)
            return _refusal(503, "database unreachable", STORAGE_RETRY_AFTER_SECONDS)
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(self, request: Request) -> Response:
        payload = await asyncio.to_thread(generate_latest, self.metrics.registry)
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.committer.start()
        try:
            yield
        finally:
            await self.committer.stop()
            for gate in self.gates.values():
                gate.close()
            for verifier in self.verifiers.values():
                verifier.close()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse(_reject_body(str(exc.detail), "error"), status_code=exc.status_code)


def create_app(
    settings: Settings,
    engine: Engine,
    *,
    verifiers: dict[str, SourceVerifier] | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    verifiers = build_verifiers(settings) if verifiers is None else verifiers
    receiver = Receiver(settings, engine, verifiers, clock)
    return Starlette(
        routes=[
            # GET too, for a provider that notifies with one; each source's provider says which
            Route("/webhooks/{source}", receiver.receive, methods=["POST", "GET"]),
            Route("/healthz", receiver.healthz, methods=["GET"]),
            Route("/metrics", receiver.metrics_endpoint, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},
        lifespan=receiver.lifespan,
        middleware=[
            Middleware(
                ConcurrencyLimit,
                limit=settings.receiver.limit_concurrency,
                on_refused=receiver.metrics.busy.inc,
                exempt=frozenset(f"/webhooks/{name}" for name in receiver.gates),
            )
        ],
    )
