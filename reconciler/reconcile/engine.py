"""One reconciliation run of one source.

Pages the source from its cursor; for each page, in ONE transaction: batched ``IN (...)`` lookups in the
inbox and the business tables, the page's discrepancies upserted by natural key, the ids it saw kept for
the orphan anti-join, and the cursor that follows the page. A run that dies resumes from the last
committed page. After the last page: orphaned (anti-join in SQL), stuck and dead (SQL), then
auto-resolution of what is fixed. Memory holds one page at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from connectors.base import Connector, Page, Record, ScanOptions
from connectors.errors import ConnectorError, UnsupportedError
from connectors.errors import NotFoundError as ConnectorNotFound
from connectors.factory import build_connector
from reconciler.config import Settings, SourceSettings
from reconciler.cursors import load_cursor
from reconciler.errors import ConfigError, HookledgerError
from reconciler.inbox.parsing import json_path_get
from reconciler.reconcile import findings as F
from reconciler.reconcile.business import (
    BoundCheck,
    bind_checks,
    duplicated,
    read_only,
    rows_by_key,
)
from reconciler.reconcile.compare import amount_of, diff_fields, equal, missing_cause, recover_by
from reconciler.reconcile.lease import Heartbeat, acquire, holder, release
from reconciler.reconcile.pages import StatementPages, TransactionPages, page_store
from reconciler.reconcile.seen import ListedTally, require_json, seen_so_far
from reconciler.storage.engine import database_error
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    RECON_RUNS,
    RECON_SEEN,
    DiscrepancyKind,
    DiscrepancyStatus,
    RunStatus,
)
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)
E = INBOX_EVENTS
D = DISCREPANCIES
DELIVERY_LOG_KINDS = ("github",)  # providers whose list says whether each delivery succeeded
# the kinds a re-check of the business tables can resolve
# Late webhook events asked of the provider one by one in a run (the rest wait for the next run).
LATE_ORPHAN_CHECKS = 500
BUSINESS_KINDS = (DiscrepancyKind.UNAPPLIED, DiscrepancyKind.DUPLICATE, DiscrepancyKind.DIVERGED)
ProgressHook = Callable[[str, int], None]  # (source, records scanned so far)


@dataclass
class RunSummary:
    run_id: str
    source: str
    status: str
    records_scanned: int = 0
    pages: int = 0
    found: dict[str, int] = field(default_factory=dict)  # discrepancies seen this run, by kind
    resolved: int = 0
    open_after: dict[str, int] = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    gaps: list[dict[str, Any]] = field(default_factory=list)
    detection_delay_median_seconds: float | None = None
    detection_delay_max_seconds: float | None = None
    error: str | None = None
    # the oldest webhook event inside the grace period the scan did not list (orphan watermark)
    unlisted_since: datetime | None = None

    def add(self, kind: DiscrepancyKind, n: int = 1) -> None:
        if n:
            self.found[kind.value] = self.found.get(kind.value, 0) + n

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "status": self.status,
            "records_scanned": self.records_scanned,
            "pages": self.pages,
            "found": self.found,
            "resolved": self.resolved,
            "open": self.open_after,
            "window_start": self.window_start.isoformat() if self.window_start else None,
            "window_end": self.window_end.isoformat() if self.window_end else None,
            "gaps": self.gaps,
            "detection_delay_median_seconds": self.detection_delay_median_seconds,
            "detection_delay_max_seconds": self.detection_delay_max_seconds,
            "error": self.error,
        }


def _object_of(record: Record) -> Mapping[str, Any]:
    """The source object a record describes (Stripe events carry it in data.object)."""
    data = record.payload.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("object"), Mapping):
        return data["object"]  # type: ignore[no-any-return]
    return record.payload


def reconcilable_sources(settings: Settings) -> list[SourceSettings]:
    """Enabled sources whose provider API can be read (they name an API key or an App key)."""
    return [s for s in settings.sources if s.enabled and (s.api_key_env or s.private_key_env)]


@dataclass
class _Scan:
    """What every page of one scan shares."""

    conn: Connection
    biz: Connection  # the business tables' connection (``conn`` itself when they share a database)
    source: SourceSettings
    connector: Connector
    checks: list[BoundCheck]
    summary: RunSummary
    now: datetime
    grace: timedelta
    dry_run: bool
    tally: ListedTally
    unbracketed: bool = False  # PostgreSQL: no transaction a page (see pages.StatementPages)
    fetched: dict[tuple[str, str], Mapping[str, Any] | None] = field(default_factory=dict)


class Reconciler:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        business_engine: Engine | None = None,
        connector_factory: Callable[[SourceSettings], Connector] = build_connector,
        clock: Callable[[], datetime] = utcnow,
        owner: str | None = None,
    ) -> None:
        self.engine = engine
        self.business_engine = business_engine or engine
        self.settings = settings
        self.cfg = settings.reconcile
        self.connector_factory = connector_factory
        self.clock = clock
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    # -- public ------------------------------------------------------------------------------------

    def run(
        self,
        source_name: str,
        *,
        trigger: str = "cli",
        full: bool = False,
        since: datetime | None = None,
        dry_run: bool = False,
        progress: ProgressHook | None = None,
        stop_after_pages: int | None = None,  # tests: simulate a run that dies after page p
    ) -> RunSummary:
        source = self.settings.source(source_name)
        if source is None:
            raise ConfigError(f"no source named '{source_name}' in the configuration")
        if not source.enabled:
            raise ConfigError(f"source '{source_name}' is disabled")
        require_json(self.engine.dialect.name)
        # The connector (an HTTP client: its SSL context alone is ~40 ms here) is made on a thread of
        # its own while the run's database work before the first page goes on.
        prepared = _PreparedConnector(self.connector_factory, source)
        try:
            checks = bind_checks(
                self.business_engine, source, self.settings.business.statement_timeout_seconds
            )
            now = self.clock()
            summary = RunSummary(
                run_id=str(uuid.uuid4()), source=source.name, status=RunStatus.RUNNING.value
            )
            skipped = not dry_run and not self._begin_run(summary, source, trigger, now)
        except BaseException:
            prepared.close()
            raise
        if skipped:
            prepared.close()
            return summary
        ttl = timedelta(seconds=self.cfg.lease_seconds)
        try:
            # A connector that cannot be built (a missing key) still ends the run as failed and frees
            # the lease, instead of blocking the source until the lease expires.
            with (
                contextlib.nullcontext()
                if dry_run
                else Heartbeat(self.engine, source.name, self.owner, ttl, self.clock)
            ):
                self._scan(
                    source,
                    prepared,
                    checks,
                    summary,
                    now,
                    full,
                    since,
                    dry_run,
                    progress,
                    stop_after_pages,
                )
            summary.status = RunStatus.SUCCEEDED.value
        except (HookledgerError, OSError) as exc:
            summary.status = RunStatus.FAILED.value
            summary.error = str(exc)
            raise
        except SQLAlchemyError as exc:  # the database went away mid-run
            error = database_error(self.engine.url.render_as_string(hide_password=True), exc)
            summary.status = RunStatus.FAILED.value
            summary.error = str(error)
            raise error from None
        finally:
            prepared.close()
            if not dry_run:
                try:
                    with self.engine.begin() as conn:
                        self._finish_run(conn, summary, source.name)
                except SQLAlchemyError as exc:
                    # Still unreachable: the next run finds this one abandoned once its lease runs out.
                    log.warning(
                        "could not record the end of run %s: %s",
                        summary.run_id,
                        database_error(self.engine.url.render_as_string(hide_password=True), exc),
                        extra={"source": source.name},
                    )
        return summary

    def _begin_run(
        self, summary: RunSummary, source: SourceSettings, trigger: str, now: datetime
    ) -> bool:
        """Take the source's lease and record the run; False (the run recorded as skipped) when
        another reconciliation holds it."""
        with self.engine.begin() as conn:
            if not acquire(
                conn, source.name, self.owner, now, timedelta(seconds=self.cfg.lease_seconds)
            ):
                held = holder(conn, source.name)
                summary.status = RunStatus.SKIPPED.value
                summary.error = "another reconciliation of this source is running" + (
                    f": lease {held.describe()}" if held else ""
                )
                self._insert_run(conn, summary, trigger, now, RunStatus.SKIPPED)
                log.info("%s; skipped", summary.error, extra={"source": source.name})
                return False
            # A run still "running" without the lease died with its process: say so in the history.
            conn.execute(
                update(RECON_RUNS)
                .where(RECON_RUNS.c.source == source.name, RECON_RUNS.c.status == RunStatus.RUNNING)
                .values(
                    status=RunStatus.FAILED,
                    finished_at=now,
                    error="abandoned: its process stopped before the run finished",
                )
            )
            self._insert_run(conn, summary, trigger, now, RunStatus.RUNNING)
        return True

    # -- the scan ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _business(self, conn: Connection, needed: bool = True) -> Iterator[Connection]:
        """The business tables' connection: on SQLite the page's own when they share the inbox
        database (SQLite never waits on itself), else a read-only one (PostgreSQL: READ ONLY with a
        statement timeout, see ``business.read_only``)."""
        timeout = self.settings.business.statement_timeout_seconds
        if not needed or (
            self.business_engine is self.engine and conn.dialect.name != "postgresql"
        ):
            # no check reads business tables; or SQLite, whose one writer is this connection
            yield conn
            return
        # PostgreSQL, even on the inbox's own database: a connection of its own, read-only
        with self.business_engine.connect() as biz, read_only(biz, timeout):
            yield biz

    def _scan(
        self,
        source: SourceSettings,
        prepared: _PreparedConnector,
        checks: list[BoundCheck],
        summary: RunSummary,
        now: datetime,
        full: bool,
        since: datetime | None,
        dry_run: bool,
        progress: ProgressHook | None,
        stop_after_pages: int | None,
    ) -> None:
        grace = timedelta(seconds=self.cfg.grace_seconds)
        lookback = (now - since) if since else timedelta(hours=source.initial_lookback_hours)
        options = ScanOptions(
            now=now,
            initial_lookback=lookback,
            full=full or since is not None,
            overlap=timedelta(seconds=self.cfg.overlap_seconds),
        )
        with self.engine.connect() as conn, self._business(conn, bool(checks)) as biz:
            outer = conn.begin() if dry_run else None  # dry run: one transaction, rolled back
            cursor = None if options.full else load_cursor(conn, source.name)
            connector = prepared.get()  # (its build overlapped the run's database work so far)
            scan = _Scan(
                conn,
                biz,
                source,
                connector,
                checks,
                summary,
                now,
                grace,
                dry_run,
                ListedTally(),
            )
            before = _scan_session(conn)
            try:
                if cursor is None:  # a scan from scratch: ids an abandoned scan saw are not its own
                    conn.execute(delete(RECON_SEEN).where(RECON_SEEN.c.source == source.name))
                if conn.in_transaction() and not dry_run:
                    conn.commit()
                scan.unbracketed = not dry_run and _pages_unbracketed(conn)
                store = page_store(
                    conn, source.name, summary.run_id, now, scan.tally, autocommit=scan.unbracketed
                )
                try:
                    # closed on the way out, also on a failure: its request ahead stops with it
                    with _closing(connector.pages(cursor, options)) as pages:
                        for page in pages:
                            self._commit_page(scan, store, page)
                            self._account(summary, page)
                            if progress:
                                progress(source.name, summary.records_scanned)
                            if stop_after_pages is not None and summary.pages >= stop_after_pages:
                                raise _Interrupted(f"stopped after {summary.pages} page(s) (test)")
                except (HookledgerError, OSError):
                    # The source failed (or the run was stopped): what was read is kept.
                    _flush_after_failure(store)
                    raise
                store.flush()
                if before is not None:  # the passes after the last page plan as the session did
                    _reset_scan_settings(conn, before, autocommit=scan.unbracketed)
                    before = None
                if scan.unbracketed:  # and run in one transaction again
                    conn.execution_options(isolation_level=conn.default_isolation_level)
                    scan.unbracketed = False
                tx = None if dry_run else conn.begin()
                window_start = seen_so_far(conn, source.name)[0]
                self._after_pages(conn, biz, source, checks, summary, now, grace, scan.tally)
                if tx is not None:
                    tx.commit()
                # asks the provider over HTTP: outside the transaction (SQLite's write lock)
                self._late_orphans(scan, source, window_start)
            finally:
                if outer is not None:
                    outer.rollback()  # rolls the SET back too
                elif before is not None:
                    _restore_session(conn, before)

    def _commit_page(
        self, scan: _Scan, store: TransactionPages | StatementPages, page: Page
    ) -> None:
        """The page's lookups, its findings, its seen ids and the cursor after it, stored atomically
        (``pages``: a transaction a page on SQLite, one statement a page on PostgreSQL). A run that
        dies resumes after the last stored page, losing and repeating nothing (findings are upserts by
        natural key; seen ids only feed an anti-join, where an id seen twice is harmless).

        Several pages per transaction were measured and bring nothing once the seen ids are a heap
        (100k events, SQLite: 2.39-2.53 s a page per commit, 2.73-2.82 s at ten, 2.76-2.99 s at twenty;
        PostgreSQL within the noise), and they hold more records in memory."""
        conn = scan.conn
        tx = None if scan.dry_run or scan.unbracketed else conn.begin()
        # Every event id of the page is remembered (object-only records have no orphans); the lookup
        # covers them all, and only settled records are judged on it.
        records = page.records
        ids = list(dict.fromkeys([r.event_id for r in records if r.event_id]))
        oldest = min((r.occurred_at for r in records if r.occurred_at is not None), default=None)
        absent = store.lookup(ids, oldest)
        found = self._page(scan, records, absent)
        if not scan.dry_run:
            store.write(found, page.cursor)
        if tx is not None:
            tx.commit()
        elif scan.unbracketed and conn.in_transaction():
            conn.commit()  # what SQLAlchemy began for a read; nothing to commit on the server
        if scan.biz is not conn and scan.biz.in_transaction():
            scan.biz.rollback()  # no read transaction held open on the business database
        for f in found:
            scan.summary.add(f.kind)

    def _account(self, summary: RunSummary, page: Page) -> None:
        summary.pages += 1
        summary.records_scanned += len(page.records)
        times = [r.occurred_at for r in page.records if r.occurred_at is not None]
        if times:
            summary.window_start = min(
                [*times, *([summary.window_start] if summary.window_start else [])]
            )
            summary.window_end = max(
                [*times, *([summary.window_end] if summary.window_end else [])]
            )
        if page.gap:
            summary.gaps.append(
                {
                    "start": page.gap.start.isoformat() if page.gap.start else None,
                    "end": page.gap.end.isoformat(),
                    "reason": page.gap.reason,
                }
            )

    def _page(
        self, scan: _Scan, records: Sequence[Record], absent_events: set[str]
    ) -> list[F.Finding]:
        conn, source, connector, now, grace = (
            scan.conn,
            scan.source,
            scan.connector,
            scan.now,
            scan.grace,
        )
        cutoff = now - grace
        settled = [r for r in records if r.occurred_at is None or r.occurred_at <= cutoff]
        found: list[F.Finding] = []
        # which of the page's objects the inbox holds (one query; its events: ``absent_events``)
        object_keys = sorted(
            {(r.object_type or "", r.object_id) for r in settled if not r.event_id and r.object_id}
        )
        present_objects: set[tuple[str, str]] = set()
        if object_keys:
            ids = [oid for _, oid in object_keys]
            rows = conn.execute(
                select(E.c.object_type, E.c.object_id)
                .where(E.c.source == source.name, E.c.object_id.in_(ids))
                .distinct()
            )
            present_objects = {(t or "", o) for t, o in rows}
        retention = connector.retention
        has_log = source.kind in DELIVERY_LOG_KINDS
        # One pass for a page's usual case, where the inbox holds (almost) every event: only the
        # absent ones are looked at one by one.
        missing = [
            r
            for r in settled
            if (
                r.event_id in absent_events
                if r.event_id
                else (r.object_type or "", str(r.object_id)) not in present_objects
            )
        ]
        attempts_by_event: dict[str, list[Any]] = {}
        if has_log and missing:
            for r in settled:
                if r.event_id:
                    attempts_by_event.setdefault(r.event_id, []).extend(r.attempts)
        reported: set[str] = set()
        for r in missing:
            key = _key(r)
            if key in reported:
                continue
            reported.add(key)
            check = next(
                (c for c in scan.checks if c.check.applies_to(r.object_type, r.event_type)), None
            )
            obj = _object_of(r)
            found.append(
                F.Finding(
                    kind=DiscrepancyKind.MISSING,
                    record_key=key,
                    event_id=r.event_id,
                    event_type=r.event_type,
                    object_type=r.object_type,
                    object_id=r.object_id,
                    amount=amount_of(obj, check.check.amount) if check else None,
                    currency=_str(obj, check.check.currency) if check else None,
                    cause=missing_cause(attempts_by_event.get(r.event_id or "", []), has_log),
                    recover_by=recover_by(r.occurred_at, retention),
                    occurred_at=r.occurred_at,
                    detail={"attempts": len(attempts_by_event.get(r.event_id or "", []))}
                    if has_log
                    else {},
                )
            )
        if not scan.checks:
            return found
        # a key's records are all present or all absent (presence is by event id, or by object)
        absent_keys = {_key(r) for r in missing}
        received_keys = {key for key in map(_key, settled) if key not in absent_keys}
        for check in scan.checks:
            found.extend(self._check(scan, check, settled, received_keys))
        return found

    def _check(
        self, scan: _Scan, check: BoundCheck, records: Sequence[Record], received_keys: set[str]
    ) -> list[F.Finding]:
        """Objects of this check with at least one received event, judged against the newest record the
        source lists for them (received or not), confirmed with the current state when they differ."""
        cfg = check.check
        applying = [
            r for r in records if r.object_id and cfg.applies_to(r.object_type, r.event_type)
        ]
        applicable = {r.object_id for r in applying if _key(r) in received_keys}
        latest: dict[str, Record] = {}
        for r in applying:
            oid = r.object_id
            if oid is not None and oid in applicable:
                known = latest.get(oid)
                if known is None or _when(r) > _when(known):
                    latest[oid] = r
        if not latest:
            return []
        keys = sorted(latest)
        rows = rows_by_key(scan.biz, check, keys)
        dups = duplicated(scan.biz, check, keys)
        out: list[F.Finding] = []
        for object_id in keys:
            r = latest[object_id]
            obj = _object_of(r)
            found_rows = rows.get(object_id, [])
            count = max(dups.get(object_id, 0), len(found_rows))
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
            if not found_rows:
                if cfg.require_row:
                    out.append(_business_finding(DiscrepancyKind.UNAPPLIED, check, r, obj))
                continue
            if not cfg.fields:
                continue
            diffs = diff_fields(obj, found_rows[0], cfg.fields)
            if diffs and r.object_type:
                # Judge against the source's latest state, never an older event's snapshot.
                current = self._current(scan.connector, r.object_type, object_id, scan.fetched)
                if current is not None:
                    obj = current
                    diffs = diff_fields(current, found_rows[0], cfg.fields)
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
                        detail={"path": cfg.fields[d.column]},
                    )
                )
        return out

    def _current(
        self,
        connector: Connector,
        object_type: str,
        object_id: str,
        cache: dict[tuple[str, str], Mapping[str, Any] | None],
    ) -> Mapping[str, Any] | None:
        key = (object_type, object_id)
        if key not in cache:
            try:
                cache[key] = connector.fetch_object(object_type, object_id)
            except (UnsupportedError, ConnectorError) as exc:
                log.info(
                    "cannot fetch %s %s for a divergence check: %s", object_type, object_id, exc
                )
                cache[key] = None
        return cache[key]

    # -- after the last page -----------------------------------------------------------------------

    def _after_pages(
        self,
        conn: Connection,
        biz: Connection,
        source: SourceSettings,
        checks: list[BoundCheck],
        summary: RunSummary,
        now: datetime,
        grace: timedelta,
        tally: ListedTally,
    ) -> None:
        run_id = summary.run_id
        # The scan's window starts at the oldest record it saw, in this run or an interrupted one.
        start, seen_rows = seen_so_far(conn, source.name)
        # The kinds with open discrepancies before these passes: a resolution pass over a kind with
        # none has nothing to do (what the passes below add was seen in this run: not resolvable).
        open_kinds = F.open_kinds(conn, source.name)
        analyzed = False

        def fresh_seen_statistics() -> None:
            # recon_seen is emptied after every scan and refilled by the next: whatever statistics
            # autovacuum last took (an empty table, another source's ids) are wrong now, and with
            # them PostgreSQL planned the orphan anti-join as a nested loop over the whole heap per
            # inbox row (100k events: over four minutes instead of ~0.1 s). Fresh ones cost a sample,
            # taken before the first statement that joins the seen ids.
            nonlocal analyzed
            if not analyzed and start is not None and conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"ANALYZE {RECON_SEEN.name}")
            analyzed = True

        if start is not None and source.kind != "shopify":
            orphans = F.record_orphans(
                conn,
                source.name,
                run_id,
                now,
                start,
                grace,
                tally,
                seen_rows,
                before_anti_join=fresh_seen_statistics,
                scope=F.listed_scope(source.event_types, source.account),
            )
            summary.add(DiscrepancyKind.ORPHANED, orphans)
        stuck, dead = F.record_stuck_and_dead(
            conn, source.name, run_id, now, timedelta(seconds=self.cfg.stuck_after_seconds)
        )
        summary.add(DiscrepancyKind.STUCK, stuck)
        summary.add(DiscrepancyKind.DEAD, dead)
        if DiscrepancyKind.ORPHANED in open_kinds:
            fresh_seen_statistics()  # resolving them joins the seen ids
        summary.resolved += F.resolve_fixed_inbox_problems(
            conn, source.name, run_id, now, open_kinds
        )
        if open_kinds & set(BUSINESS_KINDS):
            summary.resolved += self._resolve_business(conn, biz, source, checks, run_id, now)
        if source.kind != "shopify":  # (read before the seen ids go)
            scope = F.listed_scope(source.event_types, source.account)
            summary.unlisted_since = F.first_unlisted_in_grace(conn, source.name, now, grace, scope)
        conn.execute(delete(RECON_SEEN).where(RECON_SEEN.c.source == source.name))
        delays = F.detection_delays(conn, run_id)
        if delays is not None:
            summary.detection_delay_median_seconds, summary.detection_delay_max_seconds = delays

    def _late_orphans(self, scan: _Scan, source: SourceSettings, start: datetime | None) -> None:
        """Webhook events received since the source's orphan watermark that this scan's window does
        not cover (the scan listed nothing new, or they arrived long after they occurred): each is
        asked of the provider by id, at most ``LATE_ORPHAN_CHECKS`` a run, and one the provider does
        not know is an orphan. The watermark then moves to the grace period's edge, or to just before
        the first event that could not be asked."""
        conn, now, grace = scan.conn, scan.now, scan.grace
        if source.kind == "shopify" or not scan.connector.confirms_event_ids:
            return
        # Settled up to now, except events inside the grace period the scan did not list yet: the
        # next run checks from the oldest of those (events it lists are settled again by listing).
        unlisted = scan.summary.unlisted_since
        settled = now if unlisted is None else unlisted - timedelta(microseconds=1)
        checked_until = F.orphan_watermark(conn, source.name)
        if checked_until is None:
            # The source's first checked run: its window's anti-join judged what came before.
            if not scan.dry_run:  # (in the transaction the read above began)
                F.save_orphan_watermark(conn, source.name, settled, scan.summary.run_id)
                conn.commit()
            return
        candidates = F.late_orphan_candidates(
            conn,
            source.name,
            checked_until,
            now,
            grace,
            start,
            F.listed_scope(source.event_types, source.account),
            LATE_ORPHAN_CHECKS + 1,
        )
        if not scan.dry_run and conn.in_transaction():
            conn.commit()  # no read transaction held open while the provider is asked
        watermark = settled
        if len(candidates) > LATE_ORPHAN_CHECKS:
            watermark = min(
                watermark, candidates[LATE_ORPHAN_CHECKS][1] - timedelta(microseconds=1)
            )
            candidates = candidates[:LATE_ORPHAN_CHECKS]
        unknown = []
        for event_id, received_at in candidates:
            try:
                scan.connector.fetch_event(event_id)
            except ConnectorNotFound:
                unknown.append(event_id)
            except ConnectorError as exc:
                log.warning(
                    "could not ask the source about event %s (%s); it is checked next run",
                    event_id,
                    exc.__class__.__name__,
                    extra={"source": source.name},
                )
                watermark = min(watermark, received_at - timedelta(microseconds=1))
                break
        tx = None if scan.dry_run else conn.begin()
        found = F.record_orphans_by_id(conn, source.name, scan.summary.run_id, now, unknown)
        scan.summary.add(DiscrepancyKind.ORPHANED, found)
        if tx is not None:
            F.save_orphan_watermark(
                conn, source.name, max(watermark, checked_until), scan.summary.run_id
            )
            tx.commit()

    def _resolve_business(
        self,
        conn: Connection,
        biz: Connection,
        source: SourceSettings,
        checks: list[BoundCheck],
        run_id: str,
        now: datetime,
    ) -> int:
        """Open unapplied / duplicate / diverged rows not seen again this run: re-check the business
        table in batches and resolve what is fixed."""
        by_table = {c.check.table: c for c in checks}
        kinds = list(BUSINESS_KINDS)
        resolved = 0
        last_id = 0
        while True:
            batch = conn.execute(
                select(D.c.id, D.c.kind, D.c.object_id, D.c.field, D.c.source_value, D.c.detail)
                .where(
                    D.c.source == source.name,
                    D.c.status == DiscrepancyStatus.OPEN,
                    D.c.kind.in_(kinds),
                    D.c.last_run_id != run_id,
                    D.c.id > last_id,
                )
                .order_by(D.c.id)
                .limit(500)
            ).all()
            if not batch:
                return resolved
            last_id = batch[-1].id
            fixed: list[int] = []
            for table, check in by_table.items():
                mine = [b for b in batch if (b.detail or {}).get("table") == table and b.object_id]
                if not mine:
                    continue
                keys = sorted({b.object_id for b in mine})
                rows = rows_by_key(biz, check, keys)
                dups = duplicated(biz, check, keys)
                for b in mine:
                    present = rows.get(b.object_id, [])
                    if (
                        (b.kind == DiscrepancyKind.UNAPPLIED and present)
                        or (
                            b.kind == DiscrepancyKind.DUPLICATE
                            and max(len(present), dups.get(b.object_id, 0)) <= 1
                        )
                        or (
                            b.kind == DiscrepancyKind.DIVERGED
                            and present
                            and equal(_loads(b.source_value), present[0].get(b.field))
                        )
                    ):
                        fixed.append(b.id)
            if fixed:
                resolved += (
                    conn.execute(
                        update(D)
                        .where(D.c.id.in_(fixed))
                        .values(
                            status=DiscrepancyStatus.RESOLVED,
                            resolution="fixed in the business table",
                            resolved_at=now,
                        )
                    ).rowcount
                    or 0
                )

    # -- run rows ----------------------------------------------------------------------------------

    def _insert_run(
        self, conn: Connection, summary: RunSummary, trigger: str, now: datetime, status: RunStatus
    ) -> None:
        conn.execute(
            insert(RECON_RUNS).values(
                run_id=summary.run_id,
                source=summary.source,
                trigger=trigger,
                status=status,
                started_at=now,
                finished_at=now if status is RunStatus.SKIPPED else None,
                records_scanned=0,
                counts={},
                error=summary.error if status is RunStatus.SKIPPED else None,
                detail={"owner": self.owner},
            )
        )

    def _finish_run(self, conn: Connection, summary: RunSummary, source: str) -> None:
        summary.open_after = {
            str(kind): int(n)
            for kind, n in conn.execute(
                select(D.c.kind, func.count())
                .where(D.c.source == source, D.c.status == DiscrepancyStatus.OPEN)
                .group_by(D.c.kind)
            )
        }
        conn.execute(
            update(RECON_RUNS)
            .where(RECON_RUNS.c.run_id == summary.run_id)
            .values(
                status=summary.status,
                finished_at=self.clock(),
                window_start=summary.window_start,
                window_end=summary.window_end,
                records_scanned=summary.records_scanned,
                counts=summary.found,
                error=summary.error,
                detail={
                    "owner": self.owner,
                    "pages": summary.pages,
                    "resolved": summary.resolved,
                    "gaps": summary.gaps,
                    "detection_delay_median_seconds": summary.detection_delay_median_seconds,
                    "detection_delay_max_seconds": summary.detection_delay_max_seconds,
                },
            )
        )
        release(conn, source, self.owner)


def _pages_unbracketed(conn: Connection) -> bool:
    """PostgreSQL: the scan's pages run in autocommit, one atomic statement a page
    (``pages.StatementPages``). The passes after the last page run in one transaction again."""
    if conn.dialect.name != "postgresql":
        return False
    conn.execution_options(isolation_level="AUTOCOMMIT")
    return True


# The scan's session settings on PostgreSQL, set at its start and put back to what the session had
# before (:func:`_scan_session`, :func:`_reset_scan_settings`, :func:`_restore_session`).
_SCAN_SETTINGS = (
    # The page commits return without waiting for their WAL flush. Everything a page commits is
    # derived from the source and re-derived by the next run: a database crash can only drop the last
    # pages' commits, their findings, seen ids and cursor together, so the run resumes a little earlier
    # and loses nothing. The run's final row is committed normally, which flushes all of them (the WAL
    # is sequential). The same trade-off as SQLite's ``synchronous=NORMAL`` here. Measured: ~0.6 of
    # ~2.6 ms a page.
    ("synchronous_commit", "off"),
    # The page statement (and a check's page query) runs once a page with the same text: psycopg
    # prepares it after five runs, and PostgreSQL then kept planning it anew for every page (its
    # generic plan's estimate for the unpacked id array looked worse than the custom plans' average,
    # though both are the same index probes): a fifth of the server's time a page. The plans these
    # statements get are index probes by key whatever the values (one source, a page of ids).
    # Measured at 100k events: 1.24 -> 1.06 s of server CPU over the same part of the scan, 6.85 ->
    # 6.53 s in all (interleaved, medians of 4). The passes after the last page must NOT run with it
    # (:func:`_reset_scan_settings`): a generic plan guesses a third of the rows for every range and
    # made the stuck and dead passes scan the whole inbox (1M events: 0.5 s each instead of 1 ms).
    ("plan_cache_mode", "force_generic_plan"),
)
# One round trip: the session's values first (a materialised CTE is read before the outer row's
# ``set_config`` calls run), then the scan's.
_SET_SCAN_SETTINGS = (
    "WITH before AS MATERIALIZED (SELECT "
    + ", ".join(f"current_setting('{name}') AS {name}" for name, _ in _SCAN_SETTINGS)
    + ") SELECT before.*, "
    + ", ".join(f"set_config('{name}', '{value}', false)" for name, value in _SCAN_SETTINGS)
    + " FROM before"
)
_PUT_BACK_SETTINGS = "SELECT " + ", ".join(
    f"set_config('{name}', %s, false)" for name, _ in _SCAN_SETTINGS
)
SessionSettings = tuple[str, ...]  # the session's values of ``_SCAN_SETTINGS`` before the scan


def _scan_session(conn: Connection) -> SessionSettings | None:
    """PostgreSQL: this session's settings for a scan (``_SCAN_SETTINGS``); committed with the scan's
    first commit, or rolled back with a dry run. Returns the values they replaced (the server's, or
    what the engine set on connecting: ``plan_cache_mode = force_custom_plan``), which
    :func:`_reset_scan_settings` puts back; None where nothing was set."""
    if conn.dialect.name != "postgresql":
        return None
    row = conn.exec_driver_sql(_SET_SCAN_SETTINGS).one()
    return tuple(str(value) for value in row[: len(_SCAN_SETTINGS)])


def _reset_scan_settings(conn: Connection, before: SessionSettings, *, autocommit: bool) -> None:
    """Put back the values the scan's settings replaced: after the last page (in a dry run's
    transaction, rolled back with it to the same values) and in :func:`_restore_session`. Not
    ``RESET``, which goes back to the server's defaults and so dropped the engine's own
    ``force_custom_plan`` from the connection for whatever used it next."""
    conn.exec_driver_sql(_PUT_BACK_SETTINGS, before)
    if autocommit and conn.in_transaction():
        conn.commit()  # what SQLAlchemy began around the statement; nothing to commit on the server


def _restore_session(conn: Connection, before: SessionSettings) -> None:
    """Back to the session's settings before the pooled connection is reused; a connection that
    cannot be put back is discarded instead."""
    try:
        if conn.in_transaction():
            conn.rollback()
        _reset_scan_settings(conn, before, autocommit=False)
        conn.commit()
    except SQLAlchemyError:  # a broken connection: never hand it back to the pool
        log.warning(
            "could not reset the scan's session settings; discarding the connection", exc_info=True
        )
        conn.invalidate()


def _flush_after_failure(store: TransactionPages | StatementPages) -> None:
    """Store the last page read before the source failed; a database that fails too is logged, and
    the source's error is the one raised (the resumed run scans that page again)."""
    try:
        store.flush()
    except SQLAlchemyError:
        log.warning("could not store the last page read before the failure", exc_info=True)


@contextlib.contextmanager
def _closing(pages: Iterator[Page]) -> Iterator[Iterator[Page]]:
    """A connector's pages, closed on the way out when they are a generator (its request ahead
    stops then, not when the garbage collector gets to it)."""
    try:
        yield pages
    finally:
        close = getattr(pages, "close", None)
        if close is not None:
            close()


class _PreparedConnector:
    """A source's connector, built on a thread of its own from the moment the run starts: what it
    costs (an HTTP client, its SSL context, a GitHub App's key) overlaps the run's first database
    work instead of coming after it. :meth:`get` waits for it (raising what its build raised);
    :meth:`close` waits and closes whatever was built, used or not."""

    def __init__(
        self, factory: Callable[[SourceSettings], Connector], source: SourceSettings
    ) -> None:
        self._connector: Connector | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(
            target=self._build, args=(factory, source), name="connector-build", daemon=True
        )
        self._thread.start()

    def _build(
        self, factory: Callable[[SourceSettings], Connector], source: SourceSettings
    ) -> None:
        try:
            self._connector = factory(source)
        except BaseException as exc:  # raised to the run by get()
            self._error = exc

    def get(self) -> Connector:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._connector is not None
        return self._connector

    def close(self) -> None:
        self._thread.join()
        if self._connector is not None and not self._closed:
            self._closed = True
            self._connector.close()


class _Interrupted(HookledgerError):
    """The run was stopped on purpose (tests)."""


def _key(record: Record) -> str:
    return record.event_id or f"{record.object_type}:{record.object_id}"


def _when(record: Record) -> float:
    return record.occurred_at.timestamp() if record.occurred_at else float("-inf")


def _business_finding(
    kind: DiscrepancyKind,
    check: BoundCheck,
    record: Record,
    obj: Mapping[str, Any],
    *,
    column: str = "",
    source_value: Any = None,
    local_value: Any = None,
    detail: dict[str, Any] | None = None,
) -> F.Finding:
    cfg = check.check
    return F.Finding(
        kind=kind,
        record_key=f"{cfg.table}:{record.object_id}",
        field=column,
        event_id=record.event_id,
        event_type=record.event_type,
        object_type=record.object_type,
        object_id=record.object_id,
        source_value=source_value,
        local_value=local_value,
        amount=amount_of(obj, cfg.amount),
        currency=_str(obj, cfg.currency),
        occurred_at=record.occurred_at,
        detail={"table": cfg.table, **(detail or {})},
    )


def _str(obj: Mapping[str, Any], path: str | None) -> str | None:
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
