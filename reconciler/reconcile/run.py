"""One reconciliation run of one source.

Takes the source's lease, pages the connector from the cursor, and for each page asks the store what
the inbox and the business tables hold, asks the judge what is wrong (the provider confirms a
divergence with the object's current state, no lock held meanwhile), and has the store keep the
page's findings, seen ids and cursor together. After the last page: the closing passes. A run that
dies resumes from the last page stored; memory holds one page at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import socket
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from connectors.base import Connector, Page, ScanOptions
from reconciler.config import Settings, SourceSettings
from reconciler.errors import ConfigError, HookledgerError
from reconciler.reconcile import closing, history, judge
from reconciler.reconcile.business import BoundCheck, bind_checks, facts
from reconciler.reconcile.known import known_object_ids
from reconciler.reconcile.lease import Heartbeat
from reconciler.reconcile.prefetch import Prefetch, Prepared, current_states, newer_in_inbox
from reconciler.reconcile.prepared import PreparedConnector
from reconciler.reconcile.progress import ProgressHook, ScanProgress
from reconciler.reconcile.store import (
    ClosingPasses,
    business_connection,
    check_ready,
    listed_scope,
    open_store,
)
from reconciler.reconcile.summary import RunSummary
from reconciler.sources import budget_of, run_connector_factory
from reconciler.states import RunStatus
from reconciler.storage.engine import database_error
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)
# Objects a scan remembers having judged (about 100 bytes each): an object's events lie close
# together in time, so the pages that list its older ones come soon after.
JUDGED_REMEMBERED = 50_000
__all__ = ["ProgressHook", "Reconciler", "RunSummary", "reconcilable_sources"]


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
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

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
                    self._scan(
                        source, prepared, checks, summary, now, full, since, dry_run, progress
                    )
                summary.status = RunStatus.SUCCEEDED.value
            except (HookledgerError, OSError) as exc:
                summary.status, summary.error = RunStatus.FAILED.value, str(exc)
                raise
            except SQLAlchemyError as exc:  # the database went away mid-run
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
        now: datetime,
        full: bool,
        since: datetime | None,
        dry_run: bool,
        progress: ProgressHook | None,
    ) -> None:
        grace = timedelta(seconds=self.cfg.grace_seconds)
        lookback = (now - since) if since else timedelta(hours=source.initial_lookback_hours)
        options = ScanOptions(
            now=now,
            initial_lookback=lookback,
            full=full or since is not None,
            overlap=timedelta(seconds=self.cfg.overlap_seconds),
            known_objects=functools.partial(
                known_object_ids, self.engine, source.name, now - lookback
            ),
        )
        timeout = self.settings.business.statement_timeout_seconds
        prefetch: Prefetch | None = None
        with contextlib.ExitStack() as cleanup, self.engine.connect() as conn:
            store = open_store(conn, source.name, summary.run_id, now, dry_run=dry_run)
            try:
                cursor = store.begin(full=options.full)
                connector = prepared.get()  # (its build overlapped the database work so far)
                at_once = budget_of(source).concurrency
                page_judge = _PageJudge(connector, checks, now - grace, at_once)
                if checks:  # a sliced scan's fetchers ask for current states (reconcile.prefetch)
                    prefetch = Prefetch(
                        connector,
                        checks,
                        self.business_engine,
                        inbox_engine=self.engine,
                        cutoff=now - grace,
                        timeout_seconds=timeout,
                        asks_at_once=at_once,
                    )
                    cleanup.callback(prefetch.close)
                    options = dataclasses.replace(options, prepare=prefetch)
                with (
                    business_connection(store, self.business_engine, timeout)
                    if checks
                    else contextlib.nullcontext(conn)
                ) as biz:
                    try:
                        # closed on the way out, also on a failure: its request ahead stops with it
                        with _closing(connector.pages(cursor, options)) as pages:
                            for page in pages:
                                self._page(store, biz, page_judge, page, summary)
                                if progress:
                                    progress(source.name, _progress(summary, page, connector))
                    except (HookledgerError, OSError):
                        _end_pages_after_failure(store)  # what was read is kept
                        raise
                    store.end_pages()
                    window = store.window()[0]
                    scope = listed_scope(connector.listing)
                    caps = connector.capabilities
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
                    closing.late_orphans(
                        store,
                        connector,
                        summary,
                        window=window,
                        scope=scope,
                        grace=grace,
                    )
            finally:
                store.close()

    def _page(
        self,
        store: ClosingPasses,
        biz: Connection,
        page_judge: _PageJudge,
        page: Page,
        summary: RunSummary,
    ) -> None:
        """One page: looked up, judged, stored with its cursor (see the module)."""
        findings = page_judge.judge(store, biz, page.records, page.prepared)
        if page.relisted:
            store.relisted(page.relisted)
        store.write(page.records, findings, page.cursor)
        if biz is not store.conn and biz.in_transaction():
            biz.rollback()  # no read transaction held open on the business database
        for f in findings:
            summary.add(f.kind)
        summary.account(page)


class _PageJudge:
    """A scan's page judgement: the store's facts to the judge, the provider asked for the current
    state of what the snapshot says diverged (each object once a scan)."""

    def __init__(
        self,
        connector: Connector,
        checks: Sequence[BoundCheck],
        cutoff: datetime,
        asks_at_once: int = 1,
    ):
        self.connector, self.checks, self.cutoff = connector, checks, cutoff
        self.asks_at_once = asks_at_once  # current states asked together (the source's budget)
        self.source = judge.Source(connector.capabilities, connector.retention)
        self.fetched: dict[judge.ObjectKey, Mapping[str, Any] | None] = {}
        # when each recently judged object's record was from, per check (checks see different
        # event types of one object): a page listing an older record of one (a newest-first scan
        # lists an object's older events on later pages) is not judged by that check again, nor
        # its older snapshot asked of the provider
        self.judged_at: OrderedDict[tuple[int, str, str], datetime] = OrderedDict()

    def judge(
        self,
        store: ClosingPasses,
        biz: Connection,
        records: Sequence[Any],
        prepared: Prepared | None = None,
    ) -> list[judge.Finding]:
        stale: frozenset[judge.ObjectKey] | set[judge.ObjectKey] = frozenset()
        if prepared is not None:  # what a fetcher found out already
            self.fetched.update(prepared.current)
            stale = prepared.stale
        inbox = store.lookup(records)  # every event id is remembered; only settled ones judged
        settled = judge.settled(records, self.cutoff)
        configs = [c.check for c in self.checks]
        found = judge.missing(settled, inbox, self.source, configs)
        if not self.checks:
            return found
        received = judge.received(settled, inbox)
        for check in self.checks:
            every = self._not_judged_newer(check.index, judge.latest_records(check.check, settled))
            if not every:
                continue
            rows = facts(biz, check, sorted(every))
            latest = judge.judged(
                every, judge.received_objects(check.check, settled, received), rows
            )
            latest = _without(latest, stale)
            ask = [
                k
                for k in judge.to_confirm(check.check, latest, rows, self.source)
                if k not in self.fetched
            ]
            if ask:  # (prefetch.newer_in_inbox: a stale snapshot is judged where the newer one is)
                newer = newer_in_inbox(
                    store.conn, self.connector.source, {k: latest[k[1]] for k in ask}
                )
                latest, ask = _without(latest, newer), [k for k in ask if k not in newer]
            if ask:
                store.idle()  # the provider's latency is never spent holding a lock
                self.fetched.update(current_states(self.connector, ask, self.asks_at_once))
            found += judge.business(check.check, latest, rows, self.source, self.fetched)
            self._remember(check.index, latest.values())
        return found

    def _not_judged_newer(self, check: int, latest: dict[str, Any]) -> dict[str, Any]:
        """``latest`` without the objects this check judged already on a newer record."""
        out = {}
        for object_id, record in latest.items():
            at = self.judged_at.get((check, record.object_type or "", object_id))
            if at is None or record.occurred_at is None or record.occurred_at >= at:
                out[object_id] = record
        return out

    def _remember(self, check: int, records: Iterable[Any]) -> None:
        for record in records:
            if record.occurred_at is None or record.object_id is None:
                continue
            key = (check, record.object_type or "", record.object_id)
            at = self.judged_at.pop(key, None)
            self.judged_at[key] = record.occurred_at if at is None else max(at, record.occurred_at)
        while len(self.judged_at) > JUDGED_REMEMBERED:  # the oldest remembered go first
            self.judged_at.popitem(last=False)


def _without(
    latest: dict[str, Any], keys: frozenset[judge.ObjectKey] | set[judge.ObjectKey]
) -> dict[str, Any]:
    """``latest`` (object id -> record) without these objects."""
    if not keys:
        return latest
    return {o: r for o, r in latest.items() if (r.object_type or "", o) not in keys}


def _progress(summary: RunSummary, page: Page, connector: Connector) -> ScanProgress:
    done, planned = page.slices or (None, None)
    return ScanProgress(summary.records_scanned, done, planned, connector.request_rate())


def _end_pages_after_failure(store: ClosingPasses) -> None:
    """Store the last page read before the source failed; a database that fails too is logged, and
    the source's error is the one raised (the resumed run scans that page again)."""
    try:
        store.end_pages()
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
