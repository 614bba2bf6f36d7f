"""Pausing and resuming an outbox target (Svix's app portal "disable endpoint"): an operator's
action with a reason, in the caller's transaction, audited. While a target is paused its messages
stay as they are (pending, failed) and no publisher claims them (``store.claim``); resuming makes
them due again where they were. One row per paused target: the database decides "already paused"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, delete, select

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import OUTBOX_PAUSES
from reconciler.storage.types import utcnow


@dataclass(frozen=True)
class Pause:
    target: str
    paused_by: str
    paused_at: datetime
    reason: str


def paused(conn: Connection) -> dict[str, Pause]:
    """Every paused target, by name."""
    rows = conn.execute(select(OUTBOX_PAUSES).order_by(OUTBOX_PAUSES.c.target))
    return {r.target: Pause(r.target, r.paused_by, r.paused_at, r.reason) for r in rows}


def pause(conn: Connection, target: str, *, actor: str, reason: str) -> Pause:
    """Pause ``target``; refused when it is paused already (the first pause's who and why stay)."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    row = Pause(target, actor[:128], utcnow(), why)
    added = conn.execute(
        insert_for(conn, OUTBOX_PAUSES)
        .values(target=row.target, paused_by=row.paused_by, paused_at=row.paused_at, reason=why)
        .on_conflict_do_nothing(index_elements=["target"])
        .returning(OUTBOX_PAUSES.c.target)
    ).first()
    if added is None:
        held = paused(conn).get(target)
        since = (
            f" (by {held.paused_by} at {held.paused_at.isoformat(timespec='seconds')}: "
            f"{held.reason})"
            if held
            else ""
        )
        raise ActionRefusedError(f"outbox target '{target}' is already paused{since}")
    record_audit(
        conn, actor=actor, action="outbox.pause", target=f"outbox:{target}"[:255], reason=why
    )
    return row


def resume(conn: Connection, target: str, *, actor: str, reason: str) -> Pause:
    """Resume ``target``: its messages are due again. Refused when it is not paused."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    gone = conn.execute(
        delete(OUTBOX_PAUSES)
        .where(OUTBOX_PAUSES.c.target == target)
        .returning(OUTBOX_PAUSES.c.paused_by, OUTBOX_PAUSES.c.paused_at, OUTBOX_PAUSES.c.reason)
    ).first()
    if gone is None:
        raise ActionRefusedError(f"outbox target '{target}' is not paused")
    record_audit(
        conn,
        actor=actor,
        action="outbox.resume",
        target=f"outbox:{target}"[:255],
        reason=why,
        detail={
            "paused_by": gone.paused_by,
            "paused_at": gone.paused_at.isoformat(),
            "paused_reason": gone.reason,
        },
    )
    return Pause(target, gone.paused_by, gone.paused_at, gone.reason)
