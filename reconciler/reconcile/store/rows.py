"""A scan's rows as its statements send them: the page's ids and span, findings as discrepancy rows
(pure, but for :func:`compiled_text`, which compiles a statement once)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.engine import Dialect

from connectors.base import Record
from reconciler.reconcile.judge import Finding
from reconciler.storage.models import DiscrepancyStatus


def compiled_text(stmt: Any, dialect: Dialect, columns: Iterable[str]) -> TextClause:
    """A statement compiled once, kept as text with its typed bind parameters (the same value
    conversions as the statement's own). SQLAlchemy caches the compilation of a text construct,
    which it does not for the dialects' INSERT ... ON CONFLICT: a scan writes findings every page."""
    keys = list(columns)
    named: Any = type(dialect)  # the same dialect with named parameters, for text()
    compiled = stmt.compile(dialect=named(paramstyle="named"), column_keys=keys)
    binds = [
        bindparam(name, type_=bp.type) if name in keys else bindparam(name, bp.value, type_=bp.type)
        for bp, name in compiled.bind_names.items()
    ]
    return text(compiled.string).bindparams(*binds)


def page_span(records: Sequence[Record]) -> tuple[list[str], datetime | None, datetime | None]:
    """A page's event ids, once each (object-only records have none), its oldest and newest time."""
    ids = list(dict.fromkeys([r.event_id for r in records if r.event_id]))
    times = [r.occurred_at for r in records if r.occurred_at is not None]
    return ids, min(times, default=None), max(times, default=None)


def epochs(oldest: datetime | None, newest: datetime | None) -> tuple[float | None, float | None]:
    return (
        oldest.timestamp() if oldest is not None else None,
        newest.timestamp() if newest is not None else None,
    )


def chunks(event_ids: Sequence[str], size: int) -> list[str]:
    """The ids as JSON arrays of at most ``size``: one parameter a statement."""
    return [
        json.dumps(list(event_ids[start : start + size]))
        for start in range(0, len(event_ids), size)
    ]


def finding_rows(
    source: str, run_id: str, now: datetime, findings: Sequence[Finding]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The findings as discrepancy rows, one per natural key (one statement's upsert cannot touch a
    row twice; the last finding wins, as row-by-row upserts would leave it)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for f in findings:
        record_key = f.record_key[:400]
        rows[(f.kind.value, record_key, f.field)] = {
            "source": source,
            "kind": f.kind,
            "record_key": record_key,
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
    return rows


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, sort_keys=True)
