"""The passes after a scan's last page: set questions over the whole inbox, answered in SQL.

Orphaned, stuck and dead have their one home here, detection and fix rule side by side:

- ``orphaned``: a webhook event inside the scan's window (from the oldest to the newest record it
  listed, both included) that the source did not list (an anti-join against the ids the scan saw,
  never a set in memory), or one the provider says it never had;
  fixed once the source lists it or the event is gone from the inbox.
- ``stuck``: an event unprocessed for longer than ``stuck_after_seconds``; ``dead``: a dead letter.
  Every run rescans all of them, so one not seen again is fixed.

The kinds the judge decides (missing and the business kinds) are re-checked here only for their
facts (:meth:`Passes.open_judged`, :meth:`Passes.inbox_presence`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import (
    Row,
    Table,
    and_,
    delete,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    true,
    update,
)

from connectors.base import Listing
from reconciler.reconcile.store.scan import Scan
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    ORPHAN_WATERMARKS,
    RECON_SEEN,
    DiscrepancyKind,
    DiscrepancyStatus,
    EventOrigin,
    EventStatus,
)
from reconciler.storage.types import utcnow
from reconciler.storage.upserts import seen_again

discrepancies = DISCREPANCIES
events = INBOX_EVENTS
UNPROCESSED = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED)
# A webhook is received after the provider created it; this much clock skew between the provider and
# us is still tolerated when the scan's window is turned into a bound on received_at (indexed).
CLOCK_SKEW = timedelta(hours=1)
RESOLUTION_BATCH = 500


Window = tuple[datetime, "datetime | None"]  # a scan's listed span: oldest, newest (None: open)


class DialectSql(Protocol):
    """The database's own SQL in the closing passes."""

    def insert(self, table: Table) -> Any:
        """An INSERT of this database that takes ``on_conflict_do_update``."""

    def seen_ids(self, *, equal_to: Any = None) -> Any:
        """The ids the scan saw, unpacked from their pages' JSON arrays (``equal_to``: only the one
        equal to it, for a correlated EXISTS)."""

    def not_seen(self, *, whole_inbox: bool) -> Any:
        """The inbox event is not among the ids the scan saw (``whole_inbox``: the window holds
        the source's whole inbox, which some databases plan differently)."""

    def before_anti_join(self) -> None:
        """Just before the first statement that joins the seen ids."""

    def settled_by_tally(self, window: Window, seen_rows: int, scope: Any) -> bool:
        """Whether the scan is known to have listed every inbox event of its window without the
        anti-join (PostgreSQL keeps a tally of its page lookups)."""

    def whole_inbox(self, window_start: datetime, skew: timedelta) -> bool:
        """Whether the window holds the source's whole inbox (only SQLite plans by it)."""


def listed_scope(listing: Listing) -> Any:
    """The inbox events a source's list can return (``connectors.base.Listing``): its event types
    (``*`` wildcards become LIKE patterns) and its one account."""
    types = _listed_types(listing.event_types)
    if listing.account is None:
        return types
    return and_(types, events.c.account == listing.account)


def in_window(window: Window) -> Any:
    """The inbox event's time lies in the scan's listed span, both ends included: a listing covers
    the seconds it reached whole (ties on a busy account's second included), and nothing past its
    newest record (what came later is asked of the provider by id, ``late_orphan_candidates``)."""
    start, end = window
    at = func.coalesce(events.c.occurred_at, events.c.received_at)
    return and_(at >= start, true() if end is None else at <= end)


def _listed_types(patterns: Sequence[str]) -> Any:
    if not patterns:
        return true()
    terms: list[Any] = []
    for pattern in patterns:
        if "*" in pattern:
            like = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            terms.append(events.c.event_type.like(like.replace("*", "%"), escape="\\"))
        else:
            terms.append(events.c.event_type == pattern)
    return or_(*terms)


class Passes:
    """The passes after the last page, the same SQL on every database but for the database's own
    part (``sql``: the store, see ``interface.DialectSql``)."""

    def __init__(self, scan: Scan, sql: DialectSql) -> None:
        self.scan, self.sql = scan, sql
        self.conn, self.source, self.run_id, self.now = (
            scan.conn,
            scan.source,
            scan.run_id,
            scan.now,
        )

    # -- the scan's window -------------------------------------------------------------------------

    def window(self) -> tuple[Window | None, int]:
        """The span the current scan listed (in this run or an interrupted one): its oldest and
        newest record (None: it listed nothing new), and how many ``recon_seen`` rows hold its ids."""
        oldest, newest, rows = self.conn.execute(
            select(
                func.min(RECON_SEEN.c.occurred_epoch),
                func.max(RECON_SEEN.c.newest_epoch),
                func.count(),
            ).where(RECON_SEEN.c.source == self.source)
        ).one()
        if oldest is None:
            return None, int(rows)
        end = datetime.fromtimestamp(float(newest), UTC) if newest is not None else None
        return (datetime.fromtimestamp(float(oldest), UTC), end), int(rows)

    def forget_seen(self) -> None:
        """The scan is complete: its seen ids have served."""
        self.conn.execute(delete(RECON_SEEN).where(RECON_SEEN.c.source == self.source))

    # -- orphaned ----------------------------------------------------------------------------------

    def orphans(self, window: Window, seen_rows: int, grace: timedelta, scope: Any) -> int:
        """Inbox webhook events inside the scan's window that the source did not list. ``scope``:
        what the listing can return (:func:`listed_scope`); other events are never orphans."""
        if self.sql.settled_by_tally(window, seen_rows, scope):
            return 0
        inside = and_(
            events.c.origin == EventOrigin.WEBHOOK,
            in_window(window),
            events.c.received_at >= window[0] - CLOCK_SKEW,
            events.c.received_at <= self.now - grace,
            scope,
        )
        whole = self.sql.whole_inbox(window[0], CLOCK_SKEW)
        self.sql.before_anti_join()
        return self._insert_from(
            DiscrepancyKind.ORPHANED,
            and_(inside, self.sql.not_seen(whole_inbox=whole)),
            "not_listed_by_source",
        )

    def orphans_by_id(self, event_ids: Sequence[str]) -> int:
        """These inbox events are orphans: the source answered that it does not know them."""
        if not event_ids:
            return 0
        return self._insert_from(
            DiscrepancyKind.ORPHANED,
            and_(events.c.origin == EventOrigin.WEBHOOK, events.c.event_id.in_(list(event_ids))),
            "not_known_to_source",
        )

    def first_unlisted_in_grace(self, grace: timedelta, scope: Any) -> datetime | None:
        """When the oldest webhook event still inside the grace period arrived that the scan did
        not list (None: every one was listed). Events the scan listed are settled; the unlisted
        ones are judged by a later run, which starts its per-event checks from here."""
        return self.conn.execute(
            select(func.min(events.c.received_at)).where(
                events.c.source == self.source,
                events.c.origin == EventOrigin.WEBHOOK,
                events.c.received_at > self.now - grace,
                scope,
                self.sql.not_seen(whole_inbox=False),
            )
        ).scalar()

    def late_orphan_candidates(
        self,
        checked_until: datetime,
        grace: timedelta,
        window: Window | None,
        scope: Any,
        limit: int,
    ) -> list[tuple[str, datetime]]:
        """Webhook events received since the watermark and past the grace period that this scan's
        anti-join does not judge (they lie outside its window, or the scan listed nothing):
        (event id, received at), oldest receipt first, at most ``limit``. Not already open
        orphans."""
        d = discrepancies
        open_orphan = exists(
            select(d.c.id).where(
                d.c.source == self.source,
                d.c.kind == DiscrepancyKind.ORPHANED,
                d.c.record_key == events.c.event_id,
                d.c.field == "",
                d.c.status == DiscrepancyStatus.OPEN,
            )
        )
        outside = true() if window is None else not_(in_window(window))
        rows = self.conn.execute(
            select(events.c.event_id, events.c.received_at)
            .where(
                events.c.source == self.source,
                events.c.origin == EventOrigin.WEBHOOK,
                events.c.received_at > checked_until,
                events.c.received_at <= self.now - grace,
                outside,
                scope,
                not_(open_orphan),
            )
            .order_by(events.c.received_at)
            .limit(limit)
        ).all()
        return [(str(r.event_id), r.received_at) for r in rows]

    def orphan_watermark(self) -> datetime | None:
        return self.conn.execute(
            select(ORPHAN_WATERMARKS.c.checked_until).where(
                ORPHAN_WATERMARKS.c.source == self.source
            )
        ).scalar_one_or_none()

    def save_orphan_watermark(self, checked_until: datetime) -> None:
        stmt = self.sql.insert(ORPHAN_WATERMARKS).values(
            source=self.source, checked_until=checked_until, updated_at=utcnow(), run_id=self.run_id
        )
        self.conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["source"],
                set_={
                    "checked_until": stmt.excluded.checked_until,
                    "updated_at": stmt.excluded.updated_at,
                    "run_id": stmt.excluded.run_id,
                },
            )
        )

    # -- stuck and dead ----------------------------------------------------------------------------

    def stuck_and_dead(self, stuck_after: timedelta) -> tuple[int, int]:
        stuck = self._insert_from(
            DiscrepancyKind.STUCK,
            and_(events.c.status.in_(UNPROCESSED), events.c.queued_at < self.now - stuck_after),
            None,
        )
        dead = self._insert_from(
            DiscrepancyKind.DEAD, events.c.status == EventStatus.DEAD, "dead_letter"
        )
        return stuck, dead

    # -- resolution --------------------------------------------------------------------------------

    def open_kinds(self) -> set[DiscrepancyKind]:
        """The kinds of which the source has open discrepancies (one index range)."""
        d = discrepancies
        rows = self.conn.execute(
            select(d.c.kind)
            .where(d.c.status == DiscrepancyStatus.OPEN, d.c.source == self.source)
            .distinct()
        ).scalars()
        return {DiscrepancyKind(kind) for kind in rows}

    def resolve_set_kinds(self, open_kinds: set[DiscrepancyKind]) -> int:
        """Stuck or dead events no longer so (not seen again this run); orphans the source has now
        listed or that are gone from the inbox. Kinds without open discrepancies are skipped."""
        d = discrepancies
        n = 0
        if open_kinds & {DiscrepancyKind.STUCK, DiscrepancyKind.DEAD}:
            n += self._resolve_where(
                d.c.last_run_id != self.run_id,
                "no longer stuck or dead",
                [DiscrepancyKind.STUCK, DiscrepancyKind.DEAD],
            )
        if DiscrepancyKind.ORPHANED in open_kinds:
            self.sql.before_anti_join()
            listed = d.c.event_id.in_(
                self.sql.seen_ids()
            )  # a semi-join: materialised / hashed once
            gone = not_(
                exists().where(events.c.source == self.source, events.c.event_id == d.c.event_id)
            )
            n += self._resolve_where(
                or_(listed, gone), "listed by the source or removed", [DiscrepancyKind.ORPHANED]
            )
        return n

    def open_judged(
        self, kinds: Sequence[DiscrepancyKind], after_id: int, limit: int = RESOLUTION_BATCH
    ) -> Sequence[Row[Any]]:
        """Open discrepancies of these kinds not seen again this run, in id order after ``after_id``
        (a batch for the judge to re-check)."""
        d = discrepancies
        return self.conn.execute(
            select(
                d.c.id,
                d.c.kind,
                d.c.event_id,
                d.c.object_type,
                d.c.object_id,
                d.c.field,
                d.c.source_value,
                d.c.detail,
            )
            .where(
                d.c.source == self.source,
                d.c.status == DiscrepancyStatus.OPEN,
                d.c.kind.in_(list(kinds)),
                d.c.last_run_id != self.run_id,
                d.c.id > after_id,
            )
            .order_by(d.c.id)
            .limit(limit)
        ).all()

    def inbox_presence(
        self, event_ids: Sequence[str], objects: Sequence[tuple[str, str]]
    ) -> tuple[set[str], set[tuple[str, str]]]:
        """Which of these event ids, and of these objects (type, id), the inbox holds."""
        present_events: set[str] = set()
        present_objects: set[tuple[str, str]] = set()
        if event_ids:
            present_events = set(
                self.conn.execute(
                    select(events.c.event_id).where(
                        events.c.source == self.source, events.c.event_id.in_(list(event_ids))
                    )
                ).scalars()
            )
        if objects:
            rows = self.conn.execute(
                select(events.c.object_type, events.c.object_id)
                .where(
                    events.c.source == self.source,
                    events.c.object_id.in_(sorted({o for _, o in objects})),
                )
                .distinct()
            )
            present_objects = {(t or "", o) for t, o in rows}
        return present_events, present_objects

    def resolve(self, ids: Sequence[int], resolution: str) -> int:
        """These open discrepancies are fixed."""
        if not ids:
            return 0
        return self._resolve_where(discrepancies.c.id.in_(list(ids)), resolution, None)

    def detection_delays(self) -> tuple[float, float] | None:
        """The median and the maximum detection delay (first seen - occurred at) of the
        discrepancies this run found first, or None when it found none that has one. In SQL: a run
        that finds a million reads back three values. The median is the middle value in order, or
        the mean of the middle two, as ``statistics.median`` takes it."""
        d = discrepancies
        delay = d.c.detection_delay_seconds
        # last_run_id is indexed, and a row first seen in this run was last seen in it
        mine = and_(
            d.c.last_run_id == self.run_id, d.c.first_run_id == self.run_id, delay.is_not(None)
        )
        n, longest = self.conn.execute(select(func.count(), func.max(delay)).where(mine)).one()
        if not n:
            return None
        middle = [
            float(v)
            for v in self.conn.execute(
                select(delay).where(mine).order_by(delay).offset((n - 1) // 2).limit(2 - n % 2)
            ).scalars()
        ]
        return sum(middle) / len(middle), float(longest)

    # -- statements ----------------------------------------------------------------------------------

    def _resolve_where(
        self, condition: Any, resolution: str, kinds: Sequence[DiscrepancyKind] | None
    ) -> int:
        d = discrepancies
        where = [d.c.source == self.source, d.c.status == DiscrepancyStatus.OPEN, condition]
        if kinds is not None:
            where.append(d.c.kind.in_(list(kinds)))
        result = self.conn.execute(
            update(d)
            .where(*where)
            .values(status=DiscrepancyStatus.RESOLVED, resolution=resolution, resolved_at=self.now)
        )
        return int(result.rowcount or 0)

    def _insert_from(self, kind: DiscrepancyKind, where: Any, cause: str | None) -> int:
        """INSERT ... SELECT from the inbox, upserting by natural key; how many rows it matched."""
        d = discrepancies
        columns = {
            "source": events.c.source,
            "kind": literal(kind.value),
            "record_key": events.c.event_id,
            "field": literal(""),
            "event_id": events.c.event_id,
            "event_type": events.c.event_type,
            "object_type": events.c.object_type,
            "object_id": events.c.object_id,
            "occurred_at": events.c.occurred_at,
            "first_seen_at": literal(self.now, d.c.first_seen_at.type),
            "last_seen_at": literal(self.now, d.c.last_seen_at.type),
            "first_run_id": literal(self.run_id),
            "last_run_id": literal(self.run_id),
            "status": literal(DiscrepancyStatus.OPEN.value),
            "cause": literal(cause) if cause else events.c.status,
            "detail": literal(None, d.c.detail.type),
        }
        query = select(*columns.values()).where(events.c.source == self.source, where)
        stmt = seen_again(self.sql.insert(d).from_select(list(columns), query))
        # counted from RETURNING: exact on both databases (rowcount is not)
        return len(self.conn.execute(stmt.returning(d.c.id)).all())
