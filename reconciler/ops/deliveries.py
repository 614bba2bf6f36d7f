"""The delivery log, listed and re-sent: what ``hookledger deliveries list|resend`` shows and does.

A stored delivery is re-sent as its exact bytes with the provider's headers it was stored with,
signed afresh with the
source's own scheme (``Provider.sign``: a fresh timestamp where the scheme has one) to a URL the
operator names: the design notes' test of a handler, one delivery sent ten times to a receiver
that has not stored it (a fresh database), the first writing and the next nine answered without
touching the business tables (to the receiver that stored it, all ten are duplicates).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import Connection, func, select

from reconciler.config import Settings
from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.sources import options_of, provider
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS


@dataclass(frozen=True)
class DeliveryFilter:
    sources: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    received_from: datetime | None = None  # inclusive
    received_to: datetime | None = None  # exclusive

    def where(self) -> list[Any]:
        d = DELIVERIES
        clauses: list[Any] = []
        if self.sources:
            clauses.append(d.c.source.in_(self.sources))
        if self.outcomes:
            clauses.append(d.c.outcome.in_(self.outcomes))
        if self.received_from is not None:
            clauses.append(d.c.received_at >= self.received_from)
        if self.received_to is not None:
            clauses.append(d.c.received_at < self.received_to)
        return clauses


@dataclass(frozen=True)
class DeliveryPage:
    rows: list[dict[str, Any]]
    total: int
    next_before: int | None  # pass back as ``before_id`` for the next page


def list_deliveries(
    conn: Connection, flt: DeliveryFilter, *, before_id: int | None = None, limit: int = 50
) -> DeliveryPage:
    """A page of deliveries, newest first (keyset on the id: the log is append-only), with the
    total the filter matches."""
    d = DELIVERIES
    stmt = select(
        d.c.id,
        d.c.received_at,
        d.c.source,
        d.c.outcome,
        d.c.status_code,
        d.c.event_id,
        d.c.delivery_id,
        d.c.reason,
    ).where(*flt.where())
    if before_id is not None:
        stmt = stmt.where(d.c.id < before_id)
    rows = [dict(r._mapping) for r in conn.execute(stmt.order_by(d.c.id.desc()).limit(limit + 1))]
    more = len(rows) > limit
    rows = rows[:limit]
    total = int(conn.execute(select(func.count()).select_from(d).where(*flt.where())).scalar_one())
    return DeliveryPage(rows, total, rows[-1]["id"] if more and rows else None)


@dataclass(frozen=True)
class StoredDelivery:
    id: int
    source: str
    event_id: str
    body: bytes
    headers: dict[str, str]
    content_type: str | None


def stored_delivery(conn: Connection, delivery_id: int) -> StoredDelivery:
    """A delivery's bytes and headers: a conflicting redelivery's own body, else its event's (the
    first delivery's bytes, as stored)."""
    d, e = DELIVERIES, INBOX_EVENTS
    row = conn.execute(
        select(d.c.source, d.c.event_id, d.c.outcome, d.c.body).where(d.c.id == delivery_id)
    ).first()
    if row is None:
        raise NoSuchRecordError(f"no delivery {delivery_id} in the delivery log")
    if row.event_id is None:
        raise NoSuchRecordError(
            f"delivery {delivery_id} was {row.outcome} and stored no event: nothing to re-send"
        )
    event = conn.execute(
        select(e.c.body, e.c.headers, e.c.content_type).where(
            e.c.source == row.source, e.c.event_id == row.event_id
        )
    ).first()
    if event is None:
        raise NoSuchRecordError(
            f"delivery {delivery_id}: its event '{row.event_id}' is no longer in the inbox (pruned)"
        )
    headers = {str(k).lower(): str(v) for k, v in (event.headers or {}).items()}
    if event.content_type:
        headers.setdefault("content-type", str(event.content_type))
    return StoredDelivery(
        delivery_id,
        str(row.source),
        str(row.event_id),
        bytes(row.body if row.body is not None else event.body),
        headers,
        event.content_type,
    )


@dataclass(frozen=True)
class Answer:
    n: int
    status: int
    said: str  # the receiver's status field where it answered JSON, else the start of its body


def _said(response: httpx.Response) -> str:
    try:
        document = response.json()
    except ValueError:
        return response.text[:80].strip()
    status = document.get("status") if isinstance(document, dict) else None
    if isinstance(status, str):
        return status
    return response.text[:80].strip()


def resend(
    settings: Settings,
    stored: StoredDelivery,
    *,
    to: str,
    times: int = 1,
    client: httpx.Client | None = None,
    clock: Callable[[], float] = time.time,
) -> Sequence[Answer]:
    """POST the delivery ``times`` times to ``to``, each signed afresh; the answers in order. A
    receiver that cannot be reached stops it with one line."""
    source = settings.source(stored.source)
    if source is None:
        raise ActionRefusedError(
            f"delivery {stored.id}: source '{stored.source}' is not configured"
        )
    sign = provider(source.kind).sign
    if sign is None:
        raise ActionRefusedError(
            f"a '{source.kind}' delivery cannot be signed again (docs/providers.md, \"Re-signing\")"
        )
    secret = source.signing_secrets()[0]
    options = options_of(source, secrets=False)
    own = client is None
    http = client or httpx.Client(timeout=30, follow_redirects=False)
    answers = []
    try:
        for n in range(1, times + 1):
            # the provider's own headers, as its sign keeps them (not the stored Host, length, …)
            headers = sign(options, stored.headers, stored.body, secret, clock(), to)
            try:
                response = http.post(to, content=stored.body, headers=headers)
            except httpx.HTTPError as exc:
                raise ActionRefusedError(
                    f"--to {to}: cannot be reached ({exc.__class__.__name__})"
                ) from None
            answers.append(Answer(n, response.status_code, _said(response)))
    finally:
        if own:
            http.close()
    return answers
