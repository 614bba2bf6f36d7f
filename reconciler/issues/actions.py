"""What an operator does to an issue: acknowledge it, resolve it, retry its dead events. Each one
transaction, audited with the actor; the retry goes through the dead letters' bulk replay (counted
first, refused if the count moved, one audit entry)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError
from reconciler.issues.queries import IssueRow, get_issue
from reconciler.ops.dead_letters import DeadFilter, count_dead
from reconciler.ops.operator_actions import replay_dead_matching
from reconciler.states import IssueKind, IssueStatus
from reconciler.storage.models import INBOX_EVENTS, ISSUE_MEMBERS, ISSUES
from reconciler.storage.types import utcnow

RETRY_REASON = "retry of every dead event of an issue"


def acknowledge(engine: Engine, issue_id: int, *, actor: str) -> str:
    """Open -> acknowledged (someone is on it)."""
    with engine.begin() as conn:
        issue = get_issue(conn, issue_id)
        if issue.status is not IssueStatus.OPEN:
            raise ActionRefusedError(_already(issue))
        _set(
            conn,
            issue_id,
            IssueStatus.OPEN,
            status=IssueStatus.ACKNOWLEDGED,
            acknowledged_by=actor[:128],
            acknowledged_at=utcnow(),
        )
        record_audit(
            conn,
            actor=actor,
            action="issue.acknowledge",
            source=issue.source,
            target=f"issue:{issue_id}",
            detail={"issue": issue_id, "signature": issue.signature},
        )
    return f"issue {issue_id} acknowledged by {actor}"


def resolve(engine: Engine, issue_id: int, *, actor: str, reason: str | None = None) -> str:
    """Open or acknowledged -> resolved (it reopens when its cause comes back)."""
    why = (reason or "").strip() or None
    with engine.begin() as conn:
        issue = get_issue(conn, issue_id)
        if issue.status is IssueStatus.RESOLVED:
            raise ActionRefusedError(_already(issue))
        _set(
            conn,
            issue_id,
            issue.status,
            status=IssueStatus.RESOLVED,
            resolved_by=actor[:128],
            resolved_at=utcnow(),
            resolved_reason=why,
        )
        record_audit(
            conn,
            actor=actor,
            action="issue.resolve",
            source=issue.source,
            target=f"issue:{issue_id}",
            reason=why,
            detail={"issue": issue_id, "signature": issue.signature},
        )
    return f"issue {issue_id} resolved by {actor}"


def _already(issue: IssueRow) -> str:
    if issue.status is IssueStatus.RESOLVED:
        return f"issue {issue.id} is resolved (by {issue.resolved_by}); it reopens by itself if its cause comes back"
    return f"issue {issue.id} is already acknowledged (by {issue.acknowledged_by})"


def _set(conn: Connection, issue_id: int, expected: IssueStatus, **values: Any) -> None:
    """One conditional UPDATE: refused if another operator changed the status meanwhile."""
    i = ISSUES.c
    done = conn.execute(
        update(ISSUES).where(i.id == issue_id, i.status == expected).values(**values)
    ).rowcount
    if not done:
        raise ActionRefusedError(f"issue {issue_id} changed meanwhile: look at it again")


@dataclass(frozen=True)
class IssueDeadFilter(DeadFilter):
    """The dead events of one issue, as the dead letters' bulk replay selects them."""

    issue_id: int = 0

    def where(self) -> list[Any]:
        m = ISSUE_MEMBERS.c
        of_issue = select(m.item_id).where(
            m.issue_id == self.issue_id, m.kind == IssueKind.DEAD_EVENT
        )
        return [*super().where(), INBOX_EVENTS.c.id.in_(of_issue)]

    def describe(self) -> str:
        return f"dead events of issue {self.issue_id}"


def retry_selection(engine: Engine, issue_id: int) -> tuple[IssueRow, IssueDeadFilter, int]:
    """The issue, the selection of its dead events and how many it holds now (the dry run)."""
    with engine.connect() as conn:
        issue = get_issue(conn, issue_id)
        if issue.kind is not IssueKind.DEAD_EVENT:
            raise ActionRefusedError(
                f"issue {issue_id} groups {issue.kind.value.replace('_', ' ')}s: only dead events "
                "are retried from an issue"
            )
        flt = IssueDeadFilter(sources=(issue.source,), issue_id=issue_id)
        return issue, flt, count_dead(conn, flt)


def retry_all(
    engine: Engine,
    issue_id: int,
    *,
    actor: str,
    expected: int,
    reason: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> str:
    """Every dead event of the issue back to pending (same event ids), through the bulk replay:
    refused if the issue now holds another number than the ``expected`` one confirmed."""
    _, flt, _ = retry_selection(engine, issue_id)
    return replay_dead_matching(
        engine,
        flt,
        actor=actor,
        reason=(reason or "").strip() or RETRY_REASON,
        expected=expected,
        progress=progress,
    )
