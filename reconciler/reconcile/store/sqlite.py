"""The scan store on SQLite: a transaction a page.

A page's statements cost no round trip and each commit is one write to the WAL. The page's ids
travel as ONE parameter, a JSON array unpacked by ``json_each``; the lookup asks for the ids the
inbox lacks rather than those it holds (one row back instead of a page's worth). SQLite needs its
JSON functions (built in from 3.38, and in most earlier builds as JSON1): :func:`require_json` says
so before a scan starts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Table, func, select, true, update
from sqlalchemy.dialects import sqlite

from connectors.base import Record
from reconciler.cursors import save_cursor
from reconciler.errors import ConfigError
from reconciler.reconcile.judge import Finding, InboxFacts
from reconciler.reconcile.store.passes import Passes, Window
from reconciler.reconcile.store.rows import chunks, epochs, page_span
from reconciler.reconcile.store.scan import Scan
from reconciler.storage.dialect import sqlite_has_json
from reconciler.storage.models import INBOX_EVENTS, RECON_RUNS, RECON_SEEN

_ABSENT = (
    f"SELECT j.value FROM json_each(?) AS j WHERE NOT EXISTS (SELECT 1 FROM {INBOX_EVENTS.name} "
    "AS e WHERE e.source = ? AND e.event_id = j.value)"
)
_SEEN = (
    f"INSERT INTO {RECON_SEEN.name} (source, event_ids, occurred_epoch, newest_epoch) "
    "VALUES (?, ?, ?, ?)"
)


SQLITE_JSON = sqlite_has_json()


def require_json() -> None:
    """A clear error, before anything is written, where SQLite cannot unpack the id arrays."""
    if not SQLITE_JSON:
        raise ConfigError(
            f"[database] url: this Python's SQLite ({sqlite3.sqlite_version}) has no JSON functions "
            "(json_each), which reconciliation needs; use SQLite 3.38 or newer (or a build with "
            "JSON1), or PostgreSQL"
        )


class SqliteStore:
    """A transaction a page: its lookup opens it (IMMEDIATE, as every write transaction here), its
    write commits it."""

    def __init__(
        self, conn: Connection, source: str, run_id: str, now: datetime, *, dry_run: bool
    ) -> None:
        self.conn, self.source, self.run_id = conn, source, run_id
        self.scan = Scan(conn, source, run_id, now, dry_run=dry_run, insert=self.insert)
        self.passes = Passes(self.scan, self)

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        return self.scan.begin(full=full)

    def lookup(self, records: Sequence[Record]) -> InboxFacts:
        ids, _, _ = page_span(records)
        absent: set[str] = set()
        for chunk in chunks(ids, self.scan.lookup_chunk):
            result = self.conn.exec_driver_sql(_ABSENT, (chunk, self.source))
            absent.update(row[0] for row in result)
        return InboxFacts(frozenset(absent), self.scan.present_objects(records))

    def write(
        self, records: Sequence[Record], findings: Sequence[Finding], cursor: Mapping[str, Any]
    ) -> None:
        ids, oldest, newest = page_span(records)
        oldest_epoch, newest_epoch = epochs(oldest, newest)
        for chunk in chunks(ids, self.scan.lookup_chunk):
            self.conn.exec_driver_sql(_SEEN, (self.source, chunk, oldest_epoch, newest_epoch))
        self.scan.upsert_findings(findings)
        save_cursor(self.conn, self.source, cursor, self.run_id)
        # the run's count of records it has stored (what a run killed mid-scan is recorded with)
        self.conn.execute(
            update(RECON_RUNS)
            .where(RECON_RUNS.c.run_id == self.run_id)
            .values(records_scanned=RECON_RUNS.c.records_scanned + len(records))
        )
        self.scan.commit()

    def relisted(self, records: Sequence[Record]) -> None:
        self.scan.relisted(records)

    def end_pages(self) -> None:
        return None  # (every page's write committed it)

    def close(self) -> None:
        self.scan.close()

    # -- the database's part of the closing passes (interface.DialectSql) ------------------------

    def insert(self, table: Table) -> Any:
        return sqlite.insert(table)

    def seen_ids(self, *, equal_to: Any = None) -> Any:
        ids = func.json_each(RECON_SEEN.c.event_ids).table_valued("value")
        query = (
            select(ids.c.value)
            .select_from(RECON_SEEN)
            .join(ids, true())
            .where(RECON_SEEN.c.source == self.source)
        )
        return query if equal_to is None else query.where(ids.c.value == equal_to)

    def not_seen(self, *, whole_inbox: bool) -> Any:
        # SQLite materialises a NOT IN (subquery) once into an ephemeral index (a correlated NOT
        # EXISTS rescanned the seen ids per inbox row). When the window holds the whole inbox, the
        # unseen ids come from the unique (source, event_id) index alone and only their rows are
        # read; for a narrower window that would read every row outside it instead.
        events = INBOX_EVENTS
        unseen = events.c.event_id.not_in(self.seen_ids())
        if whole_inbox:
            return events.c.id.in_(
                select(events.c.id).where(events.c.source == self.source, unseen)
            )
        return unseen

    def before_anti_join(self) -> None:
        return None

    def settled_by_tally(self, window: Window, seen_rows: int, scope: Any) -> bool:
        return False  # (no tally kept: the anti-join decides)

    def whole_inbox(self, window_start: datetime, skew: timedelta) -> bool:
        first = self.conn.execute(
            select(func.min(INBOX_EVENTS.c.received_at)).where(INBOX_EVENTS.c.source == self.source)
        ).scalar()
        return first is None or first >= window_start - skew
