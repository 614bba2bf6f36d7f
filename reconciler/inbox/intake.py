"""The receiver's steps that need no server: read the body within its bound, turn a verified
delivery's verdict into the events to store (or the reason nothing of it can be), and answer what
was stored. ``reconciler.inbox.receiver`` runs them in order (read the body -> verify -> the items
of the verdict -> store -> answer); each is unit-tested here without HTTP.

``hookledger.testing`` calls :func:`items_of` to build the event a handler would see from a sample
delivery, so a test reads a delivery as the receiver does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.responses import JSONResponse, Response

from connectors.parsing import ParsedEvent, mask_headers
from connectors.webhooks import Batch, BatchItem, Received, Reply, WebhookRequest
from reconciler.correlation import correlation_id
from reconciler.inbox.bounds import event_problem
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord, Stored
from reconciler.storage.models import DeliveryOutcome


class TooLarge(Exception):
    """The body is larger than ``[receiver] max_body_bytes``."""


async def read_body(chunks: AsyncIterator[bytes], declared: str | None, limit: int) -> bytes:
    """The whole body, refused (:class:`TooLarge`) as soon as it is known to pass ``limit``: from
    its declared Content-Length before a byte is read, else while it streams in."""
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise TooLarge
    return bytes(body)


@dataclass(frozen=True)
class Intake:
    """The events of one delivery, stored together or not at all, and the answer its provider
    expects once they are (None: the receiver's own JSON)."""

    items: tuple[IncomingEvent, ...]
    ack: Reply | None = None


def as_batch(
    verdict: ParsedEvent | Received | Batch, body: bytes, content_type: str | None
) -> Batch:
    """Every verdict that stores events as a batch: one event is a batch of one, its body the
    request's."""
    if isinstance(verdict, Batch):
        return verdict
    if isinstance(verdict, Received):
        return Batch((BatchItem(verdict.event, body, content_type),), verdict.ack)
    return Batch((BatchItem(verdict, body, content_type),))


def items_of(
    verifier: SourceVerifier,
    verdict: ParsedEvent | Received | Batch,
    request: WebhookRequest,
    received_at: datetime,
    remote: str | None = None,
) -> Intake | RejectedRecord:
    """The delivery's events as stored (headers masked, a correlation id each), or a 400 naming
    the first item that cannot be stored: then nothing of it is, and the provider sends it again."""
    name = verifier.source.name
    batch = as_batch(verdict, request.body, request.headers.get("content-type"))
    masked = mask_headers(request.headers, verifier.sensitive_headers)
    items = []
    for n, one in enumerate(batch.items):
        parsed = one.event
        problem = event_problem(parsed, request.headers, one.content_type)
        if problem is not None:
            where = f"item {n}: " if len(batch.items) > 1 else ""
            return RejectedRecord(
                name,
                400,
                where + problem,
                received_at,
                remote,
                parsed.event_id,
                parsed.delivery_id,
            )
        items.append(
            IncomingEvent(
                source=name,
                parsed=parsed,
                body=one.body,
                headers=masked,
                received_at=received_at,
                content_type=one.content_type,
                remote_addr=remote,
                fingerprint_ignore=verifier.fingerprint_ignore,
                correlation_id=correlation_id(
                    request.headers, parsed, verifier.source.correlation_header
                ),
            )
        )
    return Intake(tuple(items), batch.ack)


def reply_response(reply: Reply) -> Response:
    """An answer its provider asks for. A handshake may echo text its caller chose (Dropbox's
    unsigned challenge): never sniffed as HTML."""
    return Response(
        reply.body,
        status_code=reply.status,
        media_type=reply.content_type,
        headers={"X-Content-Type-Options": "nosniff"},
    )


def answer_of(intake: Intake, stored: Sequence[Stored]) -> Response:
    """The answer once the items are committed: the provider's own where it expects one (a
    duplicate is acknowledged alike), else each event's outcome, and for a conflict the fields
    that differ from the stored copy, for whoever sent it."""
    if intake.ack is not None:
        return reply_response(intake.ack)
    answers: list[dict[str, Any]] = []
    for item, done in zip(intake.items, stored, strict=True):
        answer: dict[str, Any] = {"status": done.outcome.value, "event_id": item.parsed.event_id}
        if done.outcome is DeliveryOutcome.CONFLICT:
            answer["fields"] = list(done.fields)
        answers.append(answer)
    if len(answers) == 1:
        return JSONResponse(answers[0])
    return JSONResponse({"status": "stored", "events": answers})
