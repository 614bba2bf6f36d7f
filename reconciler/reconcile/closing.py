"""After a scan's last page: orphans, stuck and dead (the store's passes), the re-check of what is
open (the judge's rules on the store's facts), and the orphan watermark's per-event checks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection

from connectors.base import Connector
from connectors.errors import ConnectorError
from connectors.errors import NotFoundError as ConnectorNotFound
from reconciler.reconcile import judge
from reconciler.reconcile.business import BoundCheck, facts
from reconciler.reconcile.store import CLOCK_SKEW, ScanStore, Window
from reconciler.reconcile.summary import RunSummary
from reconciler.states import DiscrepancyKind

log = logging.getLogger(__name__)
# Late webhook events asked of the provider one by one in a run (the rest wait for the next run).
LATE_ORPHAN_CHECKS = 500


def after_pages(
    store: ScanStore,
    biz: Connection,
    checks: Sequence[BoundCheck],
    summary: RunSummary,
    *,
    lists_events: bool,
    scope: Any,
    grace: timedelta,
    stuck_after: timedelta,
) -> None:
    """The passes over the whole inbox, in one transaction."""
    with store.scan.transaction():
        window, seen_rows = store.passes.window()
        # What is open before these passes: a kind with none has nothing to resolve (what the
        # passes add was seen in this run, so is not resolvable).
        open_kinds = store.passes.open_kinds()
        if window is not None and lists_events:
            summary.add(
                DiscrepancyKind.ORPHANED, store.passes.orphans(window, seen_rows, grace, scope)
            )
        stuck, dead = store.passes.stuck_and_dead(stuck_after)
        summary.add(DiscrepancyKind.STUCK, stuck)
        summary.add(DiscrepancyKind.DEAD, dead)
        summary.resolved += store.passes.resolve_set_kinds(open_kinds)
        if open_kinds & set(judge.JUDGED_KINDS):
            summary.resolved += resolve_judged(store, biz, checks, open_kinds)
        if lists_events:  # (read before the seen ids go)
            summary.unlisted_since = store.passes.first_unlisted_in_grace(grace, scope)
        store.passes.forget_seen()
        delays = store.passes.detection_delays()
        if delays is not None:
            summary.detection_delay_median_seconds, summary.detection_delay_max_seconds = delays


def resolve_judged(
    store: ScanStore,
    biz: Connection,
    checks: Sequence[BoundCheck],
    open_kinds: set[DiscrepancyKind],
) -> int:
    """Open missing and business discrepancies not seen again this run, in batches: the facts of
    each batch looked up once, the judge's fix rules applied, what is fixed resolved."""
    kinds = [k for k in judge.JUDGED_KINDS if k in open_kinds]
    by_table = {c.check.table: c for c in checks}
    resolved, last_id = 0, 0
    while batch := store.passes.open_judged(kinds, last_id):
        last_id = batch[-1].id
        missing = [b for b in batch if b.kind == DiscrepancyKind.MISSING]
        events, objects = store.passes.inbox_presence(
            [b.event_id for b in missing if b.event_id],
            [(b.object_type or "", b.object_id) for b in missing if not b.event_id and b.object_id],
        )
        arrived = [
            b.id
            for b in missing
            if judge.missing_fixed(b.event_id, (b.object_type or "", b.object_id), events, objects)
        ]
        resolved += store.passes.resolve(arrived, "received")
        fixed: list[int] = []
        for table, check in by_table.items():
            mine = [
                b
                for b in batch
                if b.kind in judge.BUSINESS_KINDS
                and (b.detail or {}).get("table") == table
                and b.object_id
            ]
            if not mine:
                continue
            found = facts(biz, check, sorted({b.object_id for b in mine}))
            fixed += [
                b.id
                for b in mine
                if judge.business_fixed(b.kind, b.field, b.source_value, b.object_id, found)
            ]
        resolved += store.passes.resolve(fixed, "fixed in the business table")
    return resolved


def late_orphans(
    store: ScanStore,
    connector: Connector,
    summary: RunSummary,
    *,
    window: Window | None,
    scope: Any,
    grace: timedelta,
) -> None:
    """Webhook events received since the source's orphan watermark that this scan's window does not
    cover (the scan listed nothing new, they arrived long after they occurred, or they are newer
    than anything it listed): each is asked of
    the provider by id, at most ``LATE_ORPHAN_CHECKS`` a run, and one the provider does not know is
    an orphan. The watermark then moves to the grace period's edge, or to just before the first
    event that could not be asked. The provider is asked outside any transaction."""
    step = timedelta(microseconds=1)
    # Settled up to now, except events inside the grace period the scan did not list yet: the
    # next run checks from the oldest of those (events it lists are settled again by listing).
    unlisted = summary.unlisted_since
    settled = store.scan.now if unlisted is None else unlisted - step
    with store.scan.transaction():
        checked_until = store.passes.orphan_watermark()
        if checked_until is None:
            # The source's first checked run: its window's anti-join judged what the listing
            # covered; what is older lies past the provider's retention and is not asked. What is
            # newer than its newest record is asked by id, like any later run's.
            if window is None or window[1] is None:
                if not store.scan.dry_run:
                    store.passes.save_orphan_watermark(settled)
                return
            checked_until = window[1] - CLOCK_SKEW
        candidates = store.passes.late_orphan_candidates(
            checked_until, grace, window, scope, LATE_ORPHAN_CHECKS + 1
        )
    watermark = settled
    if len(candidates) > LATE_ORPHAN_CHECKS:
        watermark = min(watermark, candidates[LATE_ORPHAN_CHECKS][1] - step)
        candidates = candidates[:LATE_ORPHAN_CHECKS]
    unknown = []
    for event_id, received_at in candidates:
        try:
            connector.fetch_event(event_id)
        except ConnectorNotFound:
            unknown.append(event_id)
        except ConnectorError as exc:
            log.warning(
                "could not ask the source about event %s (%s); it is checked next run",
                event_id,
                exc.__class__.__name__,
                extra={"source": summary.source},
            )
            watermark = min(watermark, received_at - step)
            break
    with store.scan.transaction():
        summary.add(DiscrepancyKind.ORPHANED, store.passes.orphans_by_id(unknown))
        if not store.scan.dry_run:
            store.passes.save_orphan_watermark(max(watermark, checked_until))
