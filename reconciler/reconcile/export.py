"""Discrepancy reports: the shared filter, and a CSV export that streams page by page.

Columns (a public contract): see :data:`COLUMNS`. UTF-8, RFC 4180 quoting, ISO-8601 UTC times, cells
that a spreadsheet would run as a formula prefixed with ``'``.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, TextIO

from sqlalchemy import Connection, func, select

from reconciler.kinds import kinds
from reconciler.payment_text import mask_payment_text
from reconciler.reconcile.compare import csv_cell
from reconciler.storage.models import DISCREPANCIES, DiscrepancyKind, DiscrepancyStatus

COLUMNS = (
    "discrepancy_id",
    "source",
    "kind",
    "status",
    "event_id",
    "event_type",
    "object_type",
    "object_id",
    "field",
    "source_value",
    "local_value",
    "amount",
    "currency",
    "first_seen_at",
    "last_seen_at",
    "run_id",
    "detail",
    "cause",
    "recover_by",
)


@dataclass(frozen=True)
class DiscrepancyFilter:
    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    status: str = "open"  # open | resolved | ignored | all
    since: datetime | None = None  # last seen at or after
    run_id: str | None = None

    def where(self) -> list[Any]:
        clauses: list[Any] = []
        if self.sources:
            clauses.append(DISCREPANCIES.c.source.in_(self.sources))
        if self.kinds:
            for k in self.kinds:
                DiscrepancyKind(k)  # ValueError names a bad kind
            clauses.append(DISCREPANCIES.c.kind.in_(self.kinds))
        if self.status != "all":
            clauses.append(DISCREPANCIES.c.status == DiscrepancyStatus(self.status))
        if self.since is not None:
            clauses.append(DISCREPANCIES.c.last_seen_at >= self.since)
        if self.run_id:
            clauses.append(
                (DISCREPANCIES.c.last_run_id == self.run_id)
                | (DISCREPANCIES.c.first_run_id == self.run_id)
            )
        return clauses


def csv_file_name(flt: DiscrepancyFilter, day: date) -> str:
    """A download's name that says what it holds: ``discrepancies-stripe-missing-open-20261203.csv``
    (the filter's sources, kinds, status and run, then the day; characters a file system or a
    shell would trip on become ``_``)."""
    parts = ["discrepancies", *flt.sources, *flt.kinds, flt.status]
    if flt.run_id:
        parts.append(f"run-{flt.run_id}")
    parts.append(day.strftime("%Y%m%d"))
    name = "-".join(p for p in parts if p)
    return re.sub(r"[^A-Za-z0-9._+-]", "_", name)[:180] + ".csv"


def count(conn: Connection, flt: DiscrepancyFilter) -> int:
    return int(
        conn.execute(
            select(func.count()).select_from(DISCREPANCIES).where(*flt.where())
        ).scalar_one()
    )


def iter_rows(
    conn: Connection, flt: DiscrepancyFilter, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Matching discrepancies in id order, one keyset page at a time (memory stays flat)."""
    last = 0
    while True:
        page = conn.execute(
            select(DISCREPANCIES)
            .where(DISCREPANCIES.c.id > last, *flt.where())
            .order_by(DISCREPANCIES.c.id)
            .limit(batch)
        ).all()
        if not page:
            return
        for row in page:
            yield dict(row._mapping)
        last = page[-1].id


def _masked(value: str | None) -> str | None:
    """Card numbers and IBANs in a value masked (a diverged free-text field may hold them)."""
    return None if value is None else mask_payment_text(value)


def csv_record(row: dict[str, Any]) -> list[str]:
    values = {
        "discrepancy_id": row["id"],
        "source": row["source"],
        "kind": str(row["kind"]),
        "status": str(row["status"]),
        "event_id": row["event_id"],
        "event_type": row["event_type"],
        "object_type": row["object_type"],
        "object_id": row["object_id"],
        "field": row["field"] or None,
        "source_value": _masked(row["source_value"]),
        "local_value": _masked(row["local_value"]),
        "amount": row["amount"],
        "currency": row["currency"],
        "first_seen_at": row["first_seen_at"],
        "last_seen_at": row["last_seen_at"],
        "run_id": row["last_run_id"],
        "detail": _masked(json.dumps(row["detail"], sort_keys=True)) if row["detail"] else None,
        "cause": row["cause"],
        "recover_by": row["recover_by"],
    }
    return [csv_cell(values[c]) for c in COLUMNS]


def write_csv(conn: Connection, flt: DiscrepancyFilter, out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(COLUMNS)
    n = 0
    for row in iter_rows(conn, flt):
        writer.writerow(csv_record(row))
        n += 1
    return n


IMPACT_KINDS = kinds(money=True)


def money_impact(
    conn: Connection,
    sources: tuple[str, ...] = (),
    new_in_run: str | None = None,
    flt: DiscrepancyFilter | None = None,
) -> list[dict[str, Any]]:
    """Open missing / diverged / unapplied amounts (minor units) per source, currency and kind
    (``new_in_run``: only those that run found first; ``flt``: only those the filter matches, so
    a page's totals are its list's).

    A diverged object counts once however many of its fields differ."""
    per_record = (
        select(
            DISCREPANCIES.c.source,
            DISCREPANCIES.c.currency,
            DISCREPANCIES.c.kind,
            DISCREPANCIES.c.record_key,
            func.max(DISCREPANCIES.c.amount).label("amount"),
        )
        .where(
            DISCREPANCIES.c.status == DiscrepancyStatus.OPEN,
            DISCREPANCIES.c.kind.in_(IMPACT_KINDS),
            DISCREPANCIES.c.amount.is_not(None),
        )
        .group_by(
            DISCREPANCIES.c.source,
            DISCREPANCIES.c.currency,
            DISCREPANCIES.c.kind,
            DISCREPANCIES.c.record_key,
        )
    )
    if sources:
        per_record = per_record.where(DISCREPANCIES.c.source.in_(sources))
    if flt is not None:
        per_record = per_record.where(*flt.where())
    if new_in_run is not None:  # (the last_run_id index finds them: the run saw them last)
        per_record = per_record.where(
            DISCREPANCIES.c.last_run_id == new_in_run, DISCREPANCIES.c.first_run_id == new_in_run
        )
    sub = per_record.subquery()
    rows = conn.execute(
        select(sub.c.source, sub.c.currency, sub.c.kind, func.count(), func.sum(sub.c.amount))
        .group_by(sub.c.source, sub.c.currency, sub.c.kind)
        .order_by(sub.c.source, sub.c.currency, sub.c.kind)
    )
    return [
        {"source": s, "currency": c, "kind": str(k), "records": int(n), "amount": int(total or 0)}
        for s, c, k, n, total in rows
    ]
