"""One reconciliation run of one source.

Takes the source's lease and pages the connector from the cursor. Each page goes one way:

1. **fetch**: the connector lists it (no call back into the reconciler);
2. **look up**: what the business tables hold of its objects and the provider's current state of
   the suspect ones (:class:`.lookup.LookUp`, a few pages ahead of the writer: :mod:`.pipeline`),
   then what the inbox holds of it (the store, in order);
3. **judge**: pure (:class:`.page_judge.PageJudge`);
4. **write**: the store keeps the page's findings, seen ids and cursor in one transaction.

After the last page: the closing passes. A run that dies resumes from the last page stored; memory
holds the few pages in flight.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from connectors.base import Connector, Page, ScanOptions
from reconciler.config import Settings, SourceSettings
from reconciler.errors import ConfigError, HookledgerError
from reconciler.process import lease_owner
from reconciler.reconcile import closing, history, judge
from reconciler.reconcile.business import BoundCheck, bind_checks
from reconciler.reconcile.known import known_object_ids
from reconciler.reconcile.lease import Heartbeat
from reconciler.reconcile.lookup import NO_FACTS, LookUp, PageFacts
from reconciler.reconcile.page_judge import PageJudge
from reconciler.reconcile.pipeline import looked_up
from reconciler.reconcile.prepared import PreparedConnector
from reconciler.reconcile.progress import ProgressHook, ScanProgress
from reconciler.reconcile.store import (
    ScanStore,
    business_connection,
    check_ready,
    listed_scope,
    open_store,
)
from reconciler.reconcile.summary import RunSummary
from reconciler.sources import budget_of, run_connector_factory
from reconciler.states import RunStatus
from reconciler.storage.failures import database_error
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)
# Pages looked up ahead of the writer, at most (each holds its records and facts in memory), and
# the read-only connections their look-ups share.
LOOK_UP_AHEAD = 8
LOOK_UP_CONNECTIONS = 4
__all__ = ["ProgressHook", "Reconciler", "RunSummary", "reconcilable_sources"]


@dataclass(frozen=True)
class _Asked:
    """What the caller asked of one run (:meth:`Reconciler.run`'s options), as the scan reads it."""

    now: datetime  # the run's clock reading: its window ends here
    full: bool
    since: datetime | None
    dry_run: bool
    progress: ProgressHook | None


def reconcilable_sources(settings: Settings) -> list[SourceSettings]:
    """Enabled sources whose provider API can be read (they name its credentials: an API key, an
    App key, an OAuth client)."""
    return [s for s in settings.sources if s.enabled and s.credential_keys()]


class Reconciler:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        business_engine: Engine | None = None,
        connector_factory: Callable[[SourceSettings], Connector] | None = None,
        clock: Callable[[], datetime] = utcnow,
        owner: str | None = None,
    ) -> None:
        self.engine = engine
        self.business_engine = business_engine or engine
        self.settings = settings
        self.cfg = settings.reconcile
        self.connector_factory = connector_factory or run_connector_factory(settings)
        self.clock = clock
        self.owner = owner or lease_owner()

    def run(
        self,
        source_name: str,
        *,
        trigger: str = "cli",
        full: bool = False,
        since: datetime | None = None,
        dry_run: bool = False,
        progress: ProgressHook | None = None,
        slot: datetime | None = None,
        quiet: bool = False,
    ) -> RunSummary:
        """One run (``slot``: the scheduled time it is for: skipped if one already ran since;
        ``quiet``: the notification targets are not told what it finds)."""
        source = self.settings.source(source_name)
        if source is None:
            raise ConfigError(f"no source named '{source_name}' in the configuration")
        if not source.enabled:
            raise ConfigError(f"source '{source_name}' is disabled")
        check_ready(self.engine)
        # The connector (an HTTP client, its SSL context) is built on a thread of its own while the
        # run's database work before the first page goes on.
        with PreparedConnector(self.connector_factory, source) as prepared:
            timeout = self.settings.business.statement_timeout_seconds
            checks = bind_checks(self.business_engine, source, timeout)
            now = self.clock()
            summary = RunSummary(
                str(uuid.uuid4()), source.name, RunStatus.RUNNING.value, quiet=quiet
            )
            ttl = timedelta(seconds=self.cfg.lease_seconds)
            if not dry_run:
                with self.engine.begin() as conn:
                    if not history.start(conn, summary, self.owner, trigger, now, ttl, slot):
                        return summary
            try:
                # A connector that cannot be built (a missing key) still ends the run as failed
                # and frees the lease, instead of blocking the source until the lease expires.
                with self._lease(source.name, ttl, dry_run):
                    asked = _Asked(now, full, since, dry_run, progress)
                    self._scan(source, prepared, checks, summary, asked)
                summary.status = RunStatus.SUCCEEDED.value
            except (HookledgerError, OSError) as exc:  # the database's failures among them
                summary.status, summary.error = RunStatus.FAILED.value, str(exc)
                raise
            except SQLAlchemyError as exc:  # SQLAlchemy's own, no statement's: a pool timed out
                error = database_error(self.engine.url.render_as_string(hide_password=True), exc)
                summary.status, summary.error = RunStatus.FAILED.value, str(error)
                raise error from None
            finally:
                if not dry_run:
                    self._finish(summary)
                elif summary.status == RunStatus.SUCCEEDED.value:
                    # nothing was written: what is open is what earlier runs left open
                    with self.engine.connect() as conn:
                        summary.open_after = history.open_by_kind(conn, source.name)
        return summary

    def _lease(self, source: str, ttl: timedelta, dry_run: bool) -> Any:
        if dry_run:
            return contextlib.nullcontext()
        return Heartbeat(self.engine, source, self.owner, ttl, self.clock)

    def _finish(self, summary: RunSummary) -> None:
        try:
            with self.engine.begin() as conn:
                history.finish(conn, summary, self.owner, self.clock())
        except SQLAlchemyError as exc:
            # Still unreachable: the next run finds this one abandoned once its lease runs out.
            log.warning(
                "could not record the end of run %s: %s",
                summary.run_id,
                database_error(self.engine.url.render_as_string(hide_password=True), exc),
                extra={"source": summary.source},
            )

    def _scan(
        self,
        source: SourceSettings,
        prepared: PreparedConnector,
        checks: list[BoundCheck],
        summary: RunSummary,
        asked: _Asked,
    ) -> None:
        """Every page of the window (fetch, look up, judge, write: see the module), then the
        closing passes."""
        grace = timedelta(seconds=self.cfg.grace_seconds)
        now, progress = asked.now, asked.progress
        options = self._options(source, asked)
        with self.engine.connect() as conn, contextlib.ExitStack() as cleanup:
            store = open_store(conn, source.name, summary.run_id, now, dry_run=asked.dry_run)
            cleanup.callback(store.close)
            cursor = store.begin(full=options.full)
            connector = prepared.get()  # (its build overlapped the database work so far)
            asks = budget_of(source).concurrency  # requests the source allows at once
            # one request at a time: each page looked up in turn, no thread for it to wait on
            ahead = min(asks, LOOK_UP_AHEAD) if asks > 1 else 0
            plan = _nothing_to_look_up
            if checks:
                look_up = self._look_up(connector, checks, now - grace, ahead, asks)
                cleanup.callback(look_up.close)
                plan = look_up.plan
            source_facts = judge.Source(connector.capabilities, connector.retention)
            page_judge = PageJudge([c.check for c in checks], source_facts, now - grace)
            pages = looked_up(connector.pages(cursor, options), plan, ahead=ahead if checks else 0)

            def on_page(page: Page) -> None:
                if progress:
                    progress(source.name, _progress(summary, page, connector))

            write_pages(store, pages, page_judge, summary, on_page)
            self._close(store, connector, checks, summary, grace)

    def _options(self, source: SourceSettings, asked: _Asked) -> ScanOptions:
        now, since = asked.now, asked.since
        lookback = (now - since) if since else timedelta(hours=source.initial_lookback_hours)
        return ScanOptions(
            now=now,
            initial_lookback=lookback,
            full=asked.full or since is not None,
            overlap=timedelta(seconds=self.cfg.overlap_seconds),
            known_objects=functools.partial(
                known_object_ids, self.engine, source.name, now - lookback
            ),
        )

    def _look_up(
        self,
        connector: Connector,
        checks: list[BoundCheck],
        cutoff: datetime,
        ahead: int,
        asks: int,
    ) -> LookUp:
        """The look-up stage: ``ahead`` pages at once on a few read-only connections, a page's
        suspect objects asked ``asks`` at once (as many requests as the source allows)."""
        return LookUp(
            connector,
            checks,
            self.business_engine,
            inbox_engine=self.engine,
            cutoff=cutoff,
            timeout_seconds=self.settings.business.statement_timeout_seconds,
            connections=max(1, min(ahead, LOOK_UP_CONNECTIONS)),
            asks_at_once=asks,
        )

    def _close(
        self,
        store: ScanStore,
        connector: Connector,
        checks: list[BoundCheck],
        summary: RunSummary,
        grace: timedelta,
    ) -> None:
        """The passes after the last page (reconcile.closing)."""
        timeout = self.settings.business.statement_timeout_seconds
        window = store.passes.window()[0]
        scope = listed_scope(connector.listing)
        caps = connector.capabilities
        with (
            business_connection(store, self.business_engine, timeout)
            if checks
            else contextlib.nullcontext(store.scan.conn)
        ) as biz:
            closing.after_pages(
                store,
                biz,
                checks,
                summary,
                lists_events=caps.lists_events,
                scope=scope,
                grace=grace,
                stuck_after=timedelta(seconds=self.cfg.stuck_after_seconds),
            )
        if caps.lists_events and caps.confirms_event_ids:
            closing.late_orphans(store, connector, summary, window=window, scope=scope, grace=grace)


def write_pages(
    store: ScanStore,
    pages: Generator[tuple[Page, PageFacts], None, None],
    page_judge: PageJudge,
    summary: RunSummary,
    on_page: Callable[[Page], None] = lambda page: None,
) -> None:
    """Each page in order: what the inbox holds of it, judged, stored with its cursor; then what
    the store still holds back. A source that fails keeps the pages read before it."""
    try:
        with contextlib.closing(pages):  # (a generator: its threads stop with it)
            for page, facts in pages:
                findings = page_judge(page.records, store.lookup(page.records), facts)
                if page.relisted:
                    store.relisted(page.relisted)
                store.write(page.records, findings, page.cursor)
                summary.account(page)
                for finding in findings:
                    summary.add(finding.kind)
                on_page(page)
    except (HookledgerError, OSError):
        _end_pages_after_failure(store)  # what was read is kept
        raise
    store.end_pages()


def _nothing_to_look_up(page: Page) -> Callable[[], PageFacts]:
    return lambda: NO_FACTS


def _progress(summary: RunSummary, page: Page, connector: Connector) -> ScanProgress:
    done, planned = page.slices or (None, None)
    return ScanProgress(summary.records_scanned, done, planned, connector.request_rate())


def _end_pages_after_failure(store: ScanStore) -> None:
    """Store the last page read before the source failed; a database that fails too is logged, and
    the source's error is the one raised (the resumed run scans that page again)."""
    try:
        store.end_pages()
    except SQLAlchemyError:
        log.warning("could not store the last page read before the failure", exc_info=True)
