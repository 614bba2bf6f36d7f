"""The scan store on PostgreSQL: one statement a page, in autocommit.

Round trips are most of what a page costs here (BEGIN, lookup, findings, seen ids, cursor and
COMMIT would be six), so a page is ONE statement. A page's findings and cursor are known only after
its lookup, so they travel with the NEXT page's statement (data-modifying CTEs: the findings upsert,
the cursor upsert and the next page's seen ids, then its lookup); the last page's go alone
(:meth:`PostgresStore.end_pages`). Each statement is atomic: a page's findings and cursor are stored
together or not at all, and never before its seen ids. A run that dies before the next statement
loses the page's findings with its cursor, so the resumed run scans that page again; its seen ids
may then be stored twice, which the orphan anti-join does not mind.

The page's ids travel as one JSON text parameter (``json_array_elements_text``); every parameter is
plain text or a number, so the statements run through ``exec_driver_sql`` as SQLAlchemy compiled
them, once per engine.

The page lookups also keep a :class:`ListedTally` (how many of the listed ids the inbox holds and
the sum of their ``hashtextextended`` values): the orphan pass compares it with the same count and
sum over the inbox from the window's start on, and when they are equal every inbox event was
listed and the anti-join is skipped (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    exists,
    func,
    literal_column,
    not_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError

from connectors.base import Record
from reconciler.cursors import cursor_upsert
from reconciler.reconcile.judge import Finding, InboxFacts
from reconciler.reconcile.store.passes import CLOCK_SKEW, Passes, Window, in_window
from reconciler.reconcile.store.rows import chunks, epochs, finding_rows, page_span
from reconciler.reconcile.store.scan import Scan
from reconciler.storage.models import (
    CURSORS,
    DISCREPANCIES,
    INBOX_EVENTS,
    RECON_RUNS,
    RECON_SEEN,
    DiscrepancyKind,
)
from reconciler.storage.types import utcnow
from reconciler.storage.upserts import on_natural_key

log = logging.getLogger(__name__)
events = INBOX_EVENTS

# The columns of a discrepancy row as ``finding_rows`` makes it, which ``json_populate_recordset``
# reads from the page's JSON (taken from a row, so the two cannot drift apart).
ROW_COLUMNS = tuple(
    next(
        iter(
            finding_rows("", "", datetime.now(UTC), [Finding(DiscrepancyKind.MISSING, "")]).values()
        )
    )
)

# The scan's session settings, set at its start and put back afterwards (the pool reuses the
# connection). Why each, with its measurements: docs/benchmarks.md.
SCAN_SETTINGS = (
    # Page commits need not wait for their WAL flush: all a page commits is derived from the source
    # and re-derived by the next run; the run's final row is committed normally, which flushes all.
    ("synchronous_commit", "off"),
    # The page statement's plan is an index probe whatever its values; without this PostgreSQL kept
    # re-planning it every page. Never for the passes after the last page (their ranges need
    # custom plans), which :meth:`PostgresStore.end_pages` puts back first.
    ("plan_cache_mode", "force_generic_plan"),
)
# One round trip: the session's values first (a materialised CTE is read before the outer row's
# set_config calls run), then the scan's.
_SET_SCAN_SETTINGS = (
    "WITH before AS MATERIALIZED (SELECT "
    + ", ".join(f"current_setting('{name}') AS {name}" for name, _ in SCAN_SETTINGS)
    + ") SELECT before.*, "
    + ", ".join(f"set_config('{name}', '{value}', false)" for name, value in SCAN_SETTINGS)
    + " FROM before"
)
_PUT_BACK_SETTINGS = "SELECT " + ", ".join(
    f"set_config('{name}', %s, false)" for name, _ in SCAN_SETTINGS
)


@dataclass
class ListedTally:
    """What a scan's page lookups found of the inbox: how many listed ids it holds, the sum of their
    hashes, and how many ``recon_seen`` rows the scan wrote alongside. Equal to the inbox's count and
    sum from the window's start on, the two are the same set (but for a 64-bit hash-sum collision);
    the sum also keeps an id listed twice from standing in for one not listed. Anything else (an
    orphan, an event that arrived after its page was read, rows of an interrupted scan) leaves the
    decision to the anti-join."""

    count: int = 0
    hash_sum: int = 0
    seen_rows: int = 0

    def add(self, row: Sequence[Any]) -> set[str]:
        """Take a probe's row (absent ids, count, hash sum); return the absent ids."""
        absent, count, hash_sum = row
        if count:
            self.count += count
            self.hash_sum += int(hash_sum)
        self.seen_rows += 1
        return set(absent) if absent else set()


def _probe(ids: Any, source: Any) -> Any:
    """A page's lookup with its tally in ONE row: the absent ids as an array, how many of the ids
    the inbox holds and the sum of their hashes (the unique index alone is read)."""
    listed = (
        func.json_array_elements_text(cast(ids, JSON)).table_valued("id").render_derived(name="x")
    )
    present = events.c.event_id.is_not(None)
    return select(
        func.array_agg(listed.c.id).filter(not_(present)),
        func.count(events.c.event_id),
        func.sum(func.hashtextextended(listed.c.id, 0)).filter(present),
    ).select_from(
        listed.outerjoin(events, and_(events.c.source == source, events.c.event_id == listed.c.id))
    )


def _page_write() -> Any:
    """The previous page's findings (a JSON array of rows, unpacked into the table's row type) upserted
    by natural key, and the cursor after it, as one statement."""
    rows = func.json_populate_recordset(
        literal_column(f"NULL::{DISCREPANCIES.name}"), cast(bindparam("findings", type_=Text), JSON)
    ).table_valued(*ROW_COLUMNS)
    upsert = on_natural_key(
        postgresql.insert(DISCREPANCIES).from_select(
            ROW_COLUMNS, select(*(rows.c[k] for k in ROW_COLUMNS))
        )
    )
    cursor = cursor_upsert(
        postgresql.insert(CURSORS).values(
            source=bindparam("cursor_source", type_=Text),
            position=cast(bindparam("cursor_position", type_=Text), JSON),
            updated_at=cast(bindparam("cursor_updated_at", type_=Text), CURSORS.c.updated_at.type),
            run_id=bindparam("cursor_run_id", type_=Text),
        )
    )
    # the run's count of records it has stored (what a run killed mid-scan is recorded with)
    counted = (
        update(RECON_RUNS)
        .where(RECON_RUNS.c.run_id == bindparam("cursor_run_id", type_=Text))
        .values(records_scanned=RECON_RUNS.c.records_scanned + bindparam("page_records"))
    )
    return upsert.add_cte(cursor.cte("page_cursor")).add_cte(counted.cte("page_counted"))


def _seen_and_probe(*, with_write: bool) -> Any:
    """This page's seen ids and its probe, after the previous page's write when ``with_write``."""
    ids = bindparam("ids", type_=Text)
    source = bindparam("seen_source", type_=Text)
    seen = postgresql.insert(RECON_SEEN).values(
        source=source,
        event_ids=ids,
        occurred_epoch=bindparam("seen_epoch"),
        newest_epoch=bindparam("seen_newest_epoch"),
    )
    stmt = _probe(ids, source).add_cte(seen.cte("page_seen"))
    return stmt.add_cte(_page_write().cte("previous_page")) if with_write else stmt


@dataclass(frozen=True)
class _Compiled:
    sql: str
    defaults: dict[str, Any]  # the statement's own literals, as bind parameters

    def run(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        return conn.exec_driver_sql(self.sql, {**self.defaults, **params})


@functools.lru_cache(maxsize=16)
def _compiled(dialect: Dialect, name: str) -> _Compiled:
    builders: dict[str, Callable[[], Any]] = {
        "write": _page_write,
        "lookup": lambda: _seen_and_probe(with_write=False),
        "write_and_lookup": lambda: _seen_and_probe(with_write=True),
    }
    compiled = builders[name]().compile(dialect=dialect)
    # Its literals (a status to compare with) go as their stored strings, as the Enum columns'
    # own conversion would send them.
    defaults = {k: v.value if isinstance(v, enum.Enum) else v for k, v in compiled.params.items()}
    return _Compiled(str(compiled), defaults)


class PostgresStore:
    """One statement a page, in autocommit (see the module)."""

    def __init__(
        self, conn: Connection, source: str, run_id: str, now: datetime, *, dry_run: bool
    ) -> None:
        self.conn, self.source, self.run_id, self.dry_run = conn, source, run_id, dry_run
        self.scan = Scan(conn, source, run_id, now, dry_run=dry_run, insert=self.insert)
        self.passes = Passes(self.scan, self)
        self.tally = ListedTally()
        self.pending: dict[str, Any] | None = None  # the previous page's findings and cursor
        self._before: tuple[str, ...] | None = None  # the session's settings the scan replaced
        self._analyzed = False

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        cursor = self.scan.begin(full=full)
        row = self.conn.exec_driver_sql(_SET_SCAN_SETTINGS).one()
        self._before = tuple(str(v) for v in row[: len(SCAN_SETTINGS)])
        self.scan.commit()
        if not self.dry_run:  # (a dry run stays in its one transaction)
            self.conn.execution_options(isolation_level="AUTOCOMMIT")
        return cursor

    def lookup(self, records: Sequence[Record]) -> InboxFacts:
        ids, oldest, newest = page_span(records)
        oldest_epoch, newest_epoch = epochs(oldest, newest)
        span = {"seen_epoch": oldest_epoch, "seen_newest_epoch": newest_epoch}
        absent: set[str] = set()
        if ids and len(ids) <= self.scan.lookup_chunk and self.pending is not None:
            params = {**self.pending, "ids": json.dumps(ids), "seen_source": self.source}
            row = self._run("write_and_lookup", {**params, **span}).one()
            self.pending = None
            absent = self.tally.add(row)
        else:
            self._flush()
            for chunk in chunks(ids, self.scan.lookup_chunk):
                params = {"ids": chunk, "seen_source": self.source, **span}
                absent |= self.tally.add(self._run("lookup", params).one())
        return InboxFacts(frozenset(absent), self.scan.present_objects(records))

    def write(
        self, records: Sequence[Record], findings: Sequence[Finding], cursor: Mapping[str, Any]
    ) -> None:
        rows = finding_rows(self.source, self.run_id, self.scan.now, findings)
        self.pending = {
            "findings": json.dumps([_json_row(r) for r in rows.values()]),
            "cursor_source": self.source,
            "cursor_position": json.dumps(dict(cursor)),
            "cursor_updated_at": utcnow().isoformat(),
            "cursor_run_id": self.run_id,
            "page_records": len(records),
        }

    def relisted(self, records: Sequence[Record]) -> None:
        self.scan.relisted(records)
        self.scan.commit()  # (autocommit: the server has it already)

    def end_pages(self) -> None:
        self._flush()
        if self._before is not None:  # the passes after the last page plan as the session did
            self._put_back(self._before)
            self._before = None
        if not self.dry_run:  # and run in transactions again
            self.conn.execution_options(isolation_level=self.conn.default_isolation_level)

    def close(self) -> None:
        if self._before is not None and not self.dry_run:  # ended early: put the session back
            before, self._before = self._before, None
            try:
                if self.conn.in_transaction():
                    self.conn.rollback()
                self._put_back(before)
                self.scan.commit()
            except SQLAlchemyError:  # a broken connection: never hand it back to the pool
                log.warning(
                    "could not reset the scan's session settings; discarding it", exc_info=True
                )
                self.conn.invalidate()
        self.scan.close()  # a dry run's rollback puts its settings back too

    # -- the database's part of the closing passes (interface.DialectSql) ------------------------

    def insert(self, table: Table) -> Any:
        return postgresql.insert(table)

    def seen_ids(self, *, equal_to: Any = None) -> Any:
        ids = (
            func.json_array_elements_text(cast(RECON_SEEN.c.event_ids, JSON))
            .table_valued("value")
            .lateral()
        )
        query = (
            select(ids.c.value)
            .select_from(RECON_SEEN)
            .join(ids, literal_column("true"))
            .where(RECON_SEEN.c.source == self.source)
        )
        return query if equal_to is None else query.where(ids.c.value == equal_to)

    def not_seen(self, *, whole_inbox: bool) -> Any:
        # NOT EXISTS becomes a hash anti-join that spills to disk when large (NOT IN is hashed only
        # while the ids fit in work_mem, else rescanned).
        return not_(exists(self.seen_ids(equal_to=events.c.event_id)))

    def before_anti_join(self) -> None:
        # recon_seen is emptied after every scan and refilled by the next: whatever statistics
        # autovacuum last took are wrong now, and with them the anti-join was planned as a nested
        # loop over the whole heap per inbox row. Fresh ones cost a sample.
        if not self._analyzed:
            self.conn.exec_driver_sql(f"ANALYZE {RECON_SEEN.name}")
            self._analyzed = True

    def whole_inbox(self, window_start: datetime, skew: timedelta) -> bool:
        return False  # (planned alike either way)

    def settled_by_tally(self, window: Window, seen_rows: int, scope: Any) -> bool:
        if seen_rows != self.tally.seen_rows:  # a resumed scan: earlier rows were another run's
            return False
        count, hash_sum = self.conn.execute(
            select(func.count(), func.sum(func.hashtextextended(events.c.event_id, 0))).where(
                events.c.source == self.source,
                in_window(window),
                events.c.received_at >= window[0] - CLOCK_SKEW,
                scope,
            )
        ).one()
        return int(count) == self.tally.count and int(hash_sum or 0) == self.tally.hash_sum

    def _flush(self) -> None:
        if self.pending is not None:
            self._run("write", self.pending)
            self.pending = None

    def _run(self, name: str, params: Mapping[str, Any]) -> Any:
        result = _compiled(self.conn.dialect, name).run(self.conn, params)
        if self.conn.in_transaction() and not self.dry_run:
            self.conn.commit()  # what SQLAlchemy began around it: nothing to commit on the server
        return result

    def _put_back(self, before: tuple[str, ...]) -> None:
        """Not RESET, which goes back to the server's defaults and would drop what the engine set on
        connecting (``plan_cache_mode = force_custom_plan``)."""
        self.conn.exec_driver_sql(_PUT_BACK_SETTINGS, before)
        self.scan.commit()


@contextlib.contextmanager
def read_only(conn: Connection, timeout_seconds: float) -> Iterator[Connection]:
    """This session's transactions read-only, each statement bounded in time; its settings are put
    back afterwards (the connection returns to a shared pool)."""
    conn.exec_driver_sql("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    conn.exec_driver_sql(f"SET statement_timeout = {max(1, round(timeout_seconds * 1000))}")
    conn.commit()
    try:
        yield conn
    finally:
        try:
            if conn.in_transaction():
                conn.rollback()
            conn.exec_driver_sql("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")
            conn.exec_driver_sql("RESET statement_timeout")
            conn.commit()
        except SQLAlchemyError:
            conn.invalidate()  # never hand a read-only session back to the pool


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as ``json_populate_recordset`` reads it: times in ISO 8601 with their offset (UTC, as
    the columns store them; a naive one is refused as it is there), enums by value."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"naive datetime {value!r} given to a UTC column ({key})")
            value = value.astimezone(UTC).isoformat()
        out[key] = value
    return out
