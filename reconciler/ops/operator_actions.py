"""Operator actions as the dashboard calls them: each one transaction, each audited with the actor.

The CLI's commands call the same underlying functions (``inbox.replay.replay_event``,
``reconcile.repair``); these wrappers add what a button needs: a required reason, building and
closing the connector, and a one-line message for the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine

from reconciler.audit import record_audit
from reconciler.config import Settings
from reconciler.errors import ActionRefusedError, ConfigError, HookledgerError
from reconciler.inbox import conflicts
from reconciler.inbox.replay import replay_event
from reconciler.ops.dead_letters import DeadFilter, replay_many, replay_matching
from reconciler.ops.display import count as count_of
from reconciler.reconcile import repair
from reconciler.reconcile.export import DiscrepancyFilter, count
from reconciler.reconcile.progress import ProgressHook
from reconciler.reconcile.run import RunSummary
from reconciler.reconcile.sweep import reconcile_one, reconciler_for
from reconciler.sources import run_connector_factory
from reconciler.storage.models import DiscrepancyStatus


def _reason(reason: str | None) -> str:
    if not reason or not reason.strip():
        raise ActionRefusedError("a reason is required")
    return reason.strip()


def replay(engine: Engine, source: str, event_id: str, *, actor: str, reason: str) -> str:
    why = _reason(reason)
    with engine.begin() as conn:
        result = replay_event(conn, source=source, event_id=event_id, actor=actor, reason=why)
    return f"{source} {event_id}: {result.previous_status} → pending (replay, same event id)"


def replay_selection(
    engine: Engine, keys: Sequence[tuple[str, str]], *, actor: str, reason: str
) -> str:
    why = _reason(reason)
    if not keys:
        raise ActionRefusedError("nothing selected")
    with engine.begin() as conn:
        n = replay_many(conn, keys, actor=actor, reason=why)
    return f"{n} events put back to pending"


def replay_dead_matching(
    engine: Engine,
    flt: DeadFilter,
    *,
    actor: str,
    reason: str,
    expected: int,
    progress: Callable[[int, int], None] | None = None,
) -> str:
    """Replay every dead event of a selection (the count the operator confirmed), one audit entry."""
    why = _reason(reason)
    n = replay_matching(engine, flt, actor=actor, reason=why, expected=expected, progress=progress)
    return (
        f"{count_of(n, 'event')} put back to pending ({flt.describe()}; same event ids; one audit "
        "entry)"
    )


def set_status_matching(
    engine: Engine,
    flt: DiscrepancyFilter,
    status: DiscrepancyStatus,
    *,
    actor: str,
    reason: str,
    expected: int,
) -> str:
    """Resolve or ignore every discrepancy a filter matches, in one transaction, one audit entry;
    refused if the match count moved since the operator confirmed it."""
    why = _reason(reason)
    with engine.begin() as conn:
        now = count(conn, flt)
        if now != expected:
            raise ActionRefusedError(
                f"the filter now matches {now:,} discrepancies, not the {expected:,} confirmed: "
                "count again and confirm"
            )
        if now == 0:
            raise ActionRefusedError("no discrepancy matches the filter")
        n = repair.set_status_bulk(conn, flt, status, actor=actor, reason=why)
    return f"{n:,} discrepancies marked {status.value} (one audit entry)"


def set_discrepancy_status(
    engine: Engine, discrepancy_id: int, status: DiscrepancyStatus, *, actor: str, reason: str
) -> str:
    why = _reason(reason)
    with engine.begin() as conn:
        repair.set_status(conn, discrepancy_id, status, actor=actor, reason=why)
    return f"discrepancy {discrepancy_id} marked {status.value}"


def keep_stored_version(engine: Engine, discrepancy_id: int, *, actor: str, reason: str) -> str:
    why = _reason(reason)
    with engine.begin() as conn:
        n = conflicts.keep_stored(conn, discrepancy_id, actor=actor, reason=why)
    return f"kept the stored version; {n} conflicting fields resolved"


def apply_later_version(engine: Engine, discrepancy_id: int, *, actor: str, reason: str) -> str:
    why = _reason(reason)
    with engine.begin() as conn:
        result = conflicts.apply_later(conn, discrepancy_id, actor=actor, reason=why)
    return (
        f"{result.source} {result.event_id}: {result.previous_status} → pending with the later "
        f"delivery's body (same event id); {result.resolved} conflicting fields resolved"
    )


def backfill_event(
    engine: Engine,
    settings: Settings,
    source_name: str,
    event_id: str,
    *,
    actor: str,
    reason: str,
    redeliver: bool = False,
) -> str:
    why = _reason(reason)
    source = settings.source(source_name)
    if source is None:
        raise ConfigError(f"no source named '{source_name}' in the configuration")
    connector = run_connector_factory(settings)(source)
    try:
        result = repair.backfill(
            engine, source, connector, event_id, actor=actor, reason=why, redeliver=redeliver
        )
    finally:
        connector.close()
    closed = "; its missing discrepancy is resolved" if result.missing_resolved else ""
    return f"{result.source} {result.event_id}: {result.outcome}{closed}"


def reconcile_now(
    engine: Engine,
    settings: Settings,
    source_name: str,
    *,
    actor: str,
    progress: ProgressHook | None = None,
) -> RunSummary:
    """One reconciliation of one source (trigger ``dashboard``), audited with who asked for it."""
    try:
        with reconciler_for(engine, settings) as reconciler:
            summary = reconcile_one(reconciler, source_name, trigger="dashboard", progress=progress)
    except HookledgerError as exc:  # a failed run was asked for too: audited with its reason
        _audit_reconcile(
            engine, actor, source_name, None, {"status": "failed", "error": str(exc)[:2000]}
        )
        raise
    detail = {"status": summary.status, "scanned": summary.records_scanned}
    _audit_reconcile(engine, actor, source_name, f"run:{summary.run_id}", detail)
    return summary


def _audit_reconcile(
    engine: Engine, actor: str, source: str, target: str | None, detail: dict[str, Any]
) -> None:
    with engine.begin() as conn:
        record_audit(
            conn, actor=actor, action="reconcile", source=source, target=target, detail=detail
        )
