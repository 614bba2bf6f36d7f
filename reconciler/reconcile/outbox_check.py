"""The outgoing side's reconciliation: outbox messages unsent past ``stuck_after_seconds``
(``outbox_stuck``) and dead ones (``outbox_dead``), as discrepancies of the source
``outbox:<target>`` (a name no configured source can have: source names allow no colon).

One run per target, recorded in ``recon_runs`` with the target's lease like a source's run; in one
transaction each kind is upserted by natural key (the message's key) straight from the outbox
(``INSERT ... SELECT``), and what was open and not seen again is resolved (sent, or replayed and
on its way). They are exported, resolved, ignored and replayed like the others; a replay of an
``outbox_dead`` one replays its message (``object_id`` is the message's id).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, String, and_, cast, func, literal, select, update
from sqlalchemy.exc import SQLAlchemyError

from reconciler.config import Settings
from reconciler.kinds import FoundBy, kinds
from reconciler.reconcile import history
from reconciler.reconcile.summary import RunSummary
from reconciler.states import OUTBOX_SOURCE_PREFIX, OUTBOX_UNSENT
from reconciler.storage.dialect import insert_for
from reconciler.storage.failures import database_error
from reconciler.storage.models import (
    DISCREPANCIES,
    OUTBOX,
    DiscrepancyKind,
    DiscrepancyStatus,
    OutboxStatus,
    RunStatus,
)
from reconciler.storage.upserts import seen_again

PREFIX = OUTBOX_SOURCE_PREFIX
KINDS = kinds(found_by=FoundBy.OUTBOX)
UNSENT = OUTBOX_UNSENT


def source_name(target: str) -> str:
    return f"{PREFIX}{target}"


def is_outbox(name: str) -> bool:
    return name.startswith(PREFIX)


def outbox_sources(conn: Connection, settings: Settings) -> list[str]:
    """What the nightly run checks: every configured target, and any other target that still has
    unsent or dead messages (one whose configuration was removed: nothing will send them)."""
    waiting = conn.execute(
        select(OUTBOX.c.target).where(OUTBOX.c.status.in_([*UNSENT, OutboxStatus.DEAD])).distinct()
    ).scalars()
    names = {t.name for t in settings.outbox.targets} | {str(t) for t in waiting}
    return [source_name(n) for n in sorted(names)]


def _matching(kind: DiscrepancyKind, target: str, stuck_before: datetime) -> Any:
    if kind is DiscrepancyKind.OUTBOX_DEAD:
        return and_(OUTBOX.c.target == target, OUTBOX.c.status == OutboxStatus.DEAD)
    return and_(
        OUTBOX.c.target == target,
        OUTBOX.c.status.in_(UNSENT),
        OUTBOX.c.queued_at < stuck_before,
    )


def _upsert(
    conn: Connection, kind: DiscrepancyKind, name: str, where: Any, run_id: str, now: datetime
) -> int:
    d = DISCREPANCIES
    cause = OUTBOX.c.error_class if kind is DiscrepancyKind.OUTBOX_DEAD else OUTBOX.c.status
    columns = {
        "source": literal(name),
        "kind": literal(kind.value),
        "record_key": OUTBOX.c.key,
        "field": literal(""),
        "event_id": OUTBOX.c.event_id,
        "object_type": literal("outbox_message"),
        "object_id": cast(OUTBOX.c.id, String),
        "local_value": OUTBOX.c.last_error,
        "occurred_at": OUTBOX.c.created_at,
        "first_seen_at": literal(now, d.c.first_seen_at.type),
        "last_seen_at": literal(now, d.c.last_seen_at.type),
        "first_run_id": literal(run_id),
        "last_run_id": literal(run_id),
        "status": literal(DiscrepancyStatus.OPEN.value),
        "cause": func.coalesce(cast(cause, String), literal("")),
    }
    query = select(*columns.values()).where(where)
    stmt = seen_again(
        insert_for(conn, d).from_select(list(columns), query), "local_value", "object_id"
    )
    return len(conn.execute(stmt.returning(d.c.id)).all())


def check_outbox(
    engine: Engine,
    settings: Settings,
    name: str,
    *,
    trigger: str,
    owner: str,
    now: datetime,
    dry_run: bool = False,
    slot: datetime | None = None,
    quiet: bool = False,
) -> RunSummary:
    """One run over one target's messages (see the module)."""
    target = name[len(PREFIX) :]
    summary = RunSummary(str(uuid.uuid4()), name, RunStatus.RUNNING.value, quiet=quiet)
    stuck_before = now - timedelta(seconds=settings.reconcile.stuck_after_seconds)
    ttl = timedelta(seconds=settings.reconcile.lease_seconds)
    if not dry_run:
        with engine.begin() as conn:
            if not history.start(conn, summary, owner, trigger, now, ttl, slot):
                return summary
    try:
        with engine.begin() as conn:
            for kind in KINDS:
                where = _matching(kind, target, stuck_before)
                if dry_run:
                    n = conn.execute(select(func.count()).select_from(OUTBOX).where(where))
                    summary.add(kind, int(n.scalar_one()))
                else:
                    summary.add(kind, _upsert(conn, kind, name, where, summary.run_id, now))
            summary.records_scanned = sum(summary.found.values())
            if not dry_run:
                summary.resolved = _resolve_not_seen(conn, name, summary.run_id, now)
        summary.status = RunStatus.SUCCEEDED.value
    except SQLAlchemyError as exc:  # the database went away mid-run, or a pool timed out
        error = database_error(engine.url.render_as_string(hide_password=True), exc)
        summary.status, summary.error = RunStatus.FAILED.value, str(error)
        raise error from None
    finally:
        if not dry_run:
            with engine.begin() as conn:
                history.finish(conn, summary, owner, now)
    return summary


def _resolve_not_seen(conn: Connection, name: str, run_id: str, now: datetime) -> int:
    d = DISCREPANCIES
    done = conn.execute(
        update(d)
        .where(
            d.c.source == name,
            d.c.status == DiscrepancyStatus.OPEN,
            d.c.kind.in_(list(KINDS)),
            d.c.last_run_id != run_id,
        )
        .values(
            status=DiscrepancyStatus.RESOLVED,
            resolution="sent, replayed or gone",
            resolved_at=now,
        )
    )
    return int(done.rowcount or 0)
