"""How a scan stores each source page: the ids it saw, which of them the inbox lacks, its findings and
the cursor after it, atomically per page, so a run that dies resumes after the last page stored.

- SQLite (:class:`TransactionPages`): one transaction a page (its statements cost no round trip; each
  commit is one write to the WAL).
- PostgreSQL (:class:`StatementPages`): no transaction around a page (the connection is in autocommit)
  and ONE statement a page, since round trips are most of what a page costs there (BEGIN, lookup,
  findings, seen ids, cursor and COMMIT were six). A page's findings and cursor are computed after its
  lookup, so they travel with the NEXT page's statement (data-modifying CTEs: the findings upsert,
  the cursor upsert and the next page's seen ids, then its lookup); the last page's go alone
  (:meth:`StatementPages.flush`). Each statement is atomic: a page's findings and its cursor are
  stored together or not at all. A run that dies before the next statement loses the page's
  findings with its cursor, so the resumed run scans that page again; its seen ids may then be stored
  twice, which the orphan anti-join does not mind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Text,
    and_,
    bindparam,
    cast,
    func,
    not_,
    select,
)
from sqlalchemy.dialects import postgresql

from reconciler.cursors import save_cursor
from reconciler.reconcile import findings as F
from reconciler.reconcile.seen import LOOKUP_CHUNK, ListedTally, remember_and_find_absent
from reconciler.storage.dialect import PrecompiledStatement
from reconciler.storage.models import INBOX_EVENTS, RECON_SEEN

E = INBOX_EVENTS


class TransactionPages:
    """In the caller's transaction (one a page)."""

    def __init__(
        self, conn: Connection, source: str, run_id: str, now: datetime, tally: ListedTally
    ) -> None:
        self.conn, self.source, self.run_id, self.now = conn, source, run_id, now
        self.tally = tally

    def lookup(self, event_ids: Sequence[str], oldest: datetime | None) -> set[str]:
        """Remember the page's ids; return those the inbox lacks (and keep the tally, PostgreSQL)."""
        return remember_and_find_absent(self.conn, self.source, event_ids, oldest, self.tally)

    def write(self, findings: Sequence[F.Finding], cursor: Mapping[str, Any]) -> None:
        """The page's findings and the cursor after it."""
        F.upsert(self.conn, self.source, self.run_id, self.now, findings)
        save_cursor(self.conn, self.source, cursor, self.run_id)

    def flush(self) -> None:
        """Store what is still held back (nothing here)."""


def _write_and_lookup(conn: Connection) -> Any:
    """The previous page's findings and cursor (:func:`findings.page_write_pg`), this page's seen ids,
    and this page's probe with its tally (as ``seen._SEEN_AND_ABSENT_PG``), as one statement."""
    ids = bindparam("ids", type_=Text)
    source: Any = bindparam("seen_source")
    listed = (
        func.json_array_elements_text(cast(ids, JSON)).table_valued("id").render_derived(name="x")
    )
    seen = postgresql.insert(RECON_SEEN).values(
        source=source, event_ids=ids, occurred_epoch=bindparam("seen_epoch")
    )
    present = E.c.event_id.is_not(None)
    probe = select(
        func.array_agg(listed.c.id).filter(not_(present)),
        func.count(E.c.event_id),
        func.sum(func.hashtextextended(listed.c.id, 0)).filter(present),
    ).select_from(listed.outerjoin(E, and_(E.c.source == source, E.c.event_id == listed.c.id)))
    return probe.add_cte(seen.cte("page_seen")).add_cte(F.page_write_pg(conn).cte("previous_page"))


_WRITE_AND_LOOKUP = PrecompiledStatement(_write_and_lookup)
_WRITE = PrecompiledStatement(F.page_write_pg)


class StatementPages:
    """One statement a page, in autocommit (see the module)."""

    def __init__(
        self, conn: Connection, source: str, run_id: str, now: datetime, tally: ListedTally
    ) -> None:
        self.conn, self.source, self.run_id, self.now = conn, source, run_id, now
        self.tally = tally
        self.pending: dict[str, Any] | None = None  # the previous page's findings and cursor

    def lookup(self, event_ids: Sequence[str], oldest: datetime | None) -> set[str]:
        if self.pending is None or not event_ids or len(event_ids) > LOOKUP_CHUNK:
            self.flush()
            return remember_and_find_absent(self.conn, self.source, event_ids, oldest, self.tally)
        params = {
            **self.pending,
            "ids": json.dumps(list(event_ids)),
            "seen_source": self.source,
            "seen_epoch": oldest.timestamp() if oldest is not None else None,
        }
        rows = _WRITE_AND_LOOKUP.execute(self.conn, params)
        self.pending = None
        return self.tally.add(rows)

    def write(self, findings: Sequence[F.Finding], cursor: Mapping[str, Any]) -> None:
        self.pending = F.page_write_params(self.source, self.run_id, self.now, findings, cursor)

    def flush(self) -> None:
        if self.pending is not None:
            _WRITE.execute(self.conn, self.pending)
            self.pending = None


def page_store(
    conn: Connection,
    source: str,
    run_id: str,
    now: datetime,
    tally: ListedTally,
    *,
    autocommit: bool,
) -> TransactionPages | StatementPages:
    """The page store of a scan's connection (``autocommit``: it runs without a transaction a page);
    on PostgreSQL its lookups add to ``tally``."""
    if autocommit and conn.dialect.name == "postgresql":
        return StatementPages(conn, source, run_id, now, tally)
    return TransactionPages(conn, source, run_id, now, tally)
