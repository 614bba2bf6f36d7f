"""What every database's scan store holds and writes alike: the scan's connection and identity,
its start and end, the closing passes' transactions, and the page statements no database writes
faster its own way. Each database's store holds one :class:`Scan` (composition, not a base class).

A dry run keeps everything in one transaction, rolled back by :meth:`Scan.close`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RootTransaction, Table, TextClause, delete, select

from connectors.base import Record
from reconciler.cursors import load_cursor
from reconciler.reconcile.judge import Finding, object_keys
from reconciler.reconcile.store.rows import chunks, compiled_text, finding_rows, page_span
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS, RECON_SEEN
from reconciler.storage.upserts import on_natural_key

LOOKUP_CHUNK = 5000  # ids per lookup statement (and per recon_seen row)
_UPSERTS: dict[type, TextClause] = {}  # the findings upsert of each database, compiled once


class Scan:
    """One scan of one source on one connection. ``insert``: the database's INSERT that takes
    ``on_conflict_do_update``."""

    lookup_chunk = LOOKUP_CHUNK

    def __init__(
        self,
        conn: Connection,
        source: str,
        run_id: str,
        now: datetime,
        *,
        dry_run: bool,
        insert: Callable[[Table], Any],
    ) -> None:
        self.conn, self.source, self.run_id, self.now = conn, source, run_id, now
        self.dry_run, self.insert = dry_run, insert
        self._outer: RootTransaction | None = None

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        """Start the scan: the cursor to resume from (None: from scratch, whose seen ids are then
        its own). A dry run opens the transaction that :meth:`close` rolls back."""
        if self.dry_run:
            self._outer = self.conn.begin()
        cursor = None if full else load_cursor(self.conn, self.source)
        if cursor is None:  # ids an abandoned scan saw are not this scan's
            self.conn.execute(delete(RECON_SEEN).where(RECON_SEEN.c.source == self.source))
        self.commit()
        return cursor

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

    def commit(self) -> None:
        if not self.dry_run and self.conn.in_transaction():
            self.conn.commit()

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
