"""Discrepancy rows: upsert by natural key, the SQL-only passes (orphaned, stuck, dead), auto-resolve."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql

from reconciler.cursors import cursor_upsert
from reconciler.reconcile.seen import ListedTally
from reconciler.storage.dialect import PrecompiledWrite, insert_for
from reconciler.storage.models import (
    CURSORS,
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

D = DISCREPANCIES
E = INBOX_EVENTS
UNPROCESSED = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED)


@dataclass(frozen=True)
class Finding:
    kind: DiscrepancyKind
    record_key: str
    field: str = ""
    event_id: str | None = None
    event_type: str | None = None
    object_type: str | None = None
    object_id: str | None = None
    source_value: Any = None
    local_value: Any = None
    amount: int | None = None
    currency: str | None = None
    cause: str | None = None
    recover_by: datetime | None = None
    occurred_at: datetime | None = None
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, sort_keys=True)


def _reopened() -> Any:
    """Seen again: open, unless an operator chose to ignore it."""
    return case(
        (D.c.status == DiscrepancyStatus.IGNORED, D.c.status),
        else_=literal(DiscrepancyStatus.OPEN.value),
    )


def _on_natural_key(stmt: Any) -> Any:
    """A dialect's INSERT into discrepancies made an upsert by natural key (see :func:`upsert`)."""
    return stmt.on_conflict_do_update(
        index_elements=["source", "kind", "record_key", "field"],
        set_={
            "last_seen_at": stmt.excluded.last_seen_at,
            "last_run_id": stmt.excluded.last_run_id,
            "source_value": stmt.excluded.source_value,
            "local_value": stmt.excluded.local_value,
            "cause": stmt.excluded.cause,
            "amount": stmt.excluded.amount,
            "currency": stmt.excluded.currency,
            "recover_by": stmt.excluded.recover_by,
            "detail": stmt.excluded.detail,
            "status": _reopened(),
            "resolution": case(
                (D.c.status == DiscrepancyStatus.RESOLVED, literal(None)), else_=D.c.resolution
            ),
            "resolved_at": case(
                (D.c.status == DiscrepancyStatus.RESOLVED, literal(None)), else_=D.c.resolved_at
            ),
        },
    )


def _findings_upsert(conn: Connection) -> Any:
    return _on_natural_key(insert_for(conn, D))


_FINDINGS_WRITE = PrecompiledWrite(_findings_upsert)


def upsert(
    conn: Connection, source: str, run_id: str, now: datetime, findings: Sequence[Finding]
) -> None:
    """One row per (source, kind, record_key, field). Seen again: last_seen moves, values refresh, a
    resolved row reopens; an ignored row stays ignored."""
    if not findings:
        return
    _FINDINGS_WRITE.execute(conn, _rows(source, run_id, now, findings))


def _rows(
    source: str, run_id: str, now: datetime, findings: Sequence[Finding]
) -> list[dict[str, Any]]:
    return [
        {
            "source": source,
            "kind": f.kind,
            "record_key": f.record_key[:400],
            "field": f.field,
            "event_id": f.event_id,
            "event_type": f.event_type,
            "object_type": f.object_type,
            "object_id": f.object_id,
            "source_value": _text(f.source_value),
            "local_value": _text(f.local_value),
            "amount": f.amount,
            "currency": f.currency.lower() if f.currency else None,
            "cause": f.cause,
            "recover_by": f.recover_by,
            "occurred_at": f.occurred_at,
            "detection_delay_seconds": (now - f.occurred_at).total_seconds()
            if f.occurred_at
            else None,
            "first_seen_at": now,
            "last_seen_at": now,
            "first_run_id": run_id,
            "last_run_id": run_id,
            "status": DiscrepancyStatus.OPEN,
            "detail": f.detail or None,
        }
        for f in findings
    ]


# The columns of a row from _rows, in its order (a test holds them equal).
_ROW_KEYS = (
    "source",
    "kind",
    "record_key",
    "field",
    "event_id",
    "event_type",
    "object_type",
    "object_id",
    "source_value",
    "local_value",
    "amount",
    "currency",
    "cause",
    "recover_by",
    "occurred_at",
    "detection_delay_seconds",
    "first_seen_at",
    "last_seen_at",
    "first_run_id",
    "last_run_id",
    "status",
    "detail",
)


def page_write_pg(conn: Connection) -> Any:
    """PostgreSQL: a page's findings (a JSON array of rows, unpacked by ``json_populate_recordset``
    into the table's own row type) upserted by natural key, and the cursor after the page, in ONE
    statement: atomic without a transaction around it, and one round trip to the server."""
    rows = func.json_populate_recordset(
        literal_column(f"NULL::{D.name}"), cast(bindparam("findings", type_=Text), JSON)
    ).table_valued(*_ROW_KEYS)
    stmt = _on_natural_key(
        postgresql.insert(D).from_select(_ROW_KEYS, select(*(rows.c[k] for k in _ROW_KEYS)))
    )
    cursor = cursor_upsert(
        postgresql.insert(CURSORS).values(
            source=bindparam("cursor_source"),
            position=bindparam("cursor_position"),
            updated_at=bindparam("cursor_updated_at"),
            run_id=bindparam("cursor_run_id"),
        )
    )
    return stmt.add_cte(cursor.cte("page_cursor"))


def page_write_params(
    source: str,
    run_id: str,
    now: datetime,
    findings: Sequence[Finding],
    cursor: Mapping[str, Any],
) -> dict[str, Any]:
    """The parameters of :func:`page_write_pg`: one row per natural key (a statement's upsert cannot
    touch a row twice; the last one wins, as row-by-row upserts would leave it)."""
    rows = {
        (r["kind"], r["record_key"], r["field"]): r for r in _rows(source, run_id, now, findings)
    }
    return {
        "findings": json.dumps([_json_row(r) for r in rows.values()]),
        "cursor_source": source,
        "cursor_position": dict(cursor),
        "cursor_updated_at": utcnow(),
        "cursor_run_id": run_id,
    }


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as the JSON ``json_populate_recordset`` reads: times in ISO 8601 with their offset (UTC,
    as ``UTCDateTime`` stores them; a naive one is refused as it is there), enums by value."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"naive datetime {value!r} given to a UTC column ({key})")
            value = value.astimezone(UTC).isoformat()
        out[key] = value
    return out


def _insert_from(
    conn: Connection,
    source: str,
    run_id: str,
    now: datetime,
    kind: DiscrepancyKind,
    where: Any,
    cause: str | None,
) -> int:
    """INSERT ... SELECT from the inbox, upserting by natural key; returns how many rows it matched."""
    cols = [
        "source",
        "kind",
        "record_key",
        "field",
        "event_id",
        "event_type",
        "object_type",
        "object_id",
        "occurred_at",
        "first_seen_at",
        "last_seen_at",
        "first_run_id",
        "last_run_id",
        "status",
        "cause",
        "detail",
    ]
    query = select(
        E.c.source,
        literal(kind.value),
        E.c.event_id,
        literal(""),
        E.c.event_id,
        E.c.event_type,
        E.c.object_type,
        E.c.object_id,
        E.c.occurred_at,
        literal(now, D.c.first_seen_at.type),
        literal(now, D.c.last_seen_at.type),
        literal(run_id),
        literal(run_id),
        literal(DiscrepancyStatus.OPEN.value),
        literal(cause) if cause else E.c.status,
        literal(None, D.c.detail.type),
    ).where(E.c.source == source, where)
    stmt = insert_for(conn, D).from_select(cols, query)
    stmt = stmt.on_conflict_do_update(
        index_elements=["source", "kind", "record_key", "field"],
        set_={
            "last_seen_at": stmt.excluded.last_seen_at,
            "last_run_id": stmt.excluded.last_run_id,
            "status": _reopened(),
            "cause": stmt.excluded.cause,
        },
    )
    return len(
        conn.execute(stmt.returning(D.c.id)).all()
    )  # exact on both dialects (rowcount is not)


def _seen_ids(conn: Connection, source: str, *, equal_to: Any = None) -> Any:
    """The ids the scan saw, unpacked from its pages' arrays (``equal_to``: only those equal to it,
    for a correlated EXISTS)."""
    ids: Any
    if conn.dialect.name == "sqlite":
        ids = func.json_each(RECON_SEEN.c.event_ids).table_valued("value")
    else:
        ids = (
            func.json_array_elements_text(cast(RECON_SEEN.c.event_ids, JSON))
            .table_valued("value")
            .lateral()
        )
    query = (
        select(ids.c.value)
        .select_from(RECON_SEEN)
        .join(ids, true())
        .where(RECON_SEEN.c.source == source)
    )
    return query if equal_to is None else query.where(ids.c.value == equal_to)


def _not_seen(conn: Connection, source: str, *, whole_inbox: bool) -> Any:
    """The inbox event is not among the ids the scan saw. ``recon_seen`` holds them as one JSON array a
    page (see ``ReconSeen``), so each dialect gets the form it plans as one pass over them: SQLite
    materialises a ``NOT IN (subquery)`` once into an ephemeral index (a correlated ``NOT EXISTS``
    rescanned the table per inbox row: 260 s at 100k); PostgreSQL turns ``NOT EXISTS`` into a hash
    anti-join that spills to disk when large (its ``NOT IN`` is hashed only while the ids fit in
    ``work_mem``, else rescanned).

    When the window holds the source's whole inbox (a full rescan), SQLite takes the unseen ids from the
    unique ``(source, event_id)`` index alone (a covering scan) and reads only those rows from the table:
    testing every row of the window read the whole table, bodies included (0.34 against 0.13 s at 100k
    events). For a narrower window that would read every row outside it instead, so the window's
    ``received_at`` range drives the scan there."""
    if conn.dialect.name == "sqlite":
        if whole_inbox:
            unseen = select(E.c.id).where(
                E.c.source == source, E.c.event_id.not_in(_seen_ids(conn, source))
            )
            return E.c.id.in_(unseen)
        return E.c.event_id.not_in(_seen_ids(conn, source))
    return not_(exists(_seen_ids(conn, source, equal_to=E.c.event_id)))


# A webhook is received after the provider created it; this much clock skew between the provider and
# us is still tolerated when the scan's window is turned into a bound on received_at (indexed).
CLOCK_SKEW = timedelta(hours=1)


def listed_scope(patterns: Sequence[str], account: str | None = None) -> Any:
    """The inbox events a listing can return: of these event types (all when there are none; Stripe's
    ``types[]`` takes ``*`` wildcards, which become LIKE patterns), and of the one connected account
    it is read as (Stripe ``account``: the ``Stripe-Account`` header)."""
    types = _listed_types(patterns)
    return types if account is None else and_(types, E.c.account == account)


def _listed_types(patterns: Sequence[str]) -> Any:
    if not patterns:
        return true()
    terms: list[Any] = []
    for pattern in patterns:
        if "*" in pattern:
            like = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            terms.append(E.c.event_type.like(like.replace("*", "%"), escape="\\"))
        else:
            terms.append(E.c.event_type == pattern)
    return or_(*terms)


def record_orphans(
    conn: Connection,
    source: str,
    run_id: str,
    now: datetime,
    window_start: datetime,
    grace: timedelta,
    tally: ListedTally | None = None,
    seen_rows: int | None = None,
    *,
    before_anti_join: Callable[[], None] | None = None,
    scope: Any = None,
) -> int:
    """Inbox webhook events inside the scan's window that the source did not list: an anti-join in SQL
    against the ids the scan saw (``recon_seen``), never a set in memory. On PostgreSQL the scan's
    ``tally`` first answers the usual case, a window without orphans, with one count over the window
    (:func:`_listed_all`). ``before_anti_join`` runs just before the anti-join, if it runs.
    ``scope``: what the listing can return (:func:`listed_scope`); other events are never orphans."""
    scope = true() if scope is None else scope
    window = and_(
        E.c.origin == EventOrigin.WEBHOOK,
        func.coalesce(E.c.occurred_at, E.c.received_at) >= window_start,
        E.c.received_at >= window_start - CLOCK_SKEW,
        E.c.received_at <= now - grace,
        scope,
    )
    if conn.dialect.name == "postgresql":
        if tally is not None and _listed_all(conn, source, window_start, tally, seen_rows, scope):
            return 0
        whole_inbox = False  # (only SQLite plans by it)
    else:
        first_received = conn.execute(
            select(func.min(E.c.received_at)).where(E.c.source == source)
        ).scalar()
        whole_inbox = first_received is None or first_received >= window_start - CLOCK_SKEW
    if before_anti_join is not None:
        before_anti_join()
    return _insert_from(
        conn,
        source,
        run_id,
        now,
        DiscrepancyKind.ORPHANED,
        and_(window, _not_seen(conn, source, whole_inbox=whole_inbox)),
        "not_listed_by_source",
    )


def _listed_all(
    conn: Connection,
    source: str,
    window_start: datetime,
    tally: ListedTally,
    seen_rows: int | None,
    scope: Any,
) -> bool:
    """Whether the source listed every inbox event from the scan's window start on (see
    :class:`seen.ListedTally`): their count and hash sum equal the tally's, and the tally saw every
    ``recon_seen`` row of the scan (a resumed scan's earlier rows were counted by another run). The
    events counted are a superset of the orphan window (any origin or receipt time), so all of it
    was listed. One pass over those rows, where the anti-join also unpacks and hashes every seen id
    (1M events: ~0.3-0.5 against ~1.8-2.4 s)."""
    if seen_rows != tally.seen_rows:
        return False
    count, hash_sum = conn.execute(
        select(func.count(), func.sum(func.hashtextextended(E.c.event_id, 0))).where(
            E.c.source == source,
            func.coalesce(E.c.occurred_at, E.c.received_at) >= window_start,
            E.c.received_at >= window_start - CLOCK_SKEW,
            scope,
        )
    ).one()
    return int(count) == tally.count and int(hash_sum or 0) == tally.hash_sum


def late_orphan_candidates(
    conn: Connection,
    source: str,
    checked_until: datetime,
    now: datetime,
    grace: timedelta,
    window_start: datetime | None,
    scope: Any,
    limit: int,
) -> list[tuple[str, datetime]]:
    """Webhook events received since the watermark and past the grace period that this scan's
    anti-join does not judge (its window starts after their occurrence, or the scan listed nothing):
    (event id, received at), oldest receipt first, at most ``limit``. Not already open orphans."""
    open_orphan = exists(
        select(D.c.id).where(
            D.c.source == source,
            D.c.kind == DiscrepancyKind.ORPHANED,
            D.c.record_key == E.c.event_id,
            D.c.field == "",
            D.c.status == DiscrepancyStatus.OPEN,
        )
    )
    outside = (
        true()
        if window_start is None
        else func.coalesce(E.c.occurred_at, E.c.received_at) < window_start
    )
    rows = conn.execute(
        select(E.c.event_id, E.c.received_at)
        .where(
            E.c.source == source,
            E.c.origin == EventOrigin.WEBHOOK,
            E.c.received_at > checked_until,
            E.c.received_at <= now - grace,
            outside,
            scope,
            not_(open_orphan),
        )
        .order_by(E.c.received_at)
        .limit(limit)
    ).all()
    return [(str(r.event_id), r.received_at) for r in rows]


def first_unlisted_in_grace(
    conn: Connection, source: str, now: datetime, grace: timedelta, scope: Any
) -> datetime | None:
    """When the oldest webhook event still inside the grace period arrived that the scan did not
    list (None: every one was listed). Events the scan listed are settled; the unlisted ones are
    judged by a later run, which starts its per-event checks from here."""
    return conn.execute(
        select(func.min(E.c.received_at)).where(
            E.c.source == source,
            E.c.origin == EventOrigin.WEBHOOK,
            E.c.received_at > now - grace,
            scope,
            _not_seen(conn, source, whole_inbox=False),
        )
    ).scalar()


def record_orphans_by_id(
    conn: Connection, source: str, run_id: str, now: datetime, event_ids: Sequence[str]
) -> int:
    """These inbox events are orphans: the source answered that it does not know them."""
    if not event_ids:
        return 0
    return _insert_from(
        conn,
        source,
        run_id,
        now,
        DiscrepancyKind.ORPHANED,
        and_(E.c.origin == EventOrigin.WEBHOOK, E.c.event_id.in_(list(event_ids))),
        "not_known_to_source",
    )


def orphan_watermark(conn: Connection, source: str) -> datetime | None:
    return conn.execute(
        select(ORPHAN_WATERMARKS.c.checked_until).where(ORPHAN_WATERMARKS.c.source == source)
    ).scalar_one_or_none()


def save_orphan_watermark(
    conn: Connection, source: str, checked_until: datetime, run_id: str
) -> None:
    stmt = insert_for(conn, ORPHAN_WATERMARKS).values(
        source=source, checked_until=checked_until, updated_at=utcnow(), run_id=run_id
    )
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["source"],
            set_={
                "checked_until": stmt.excluded.checked_until,
                "updated_at": stmt.excluded.updated_at,
                "run_id": stmt.excluded.run_id,
            },
        )
    )


def record_stuck_and_dead(
    conn: Connection, source: str, run_id: str, now: datetime, stuck_after: timedelta
) -> tuple[int, int]:
    stuck = _insert_from(
        conn,
        source,
        run_id,
        now,
        DiscrepancyKind.STUCK,
        and_(E.c.status.in_(UNPROCESSED), E.c.received_at < now - stuck_after),
        None,
    )
    dead = _insert_from(
        conn,
        source,
        run_id,
        now,
        DiscrepancyKind.DEAD,
        E.c.status == EventStatus.DEAD,
        "dead_letter",
    )
    return stuck, dead


def resolve(
    conn: Connection,
    source: str,
    run_id: str,
    now: datetime,
    condition: Any,
    resolution: str,
    kinds: Sequence[DiscrepancyKind],
) -> int:
    result = conn.execute(
        update(D)
        .where(
            D.c.source == source,
            D.c.status == DiscrepancyStatus.OPEN,
            D.c.kind.in_(kinds),
            condition,
        )
        .values(status=DiscrepancyStatus.RESOLVED, resolution=resolution, resolved_at=now)
    )
    return int(result.rowcount or 0)


def open_kinds(conn: Connection, source: str) -> set[DiscrepancyKind]:
    """The kinds of which the source has open discrepancies (one index range)."""
    rows = conn.execute(
        select(D.c.kind)
        .where(D.c.status == DiscrepancyStatus.OPEN, D.c.source == source)
        .distinct()
    ).scalars()
    return {DiscrepancyKind(kind) for kind in rows}


def resolve_fixed_inbox_problems(
    conn: Connection,
    source: str,
    run_id: str,
    now: datetime,
    open_kinds: set[DiscrepancyKind] | None = None,
) -> int:
    """Missing events that have arrived since; stuck or dead events that are no longer (every run rescans
    all of them, so one not seen again is gone); orphans the source has now listed or that are gone.
    ``open_kinds``: the kinds with open discrepancies (:func:`open_kinds`); passes over the others
    are skipped (default: none skipped)."""

    def has(*kinds: DiscrepancyKind) -> bool:
        return open_kinds is None or any(k in open_kinds for k in kinds)

    n = 0
    if has(DiscrepancyKind.MISSING):
        # Two EXISTS, each answered by an index (an OR inside one EXISTS made it scan the inbox).
        event_arrived = and_(
            D.c.event_id.is_not(None),
            exists().where(E.c.source == source, E.c.event_id == D.c.event_id),
        )
        object_arrived = and_(
            D.c.event_id.is_(None),
            exists().where(
                E.c.source == source,
                E.c.object_type == D.c.object_type,
                E.c.object_id == D.c.object_id,
            ),
        )
        n += resolve(
            conn, source, run_id, now, event_arrived, "received", [DiscrepancyKind.MISSING]
        )
        n += resolve(
            conn, source, run_id, now, object_arrived, "received", [DiscrepancyKind.MISSING]
        )
    if has(DiscrepancyKind.STUCK, DiscrepancyKind.DEAD):
        n += resolve(
            conn,
            source,
            run_id,
            now,
            D.c.last_run_id != run_id,
            "no longer stuck or dead",
            [DiscrepancyKind.STUCK, DiscrepancyKind.DEAD],
        )
    if has(DiscrepancyKind.ORPHANED):
        listed = D.c.event_id.in_(
            _seen_ids(conn, source)
        )  # a semi-join: materialised / hashed once
        gone = not_(exists().where(E.c.source == source, E.c.event_id == D.c.event_id))
        n += resolve(
            conn,
            source,
            run_id,
            now,
            or_(listed, gone),
            "listed by the source or removed",
            [DiscrepancyKind.ORPHANED],
        )
    return n


def detection_delays(conn: Connection, run_id: str) -> tuple[float, float] | None:
    """The median and the maximum detection delay (first seen - occurred at) of the discrepancies a run
    found first, or None when it found none that has one. Computed in SQL: a run that finds a million
    (a first scan against an empty inbox) reads back three values, not a million. The median is the
    middle value in order, or the mean of the middle two, as ``statistics.median`` takes it."""
    delay = D.c.detection_delay_seconds
    # last_run_id is indexed, and a row first seen in this run was last seen in it
    mine = and_(D.c.last_run_id == run_id, D.c.first_run_id == run_id, delay.is_not(None))
    n, longest = conn.execute(select(func.count(), func.max(delay)).where(mine)).one()
    if not n:
        return None
    middle = [
        float(v)
        for v in conn.execute(
            select(delay).where(mine).order_by(delay).offset((n - 1) // 2).limit(2 - n % 2)
        ).scalars()
    ]
    return sum(middle) / len(middle), float(longest)
