"""The discrepancies' upsert by natural key (source, kind, record key, field): written by the
reconciler's scans and passes and by the receiver (conflicting redeliveries) alike."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, literal

from reconciler.storage.models import DISCREPANCIES, DiscrepancyStatus


def reopened() -> Any:
    """Seen again: open, unless an operator chose to ignore it."""
    column = DISCREPANCIES.c.status
    return case(
        (column == DiscrepancyStatus.IGNORED, column),
        else_=literal(DiscrepancyStatus.OPEN.value),
    )


def on_natural_key(stmt: Any) -> Any:
    """An INSERT into discrepancies made an upsert by natural key (see ``upsert_findings``)."""
    d = DISCREPANCIES
    resolved = d.c.status == DiscrepancyStatus.RESOLVED
    return stmt.on_conflict_do_update(
        index_elements=["source", "kind", "record_key", "field"],
        set_={
            **{
                name: getattr(stmt.excluded, name)
                for name in (
                    "last_seen_at",
                    "last_run_id",
                    "source_value",
                    "local_value",
                    "cause",
                    "amount",
                    "currency",
                    "recover_by",
                    "detail",
                )
            },
            "status": reopened(),
            "resolution": case((resolved, literal(None)), else_=d.c.resolution),
            "resolved_at": case((resolved, literal(None)), else_=d.c.resolved_at),
        },
    )


def seen_again(stmt: Any, *refreshed: str) -> Any:
    """An ``INSERT ... SELECT`` into discrepancies (a set pass: stuck, dead, orphaned, the outbox's)
    made an upsert by natural key: seen again, a row keeps its first sighting, takes this run as its
    last, reopens unless ignored, and refreshes its cause and the ``refreshed`` columns."""
    return stmt.on_conflict_do_update(
        index_elements=["source", "kind", "record_key", "field"],
        set_={
            "last_seen_at": stmt.excluded.last_seen_at,
            "last_run_id": stmt.excluded.last_run_id,
            "status": reopened(),
            "cause": stmt.excluded.cause,
            **{name: getattr(stmt.excluded, name) for name in refreshed},
        },
    )
