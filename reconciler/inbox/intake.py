"""One receiver step, pure: a verified delivery's verdict as the events to store (or the reason
nothing of it can be stored), with the answer its provider expects.

The receiver calls it between verifying and storing; ``hookledger.testing`` calls it to build the
event a handler would see from a sample delivery, so both read a delivery the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from connectors.parsing import ParsedEvent, mask_headers
from connectors.webhooks import Batch, BatchItem, Received, Reply, WebhookRequest
from reconciler.correlation import correlation_id
from reconciler.inbox.bounds import event_problem
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord


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
