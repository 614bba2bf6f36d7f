"""The judge: what a page of source records and the facts the store looked up say is wrong, and
whether an open discrepancy is fixed now.

Pure: records and facts in, findings and verdicts out. No database, HTTP or UI (a unit test imports
this module alone and checks that). Each kind the page decides has one home here, its detection and
its fix rule side by side:

- ``missing``: a settled source record the inbox lacks (by event id, or by object for state records);
  fixed once the inbox holds it.
- ``duplicate``: an object held by more than one business row; fixed when one is left.
- ``unapplied``: a received object with no business row (``require_row``); fixed when the row exists.
- ``diverged``: a mapped field whose business value differs from the source's current state; fixed
  when they agree.

Orphaned, stuck and dead are set questions over the whole inbox: their detection and fix rules live
together in the store's closing passes (``store.passes``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from connectors.base import Capabilities, Record
from connectors.parsing import json_path_get
from reconciler.config import CheckSettings
from reconciler.kinds import FoundBy, kinds
from reconciler.reconcile.compare import amount_of, diff_fields, equal, missing_cause, recover_by
from reconciler.states import DiscrepancyKind

# The kinds a re-check of the page's facts can resolve (the others: the store's closing passes).
JUDGED_KINDS = kinds(found_by=FoundBy.PAGE)
BUSINESS_KINDS = kinds(business=True)

ObjectKey = tuple[str, str]  # (object type, object id)
Row = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    """One discrepancy as a run sees it; stored by natural key (kind, record key, field)."""

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


@dataclass(frozen=True)
class InboxFacts:
    """What the inbox holds of a page: the event ids it lacks, the objects it has events for."""

    absent_events: frozenset[str] = frozenset()
    present_objects: frozenset[ObjectKey] = frozenset()


@dataclass(frozen=True)
class BusinessFacts:
    """A check's business rows for some object ids: the rows by key, and the ``unique_by`` values
    held by more than one row with their counts."""

    rows: Mapping[str, Sequence[Row]] = dataclasses.field(default_factory=dict)
    duplicates: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def count(self, object_id: str) -> int:
        return max(self.duplicates.get(object_id, 0), len(self.rows.get(object_id, ())))


@dataclass(frozen=True)
class Source:
    """What the judge needs to know of a source: its provider's capabilities and retention."""

    capabilities: Capabilities
    retention: timedelta | None = None


def key(record: Record) -> str:
    """A record's natural key: its event id, or its object for state records."""
    return record.event_id or f"{record.object_type}:{record.object_id}"


def settled(records: Iterable[Record], cutoff: datetime) -> list[Record]:
    """The records old enough to judge: a webhook may still be on its way for younger ones."""
    return [r for r in records if r.occurred_at is None or r.occurred_at <= cutoff]


def object_keys(records: Iterable[Record]) -> list[ObjectKey]:
    """The objects of state records (no event id), whose presence the inbox is asked by object."""
    return sorted(
        {(r.object_type or "", r.object_id) for r in records if not r.event_id and r.object_id}
    )


# -- missing ---------------------------------------------------------------------------------------


def absent(records: Sequence[Record], facts: InboxFacts) -> list[Record]:
    """The settled records the inbox lacks."""
    return [
        r
        for r in records
        if (
            r.event_id in facts.absent_events
            if r.event_id
            else (r.object_type or "", str(r.object_id)) not in facts.present_objects
        )
    ]


def missing(
    records: Sequence[Record],
    facts: InboxFacts,
    source: Source,
    checks: Sequence[CheckSettings] = (),
) -> list[Finding]:
    """One ``missing`` finding per natural key the inbox lacks, with its cause (from the provider's
    delivery log, where it keeps one), the last time it can be recovered and its money impact (from
    the first check that applies to it)."""
    lacking = absent(records, facts)
    has_log = source.capabilities.delivery_log
    attempts: dict[str, list[Any]] = {}
    if has_log and lacking:
        for r in records:
            if r.event_id:
                attempts.setdefault(r.event_id, []).extend(r.attempts)
    out: list[Finding] = []
    reported: set[str] = set()
    for r in lacking:
        k = key(r)
        if k in reported:
            continue
        reported.add(k)
        check = next((c for c in checks if c.applies_to(r.object_type, r.event_type)), None)
        obj = source.capabilities.object_of(r)
        tried = attempts.get(r.event_id or "", [])
        out.append(
            Finding(
                kind=DiscrepancyKind.MISSING,
                record_key=k,
                event_id=r.event_id,
                event_type=r.event_type,
                object_type=r.object_type,
                object_id=r.object_id,
                amount=amount_of(obj, check.amount) if check else None,
                currency=_text_at(obj, check.currency) if check else None,
                cause=missing_cause(tried, has_log),
                recover_by=recover_by(r.occurred_at, source.retention),
                occurred_at=r.occurred_at,
                detail={"attempts": len(tried)} if has_log else {},
            )
        )
    return out


def missing_fixed(
    event_id: str | None,
    object_key: ObjectKey,
    present_events: set[str],
    present_objects: set[ObjectKey],
) -> bool:
    """A ``missing`` record is fixed once the inbox holds its event (or, for a state record, an
    event of its object)."""
    if event_id is not None:
        return event_id in present_events
    return object_key in present_objects


# -- the business tables ---------------------------------------------------------------------------


def received(records: Sequence[Record], facts: InboxFacts) -> set[str]:
    """The natural keys of the settled records the inbox holds (a key's records are all present or
    all absent: presence is by event id, or by object)."""
    lacking = {key(r) for r in absent(records, facts)}
    return {k for k in map(key, records) if k not in lacking}


def latest_records(check: CheckSettings, records: Sequence[Record]) -> dict[str, Record]:
    """The objects of this check on a page, each with the newest record the page lists for it."""
    latest: dict[str, Record] = {}
    for r in records:
        oid = r.object_id
        if oid and check.applies_to(r.object_type, r.event_type):
            known = latest.get(oid)
            if known is None or _newer(r.occurred_at, known.occurred_at):
                latest[oid] = r
    return latest


def received_objects(
    check: CheckSettings, records: Sequence[Record], received_keys: set[str]
) -> set[str]:
    """The objects of this check with at least one received record on the page."""
    return {
        r.object_id
        for r in records
        if r.object_id and key(r) in received_keys and check.applies_to(r.object_type, r.event_type)
    }


def latest_received(
    check: CheckSettings, records: Sequence[Record], received_keys: set[str]
) -> dict[str, Record]:
    """The objects of this check with at least one received record, each with the newest record
    the source lists for it (received or not): the state to judge its business row by."""
    wanted = received_objects(check, records, received_keys)
    latest = latest_records(check, records)
    return {oid: r for oid, r in latest.items() if oid in wanted}


def judged(
    latest: Mapping[str, Record], received: Container[str], facts: BusinessFacts
) -> dict[str, Record]:
    """What a page judges: the objects it holds a received record of (``received``: their
    business row must exist), and every object with a business row, by the page's newest record of
    it. So whichever page holds an object's newest record (a scan's pages fall differently with its
    slices) compares the row with it, received or not (pure)."""
    return {oid: r for oid, r in latest.items() if oid in received or facts.rows.get(oid)}


def to_confirm(
    check: CheckSettings, latest: Mapping[str, Record], facts: BusinessFacts, source: Source
) -> list[ObjectKey]:
    """The objects whose business row differs from the record's snapshot: their current state is
    asked of the provider before they are called diverged (never judged on an older snapshot)."""
    if not check.fields:
        return []
    out = []
    snapshots = source.capabilities.snapshots
    for object_id, r in latest.items():
        rows = facts.rows.get(object_id)
        if (
            rows
            and r.object_type
            and (
                not snapshots  # no snapshot to tell: every row is judged by the current state
                or diff_fields(source.capabilities.object_of(r), rows[0], check.fields)
            )
        ):
            out.append((r.object_type, object_id))
    return out


def business(
    check: CheckSettings,
    latest: Mapping[str, Record],
    facts: BusinessFacts,
    source: Source,
    current: Mapping[ObjectKey, Mapping[str, Any] | None] | None = None,
) -> list[Finding]:
    """Duplicate, unapplied and diverged findings of one check. ``current``: the objects' current
    state where it was asked (:func:`to_confirm`); None where the provider could not say."""
    current = current or {}
    out: list[Finding] = []
    for object_id in sorted(latest):
        r = latest[object_id]
        obj = source.capabilities.object_of(r)
        rows = facts.rows.get(object_id, ())
        count = facts.count(object_id)
        if count > 1:
            out.append(
                _business_finding(
                    DiscrepancyKind.DUPLICATE,
                    check,
                    r,
                    obj,
                    local_value=count,
                    detail={"rows": count},
                )
            )
        if not rows:
            if check.require_row:
                out.append(_business_finding(DiscrepancyKind.UNAPPLIED, check, r, obj))
            continue
        if not check.fields:
            continue
        snapshot = source.capabilities.snapshots
        diffs = diff_fields(obj, rows[0], check.fields) if snapshot else []
        wanted = (diffs or not snapshot) and r.object_type
        now = current.get((r.object_type or "", object_id)) if wanted else None
        if now is not None:
            obj = now
            diffs = diff_fields(now, rows[0], check.fields)
        for d in diffs:
            out.append(
                _business_finding(
                    DiscrepancyKind.DIVERGED,
                    check,
                    r,
                    obj,
                    column=d.column,
                    source_value=d.source_value,
                    local_value=d.local_value,
                    detail={"path": check.fields[d.column]},
                )
            )
    return out


def business_fixed(
    kind: DiscrepancyKind,
    field: str,
    source_value: str | None,
    object_id: str,
    facts: BusinessFacts,
) -> bool:
    """Whether an open business discrepancy of this object is fixed in the table now: unapplied
    once a row exists, duplicate once at most one is left, diverged once the column holds the
    source's value (``source_value``: as stored, JSON text)."""
    rows = facts.rows.get(object_id, ())
    if kind == DiscrepancyKind.UNAPPLIED:
        return bool(rows)
    if kind == DiscrepancyKind.DUPLICATE:
        return facts.count(object_id) <= 1
    if kind == DiscrepancyKind.DIVERGED:
        return bool(rows) and equal(_loads(source_value), rows[0].get(field))
    return False


def _business_finding(
    kind: DiscrepancyKind,
    check: CheckSettings,
    record: Record,
    obj: Mapping[str, Any],
    *,
    column: str = "",
    source_value: Any = None,
    local_value: Any = None,
    detail: dict[str, Any] | None = None,
) -> Finding:
    return Finding(
        kind=kind,
        record_key=f"{check.table}:{record.object_id}",
        field=column,
        event_id=record.event_id,
        event_type=record.event_type,
        object_type=record.object_type,
        object_id=record.object_id,
        source_value=source_value,
        local_value=local_value,
        amount=amount_of(obj, check.amount),
        currency=_text_at(obj, check.currency),
        occurred_at=record.occurred_at,
        detail={"table": check.table, **(detail or {})},
    )


def _newer(at: datetime | None, than: datetime | None) -> bool:
    """``at`` is later than ``than`` (no time is earlier than any)."""
    return at is not None and (than is None or at > than)


def _text_at(obj: Mapping[str, Any], path: str | None) -> str | None:
    if not path:
        return None
    value = json_path_get(obj, path)
    return str(value) if value is not None else None


def _loads(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value
