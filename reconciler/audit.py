"""The audit trail: every operator action is recorded in ``audit_log`` in the action's transaction."""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection


def default_actor() -> str:
    """The OS user name (the dashboard passes the signed-in user instead)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "unknown")


def record_audit(
    conn: Connection,
    *,
    actor: str,
    action: str,
    source: str | None = None,
    event_id: str | None = None,
    target: str | None = None,
    reason: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    # (imported here: the CLI's parser asks this module for default_actor, not for the tables)
    from sqlalchemy import insert

    from reconciler.storage.models import AUDIT_LOG
    from reconciler.storage.types import utcnow

    conn.execute(
        insert(AUDIT_LOG).values(
            at=utcnow(),
            actor=actor[:128],
            action=action,
            source=source,
            event_id=event_id,
            target=target,
            reason=reason,
            detail=detail,
        )
    )
