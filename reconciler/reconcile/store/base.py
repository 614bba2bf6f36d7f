"""What a scan asks of its database, and the parts every database answers alike.

A scan's store lives on one connection. Per source page it answers :meth:`ScanStore.lookup` (the
page's event ids the inbox lacks, the objects it holds) and stores :meth:`ScanStore.write` (the
page's seen ids, its findings and the cursor after it) atomically, so a run that dies resumes after
the last page stored. The passes after the last page are in :mod:`.passes`. Each database's
subclass chooses how a page travels: a transaction a page (SQLite), one statement a page
(PostgreSQL).

A dry run keeps everything in one transaction, rolled back by :meth:`ScanStore.close`.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    RootTransaction,
    TextClause,
    bindparam,
    delete,
    select,
    text,
)
from sqlalchemy.engine import Dialect

from connectors.base import Record
from reconciler.cursors import load_cursor
from reconciler.reconcile.judge import Finding, InboxFacts, object_keys
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS, RECON_SEEN, DiscrepancyStatus
from reconciler.storage.upserts import on_natural_key


class ScanStore(ABC):
    """One scan of one source on one connection (see the module)."""

    lookup_chunk = 5000  # ids per lookup statement (and per recon_seen row)

    def __init__(
        self, conn: Connection, source: str, run_id: str, now: datetime, *, dry_run: bool
    ) -> None:
        self.conn, self.source, self.run_id, self.now = conn, source, run_id, now
        self.dry_run = dry_run
        self._outer: RootTransaction | None = None

    # -- the scan's life ---------------------------------------------------------------------------

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        """Start the scan: the cursor to resume from (None: from scratch, whose seen ids are then
        its own). A dry run opens the transaction that :meth:`close` rolls back."""
        if self.dry_run:
            self._outer = self.conn.begin()
        cursor = None if full else load_cursor(self.conn, self.source)
        if cursor is None:  # ids an abandoned scan saw are not this scan's
            self.conn.execute(delete(RECON_SEEN).where(RECON_SEEN.c.source == self.source))
        self._commit()
        return cursor

    @abstractmethod
    def lookup(self, records: Sequence[Record]) -> InboxFacts:
        """What the inbox holds of a page's records."""

    @abstractmethod
    def write(
        self, records: Sequence[Record], findings: Sequence[Finding], cursor: Mapping[str, Any]
    ) -> None:
        """The page's seen ids, its findings and the cursor after it, stored together."""

    def relisted(self, records: Sequence[Record]) -> None:
        """Records the provider listed again that an earlier scan judged (``Page.relisted``): seen
        by this scan, so inside its orphan window, but neither looked up nor judged."""
        ids, _, newest = page_span(records)
        epoch = newest.timestamp() if newest is not None else None
        for chunk in chunks(ids, self.lookup_chunk):
            self.conn.execute(
                RECON_SEEN.insert().values(
                    source=self.source, event_ids=chunk, occurred_epoch=None, newest_epoch=epoch
                )
            )

    def idle(self) -> None:
        """The run is about to wait on the provider: hold no lock meanwhile."""
        return None

    def end_pages(self) -> None:
        """After the last page (or a source failure): store what is still held back. The closing
        passes run in transactions of their own (:meth:`transaction`)."""
        return None

    def close(self) -> None:
        """Give the connection back as it was (a dry run: everything rolled back)."""
        if self._outer is not None:
            self._outer.rollback()
            self._outer = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction for a closing pass (a dry run's single one: nothing to begin)."""
        if self.dry_run:
            yield self.conn
            return
        if self.conn.in_transaction():
            self.conn.commit()
        with self.conn.begin():
            yield self.conn

    def _commit(self) -> None:
        if not self.dry_run and self.conn.in_transaction():
            self.conn.commit()

    # -- the dialect's part ------------------------------------------------------------------------

    @abstractmethod
    def insert(self, table: Any) -> Any:
        """An INSERT of this database that takes ``on_conflict_do_update``."""

    @abstractmethod
    def seen_ids(self, *, equal_to: Any = None) -> Any:
        """The ids the scan saw, unpacked from their pages' JSON arrays (``equal_to``: only the one
        equal to it, for a correlated EXISTS)."""

    @abstractmethod
    def not_seen(self, *, whole_inbox: bool) -> Any:
        """The inbox event is not among the ids the scan saw (``whole_inbox``: the window holds
        the source's whole inbox, which some databases plan differently)."""

    def before_anti_join(self) -> None:
        """Just before the first statement that joins the seen ids."""
        return None

    # -- shared by every database ------------------------------------------------------------------

    def present_objects(self, records: Sequence[Record]) -> frozenset[tuple[str, str]]:
        """Which of the page's state records' objects the inbox has events for (one query)."""
        keys = object_keys(records)
        if not keys:
            return frozenset()
        events = INBOX_EVENTS
        rows = self.conn.execute(
            select(events.c.object_type, events.c.object_id)
            .where(events.c.source == self.source, events.c.object_id.in_([o for _, o in keys]))
            .distinct()
        )
        return frozenset((t or "", o) for t, o in rows)

    def upsert_findings(self, findings: Sequence[Finding]) -> None:
        """One row per (source, kind, record_key, field). Seen again: last_seen moves, values
        refresh, a resolved row reopens; an ignored row stays ignored."""
        if findings:
            rows = list(finding_rows(self.source, self.run_id, self.now, findings).values())
            key = type(self.conn.dialect)
            if key not in _UPSERTS:
                upsert = on_natural_key(self.insert(DISCREPANCIES))
                _UPSERTS[key] = compiled_text(upsert, self.conn.dialect, rows[0])
            self.conn.execute(_UPSERTS[key], rows)


_UPSERTS: dict[type, TextClause] = {}  # the findings upsert of each database, compiled once


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
