"""Cached reads for the pages: thin wrappers over ``reconciler.ops`` with a TTL and a bounded cache.

The database URL is part of every key; actions clear the cache (``context.act``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from dashboard import context
from reconciler.inbox.conflicts import ConflictBodies, conflict_bodies
from reconciler.inbox.replay import EventDetail, event_detail
from reconciler.issues.queries import IssueFilter, count_issues
from reconciler.ops import (
    chain,
    dead_letters,
    discrepancies,
    events,
    health,
    outbox,
    overview,
    runs,
)
from reconciler.ops.timerange import TimeRange
from reconciler.outbox import store as outbox_store
from reconciler.reconcile.export import DiscrepancyFilter, count, money_impact
from reconciler.states import IssueStatus

TTL = context.ttl()


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def load_overview(
    db: str, start: datetime, end: datetime, width: int, now: datetime, sources: tuple[str, ...]
) -> overview.Overview:
    return context.read(overview.load_overview, TimeRange(start, end), width, now, sources)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def list_discrepancies(
    db: str, flt: DiscrepancyFilter, sort: str, descending: bool, limit: int
) -> tuple[list[dict[str, Any]], int]:
    with context.connect() as conn:
        rows = discrepancies.list_discrepancies(
            conn, flt, sort=sort, descending=descending, limit=limit
        )
        return rows, count(conn, flt)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def impact(db: str, flt: DiscrepancyFilter) -> list[dict[str, Any]]:
    return context.read(money_impact, flt=flt)


def discrepancy(
    discrepancy_id: int,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One discrepancy, the other fields of its record, and the object's other discrepancies."""
    with context.connect() as conn:
        row = discrepancies.discrepancy(conn, discrepancy_id)
        related = discrepancies.related_fields(conn, row["source"], row["record_key"])
        same = discrepancies.same_object(conn, row["source"], row["object_id"], discrepancy_id)
        return row, related, same


def conflict(discrepancy_id: int) -> ConflictBodies:
    return context.read(conflict_bodies, discrepancy_id)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def search_events(db: str, query: str, sources: tuple[str, ...]) -> list[dict[str, Any]]:
    return context.read(events.search_events, query, sources)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def business_rows(
    db: str, source: str, event_type: str | None, object_type: str | None, object_id: str | None
) -> list[chain.BusinessRows]:
    return chain.business_rows(
        context.engine(),
        context.settings(),
        source=source,
        event_type=event_type,
        object_type=object_type,
        object_id=object_id,
    )


def event(source: str, event_id: str) -> EventDetail:
    return context.read(event_detail, source=source, event_id=event_id)


def discrepancies_of_event(
    source: str, event_id: str, object_id: str | None
) -> list[dict[str, Any]]:
    return context.read(discrepancies.about_event, source, event_id, object_id)


@st.cache_data(ttl=TTL, max_entries=16, show_spinner=False)
def dead_groups(db: str, sources: tuple[str, ...]) -> list[dead_letters.DeadGroup]:
    return context.read(dead_letters.dead_groups, sources)


@st.cache_data(ttl=TTL, max_entries=16, show_spinner=False)
def recent_runs(db: str, sources: tuple[str, ...]) -> list[dict[str, Any]]:
    return context.read(runs.recent_runs, sources)


@st.cache_data(ttl=TTL, max_entries=4, show_spinner=False)
def cursors(db: str) -> list[dict[str, Any]]:
    return context.read(runs.cursor_positions)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def load_outbox(
    db: str, start: datetime, end: datetime, width: int, now: datetime, targets: tuple[str, ...]
) -> outbox.OutboxView:
    return context.read(outbox.load_outbox, TimeRange(start, end), width, now, targets)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def outbox_messages(
    db: str,
    targets: tuple[str, ...],
    statuses: tuple[str, ...],
    before_id: int | None,
    limit: int,
) -> tuple[list[dict[str, Any]], int]:
    with context.connect() as conn:
        rows = outbox.list_messages(
            conn, targets=targets, statuses=statuses, before_id=before_id, limit=limit
        )
        return rows, outbox.count_messages(conn, targets=targets, statuses=statuses)


def outbox_message(message_id: int) -> outbox.MessageDetail:
    return context.read(outbox.message_detail, message_id)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def messages_of_correlation(db: str, correlation_id: str) -> list[dict[str, Any]]:
    return context.read(outbox.messages_of_correlation, correlation_id)


@st.cache_data(ttl=TTL, max_entries=16, show_spinner=False)
def health_facts(
    db: str,
    now: datetime,
    sources: tuple[str, ...],
    stuck_after: float,
    reconciled: tuple[str, ...],
) -> health.HealthFacts:
    return context.read(health.health_facts, now, sources, stuck_after, reconciled)


@st.cache_data(ttl=TTL, max_entries=64, show_spinner=False)
def list_events(
    db: str, flt: events.EventFilter, after: tuple[datetime, int] | None, limit: int
) -> events.EventPage:
    return context.read(events.list_events, flt, after=after, limit=limit)


@st.cache_data(ttl=300, max_entries=8, show_spinner=False)
def event_types(db: str, sources: tuple[str, ...]) -> list[str]:
    return context.read(events.event_types, sources)


def event_exists(source: str, event_id: str) -> bool:
    return context.read(events.in_inbox, source, event_id)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def count_dead(db: str, flt: dead_letters.DeadFilter) -> int:
    return context.read(dead_letters.count_dead, flt)


@st.cache_data(ttl=TTL, max_entries=32, show_spinner=False)
def list_dead(
    db: str, flt: dead_letters.DeadFilter, before_id: int | None, limit: int
) -> list[dict[str, Any]]:
    return context.read(dead_letters.list_dead, flt, before_id=before_id, limit=limit)


def outbox_dead_since(db: str, target: str, since: datetime) -> int:
    """Read fresh each time (not cached): the count an operator confirms a recovery by."""
    return context.read(outbox_store.count_dead_since, target, since)


@st.cache_data(ttl=TTL, max_entries=8, show_spinner=False)
def open_issues(db: str) -> int:
    """Issues nobody has acknowledged yet (the bare address lands on Issues when any are)."""
    return context.read(count_issues, IssueFilter(statuses=(IssueStatus.OPEN,)))


def issues_waiting() -> bool:
    """Whether an issue nobody acknowledged is open; False when that cannot be read (the page's
    own check then says why)."""
    try:
        return open_issues(context.db_key()) > 0
    except SQLAlchemyError:
        return False
