"""Discrepancy list and detail for the dashboard (the filter and CSV are ``reconcile.export``'s)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from reconciler.errors import NoSuchRecordError
from reconciler.ops.masking import MASK, Masker, is_payment_data, mask_payment_text
from reconciler.reconcile.export import DiscrepancyFilter
from reconciler.storage.models import DISCREPANCIES

SORTABLE = {
    "last_seen_at": DISCREPANCIES.c.last_seen_at,
    "first_seen_at": DISCREPANCIES.c.first_seen_at,
    "source": DISCREPANCIES.c.source,
    "kind": DISCREPANCIES.c.kind,
    "amount": DISCREPANCIES.c.amount,
    "recover_by": DISCREPANCIES.c.recover_by,
    "id": DISCREPANCIES.c.id,
}
LIST_COLUMNS = (
    DISCREPANCIES.c.id,
    DISCREPANCIES.c.source,
    DISCREPANCIES.c.kind,
    DISCREPANCIES.c.status,
    DISCREPANCIES.c.event_id,
    DISCREPANCIES.c.event_type,
    DISCREPANCIES.c.object_type,
    DISCREPANCIES.c.object_id,
    DISCREPANCIES.c.field,
    DISCREPANCIES.c.source_value,
    DISCREPANCIES.c.local_value,
    DISCREPANCIES.c.amount,
    DISCREPANCIES.c.currency,
    DISCREPANCIES.c.cause,
    DISCREPANCIES.c.recover_by,
    DISCREPANCIES.c.first_seen_at,
    DISCREPANCIES.c.last_seen_at,
)


def list_discrepancies(
    conn: Connection,
    flt: DiscrepancyFilter,
    *,
    sort: str = "last_seen_at",
    descending: bool = True,
    limit: int = 500,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """One page of matching discrepancies, sorted in SQL (the table shows at most ``limit``)."""
    try:
        col = SORTABLE[sort]
    except KeyError:
        raise ValueError(f"cannot sort by '{sort}': one of {', '.join(SORTABLE)}") from None
    order = col.desc() if descending else col.asc()
    tie = DISCREPANCIES.c.id.desc() if descending else DISCREPANCIES.c.id.asc()
    stmt = (
        select(*LIST_COLUMNS)
        .where(*flt.where())
        .order_by(order, tie)
        .limit(max(1, min(limit, 5000)))
        .offset(max(0, offset))
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def discrepancy(conn: Connection, discrepancy_id: int) -> dict[str, Any]:
    row = conn.execute(select(DISCREPANCIES).where(DISCREPANCIES.c.id == discrepancy_id)).first()
    if row is None:
        raise NoSuchRecordError(f"no discrepancy {discrepancy_id}")
    return dict(row._mapping)


@dataclass(frozen=True)
class ValueDiff:
    path: str
    source: Any
    local: Any


def _parse(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def value_diff(source_value: str | None, local_value: str | None) -> list[ValueDiff]:
    """Where two stored values differ, path by path (JSON objects are compared key by key)."""
    out: list[ValueDiff] = []

    def walk(path: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                walk(f"{path}.{key}" if path else str(key), a.get(key), b.get(key))
        elif a != b:
            out.append(ValueDiff(path or "(value)", a, b))

    walk("", _parse(source_value), _parse(local_value))
    return out


def related_fields(conn: Connection, source: str, record_key: str) -> list[dict[str, Any]]:
    """Every diverged field of one object (the object's diff: source value beside local value)."""
    stmt = (
        select(
            DISCREPANCIES.c.id,
            DISCREPANCIES.c.field,
            DISCREPANCIES.c.source_value,
            DISCREPANCIES.c.local_value,
            DISCREPANCIES.c.status,
        )
        .where(DISCREPANCIES.c.source == source, DISCREPANCIES.c.record_key == record_key)
        .order_by(DISCREPANCIES.c.field)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def same_object(
    conn: Connection, source: str, object_id: str | None, exclude_id: int, limit: int = 50
) -> list[dict[str, Any]]:
    """Other discrepancies of the same object in the same source, any kind (the ``missing`` event
    that explains a ``diverged`` object, say), newest first."""
    if not object_id:
        return []
    stmt = (
        select(
            DISCREPANCIES.c.id,
            DISCREPANCIES.c.kind,
            DISCREPANCIES.c.status,
            DISCREPANCIES.c.event_id,
            DISCREPANCIES.c.event_type,
            DISCREPANCIES.c.field,
            DISCREPANCIES.c.last_seen_at,
        )
        .where(
            DISCREPANCIES.c.source == source,
            DISCREPANCIES.c.object_id == object_id,
            DISCREPANCIES.c.id != exclude_id,
        )
        .order_by(DISCREPANCIES.c.last_seen_at.desc(), DISCREPANCIES.c.id.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def about_event(
    conn: Connection, source: str, event_id: str, object_id: str | None, limit: int = 50
) -> list[dict[str, Any]]:
    """The discrepancies that name this event or its object, any kind and status, newest first
    (what an event's page links to)."""
    d = DISCREPANCIES
    names = d.c.event_id == event_id
    if object_id:
        names = names | (d.c.object_id == object_id)
    stmt = (
        select(d.c.id, d.c.kind, d.c.status, d.c.event_id, d.c.field, d.c.last_seen_at)
        .where(d.c.source == source, names)
        .order_by(d.c.last_seen_at.desc(), d.c.id.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def _last_key(field: str) -> str:
    return field.rsplit(".", 1)[-1].split("[", 1)[0]


def masked_values(rows: list[dict[str, Any]], masker: Masker) -> list[dict[str, Any]]:
    """The rows with ``source_value`` / ``local_value`` masked where the field (its last key) is a
    secret or configured PII, or the value is a card number or IBAN; JSON values masked inside."""
    out = []
    for row in rows:
        hidden = masker.hides(_last_key(str(row.get("field") or "")))
        copy = dict(row)
        for column in ("source_value", "local_value"):
            value = row.get(column)
            if value is None:
                continue
            if hidden or is_payment_data(str(value)):
                copy[column] = MASK
                continue
            parsed = _parse(str(value))
            if isinstance(parsed, dict | list):
                copy[column] = json.dumps(masker.mask(parsed), sort_keys=True, ensure_ascii=False)
            else:
                copy[column] = mask_payment_text(str(value))
        out.append(copy)
    return out


def body_diff(stored: bytes, later: bytes, masker: Masker, content_type: str | None = None) -> str:
    """A unified diff of the two bodies, pretty-printed with sorted keys and masked."""
    a = masker.mask_body(stored, content_type).splitlines()
    b = masker.mask_body(later, content_type).splitlines()
    lines = difflib.unified_diff(
        a, b, "stored (applied)", "later delivery (not applied)", lineterm=""
    )
    return "\n".join(lines) or "(the bodies differ only in what is not shown)"
