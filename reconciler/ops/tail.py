"""``hookledger events tail``: new deliveries and their events' processing outcome as they happen,
one line each, as ``stripe listen`` shows a development loop.

Nothing is loaded whole: deliveries are read by id after the last one seen (the log is
append-only, so the id is a keyset), a page at a time; the events those deliveries named are
watched, at most :data:`WATCHED` of the latest, and read back by row id on each poll to see their
status move. :class:`Tail` holds that state and turns rows into lines (pure); :func:`follow` is the
loop that reads the database."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, and_, func, select

from reconciler.logs import escape_control
from reconciler.payment_text import mask_payment_text
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS

PAGE = 500  # deliveries read at once; a burst is read page after page within one poll
WATCHED = 1000  # events whose status is followed (the latest ones); older ones are let go
ERROR_CHARS = 160


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    received_at: datetime
    source: str
    outcome: str
    status_code: int
    event_id: str | None
    reason: str | None
    event_row: int | None  # the inbox event it names, where one is stored
    event_type: str | None
    status: str | None


@dataclass(frozen=True)
class EventState:
    row: int
    source: str
    event_id: str
    event_type: str | None
    status: str
    attempts: int
    error_class: str | None
    last_error: str | None


def _text(value: object) -> str:
    return str(getattr(value, "value", value))


def latest_delivery_id(conn: Connection, sources: Sequence[str] = ()) -> int:
    d = DELIVERIES
    stmt = select(func.max(d.c.id))
    if sources:
        stmt = stmt.where(d.c.source.in_(sources))
    return int(conn.execute(stmt).scalar_one() or 0)


def deliveries_after(
    conn: Connection, after_id: int, sources: Sequence[str] = (), limit: int = PAGE
) -> list[DeliveryRow]:
    """The deliveries after ``after_id``, oldest first, each with its stored event's row."""
    d, e = DELIVERIES, INBOX_EVENTS
    joined = d.outerjoin(e, and_(e.c.source == d.c.source, e.c.event_id == d.c.event_id))
    stmt = (
        select(
            d.c.id,
            d.c.received_at,
            d.c.source,
            d.c.outcome,
            d.c.status_code,
            d.c.event_id,
            d.c.reason,
            e.c.id.label("event_row"),
            e.c.event_type,
            e.c.status,
        )
        .select_from(joined)
        .where(d.c.id > after_id)
    )
    if sources:
        stmt = stmt.where(d.c.source.in_(sources))
    rows = conn.execute(stmt.order_by(d.c.id).limit(limit))
    return [
        DeliveryRow(
            id=int(r.id),
            received_at=r.received_at,
            source=str(r.source),
            outcome=_text(r.outcome),
            status_code=int(r.status_code),
            event_id=r.event_id,
            reason=r.reason,
            event_row=r.event_row,
            event_type=r.event_type,
            status=None if r.status is None else _text(r.status),
        )
        for r in rows
    ]


def event_states(conn: Connection, rows: Collection[int]) -> list[EventState]:
    if not rows:
        return []
    e = INBOX_EVENTS
    stmt = select(
        e.c.id,
        e.c.source,
        e.c.event_id,
        e.c.event_type,
        e.c.status,
        e.c.attempts,
        e.c.error_class,
        e.c.last_error,
    ).where(e.c.id.in_(list(rows)))
    return [
        EventState(
            row=int(r.id),
            source=str(r.source),
            event_id=str(r.event_id),
            event_type=r.event_type,
            status=_text(r.status),
            attempts=int(r.attempts),
            error_class=None if r.error_class is None else _text(r.error_class),
            last_error=r.last_error,
        )
        for r in conn.execute(stmt.order_by(e.c.id))
    ]


def _stamp(at: datetime) -> str:
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


class Tail:
    """What has been seen: each watched event's last status. ``mask`` hides what an error may
    quote from the payload (the command passes the dashboard's masker; payment data at least)."""

    def __init__(
        self, mask: Callable[[str], str] = mask_payment_text, watched: int = WATCHED
    ) -> None:
        self.mask = mask
        self.capacity = watched
        self._status: OrderedDict[int, str] = OrderedDict()

    def watched(self) -> list[int]:
        return list(self._status)

    def deliveries(self, rows: Sequence[DeliveryRow]) -> list[str]:
        lines = []
        for d in rows:
            what = f"{d.outcome} (HTTP {d.status_code})"
            named = f"{d.event_id}  {d.event_type or '-'}" if d.event_id else "-"
            line = f"{_stamp(d.received_at)}  {d.source:<10} delivery {d.id:<6} {what:<22} {named}"
            if d.event_row is not None and d.status is not None:
                line += f"  [{d.status}]"
                self._watch(d.event_row, d.status)
            if d.reason and d.outcome != "accepted":
                line += f"  {escape_control(self.mask(d.reason), ERROR_CHARS)}"
            lines.append(escape_control(line))
        return lines

    def states(self, states: Sequence[EventState], now: datetime) -> list[str]:
        """A line for each watched event whose status moved since it was last seen; ``processing``
        is passed over (a moment between two states, seen or not depending on when the poll
        falls), so each attempt prints its outcome once."""
        lines = []
        for s in states:
            if s.status == "processing" or self._status.get(s.row, s.status) == s.status:
                continue
            self._status[s.row] = s.status
            line = (
                f"{_stamp(now)}  {s.source:<10} event    {s.event_id}  {s.event_type or '-'}  "
                f"{s.status} (attempt {s.attempts})"
            )
            if s.status != "processed" and s.last_error:
                first = s.last_error.strip().splitlines()[0] if s.last_error.strip() else ""
                kind = f"{s.error_class}: " if s.error_class else ""
                line += f"  {kind}{escape_control(self.mask(first), ERROR_CHARS)}"
            lines.append(escape_control(line))
        return lines

    def _watch(self, row: int, status: str) -> None:
        self._status[row] = status
        self._status.move_to_end(row)
        while len(self._status) > self.capacity:
            self._status.popitem(last=False)


def follow(
    engine: Engine,
    tail: Tail,
    write: Callable[[str], None],
    *,
    sources: Sequence[str] = (),
    interval: float = 1.0,
    stop: threading.Event | None = None,
    ready: Callable[[], None] = lambda: None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Print what is new every ``interval`` seconds, from the deliveries after the newest one at
    the start (``ready`` is called once that is known), until ``stop`` is set (or for ever). Each
    poll is one short read."""
    stop = stop or threading.Event()
    with engine.connect() as conn:
        last = latest_delivery_id(conn, sources)
    ready()
    while not stop.wait(interval):
        with engine.connect() as conn:
            while True:
                rows = deliveries_after(conn, last, sources)
                for line in tail.deliveries(rows):
                    write(line)
                if rows:
                    last = rows[-1].id
                if len(rows) < PAGE:
                    break
            for line in tail.states(event_states(conn, tail.watched()), clock()):
                write(line)
