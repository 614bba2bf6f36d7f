"""Issues on SQLite and PostgreSQL: failures grouped by kind, source, type and signature; counted
once however often they are read; acknowledged, resolved, reopened and auto-resolved, audited;
retried through the dead letters' bulk replay."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import count

import pytest
from sqlalchemy import Engine, func, insert, select

from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.issues import actions
from reconciler.issues.queries import IssueFilter, get_issue, list_issues, members, trend
from reconciler.issues.refresh import refresh
from reconciler.states import IssueKind, IssueStatus
from reconciler.storage.models import (
    AUDIT_LOG,
    DISCREPANCIES,
    INBOX_EVENTS,
    ISSUE_MARKS,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
)
from reconciler.storage.types import utcnow

_ids = count(1)


def dead_event(
    engine: Engine,
    at: datetime,
    error: str,
    *,
    source: str = "stripe",
    event_type: str = "invoice.paid",
) -> str:
    """An event that died at ``at`` with ``error``, and the attempt that dead-lettered it."""
    event_id = f"evt_{next(_ids)}x"
    with engine.begin() as conn:
        row_id = conn.execute(
            insert(INBOX_EVENTS)
            .values(
                source=source,
                event_id=event_id,
                event_type=event_type,
                body=json.dumps({"id": event_id}).encode(),
                headers={},
                received_at=at - timedelta(seconds=5),
                origin="webhook",
                status="dead",
                attempts=1,
                last_error=error,
                error_class="permanent",
                correlation_id=f"c-{event_id}",
            )
            .returning(INBOX_EVENTS.c.id)
        ).scalar_one()
        conn.execute(
            insert(PROCESSING_ATTEMPTS).values(
                inbox_event_id=row_id,
                source=source,
                attempt=1,
                worker="w",
                started_at=at - timedelta(seconds=1),
                finished_at=at,
                outcome="dead",
                error_class="permanent",
                error=error,
            )
        )
    return event_id


def issues(engine: Engine, **flt: object) -> list:  # type: ignore[type-arg]
    with engine.connect() as conn:
        return list_issues(conn, IssueFilter(**flt))  # type: ignore[arg-type]


def audits(engine: Engine, action: str) -> list[dict[str, object]]:
    with engine.connect() as conn:
        rows = conn.execute(select(AUDIT_LOG).where(AUDIT_LOG.c.action == action))
        return [dict(r._mapping) for r in rows]


def test_failures_that_differ_only_in_values_are_one_issue(engine: Engine) -> None:
    now = utcnow()
    for n, minutes in enumerate((30, 20, 10)):
        dead_event(engine, now - timedelta(minutes=minutes), f"no customer cus_{n}Ab for 'x{n}'")
    dead_event(engine, now - timedelta(minutes=5), "no customer cus_9 for 'y'", event_type="other")
    dead_event(engine, now - timedelta(minutes=5), "ledger down", source="github")

    report = refresh(engine, now)

    found = {(i.source, i.event_type): i for i in issues(engine)}
    assert sorted(found) == [
        ("github", "invoice.paid"),
        ("stripe", "invoice.paid"),
        ("stripe", "other"),
    ]
    main = found[("stripe", "invoice.paid")]
    assert (main.kind, main.count, main.status) == (IssueKind.DEAD_EVENT, 3, IssueStatus.OPEN)
    assert main.signature == "no customer <n> for <str>"
    assert main.first_seen == now - timedelta(minutes=30)
    assert main.last_seen == now - timedelta(minutes=10)
    assert main.sample_error == "no customer cus_2Ab for 'x2'"  # the newest, as it was
    assert sorted(report.opened) == sorted(i.id for i in found.values()) and report.added == 5


def test_a_failure_read_again_counts_once_and_pages_move_the_mark(engine: Engine) -> None:
    now = utcnow()
    for k in range(5):
        dead_event(engine, now - timedelta(minutes=50 - k), f"timeout after {k}s")
    first = refresh(engine, now, page_size=2)
    again = refresh(engine, now, page_size=2)  # re-reads the overlap: nothing new
    (issue,) = issues(engine)
    assert issue.count == 5 and first.added == 5 and again.added == 0 and again.opened == []
    with engine.connect() as conn:
        mark = conn.execute(select(ISSUE_MARKS.c.upto).where(ISSUE_MARKS.c.kind == "dead_event"))
        assert mark.scalar_one() == now - timedelta(minutes=46)
    dead_event(engine, now - timedelta(minutes=1), "timeout after 9s")
    assert refresh(engine, now).added == 1
    assert issues(engine)[0].count == 6


def test_ack_resolve_reopen_are_audited(engine: Engine) -> None:
    now = utcnow()
    dead_event(engine, now - timedelta(minutes=3), "boom 1")
    refresh(engine, now)
    (issue,) = issues(engine)

    assert "acknowledged by ana" in actions.acknowledge(engine, issue.id, actor="ana")
    with pytest.raises(ActionRefusedError, match="already acknowledged"):
        actions.acknowledge(engine, issue.id, actor="bo")
    actions.resolve(engine, issue.id, actor="bo", reason="fixed the plan table")
    with engine.connect() as conn:
        done = get_issue(conn, issue.id)
    assert (done.status, done.acknowledged_by, done.resolved_by) == (
        IssueStatus.RESOLVED,
        "ana",
        "bo",
    )
    assert done.resolved_reason == "fixed the plan table"
    with pytest.raises(ActionRefusedError, match="is resolved"):
        actions.resolve(engine, issue.id, actor="bo")
    with pytest.raises(NoSuchRecordError):
        actions.acknowledge(engine, issue.id + 99, actor="bo")

    later = utcnow() + timedelta(seconds=1)
    dead_event(engine, later, "boom 2")  # the cause comes back
    report = refresh(engine, later)
    with engine.connect() as conn:
        back = get_issue(conn, issue.id)
    assert report.reopened == [issue.id] and report.opened == []
    assert (back.status, back.reopened_count, back.count) == (IssueStatus.OPEN, 1, 2)
    assert back.resolved_by is None and back.acknowledged_by is None
    assert [a["actor"] for a in audits(engine, "issue.acknowledge")] == ["ana"]
    assert [a["reason"] for a in audits(engine, "issue.resolve")] == ["fixed the plan table"]
    assert [a["actor"] for a in audits(engine, "issue.reopen")] == ["hookledger"]


def test_auto_resolve_waits_for_quiet_and_for_the_dead_events_to_be_replayed(
    engine: Engine,
) -> None:
    now = utcnow()
    for k in range(3):
        dead_event(engine, now - timedelta(hours=30, minutes=k), f"unknown plan 'p{k}'")
    dead_event(engine, now - timedelta(hours=1), "other failure")  # not quiet yet
    report = refresh(engine, now, auto_resolve_after=timedelta(hours=24))
    assert report.resolved == []  # quiet, but its events are still dead
    quiet = next(i for i in issues(engine) if i.count == 3)

    _, _, n = actions.retry_selection(engine, quiet.id)
    assert n == 3
    with pytest.raises(ActionRefusedError, match="not the 2 confirmed"):
        actions.retry_all(engine, quiet.id, actor="ana", expected=2)
    message = actions.retry_all(engine, quiet.id, actor="ana", expected=3)
    assert "3 events put back to pending" in message
    (bulk,) = audits(engine, "replay.bulk")
    assert bulk["actor"] == "ana" and bulk["detail"]["count"] == 3  # type: ignore[index]
    with engine.connect() as conn:
        dead = conn.execute(
            select(func.count()).where(INBOX_EVENTS.c.status == "dead")
        ).scalar_one()
    assert dead == 1  # the other issue's event was not touched

    report = refresh(engine, now, auto_resolve_after=timedelta(hours=24))
    assert report.resolved == [quiet.id]
    with engine.connect() as conn:
        done = get_issue(conn, quiet.id)
    assert (done.status, done.resolved_by) == (IssueStatus.RESOLVED, "hookledger")
    assert [a["target"] for a in audits(engine, "issue.resolve")] == [f"issue:{quiet.id}"]
    with pytest.raises(ActionRefusedError, match="nothing to replay"):
        actions.retry_all(engine, quiet.id, actor="ana", expected=0)


def test_outbox_failures_runs_and_discrepancies_are_issues_too(engine: Engine) -> None:
    now = utcnow()
    at = now - timedelta(minutes=5)
    with engine.begin() as conn:
        for k in range(2):
            msg = conn.execute(
                insert(OUTBOX)
                .values(
                    target="crm",
                    key=f"k{k}",
                    payload=b"{}",
                    content_type="application/json",
                    headers={},
                    status="failed",
                    attempts=1,
                    next_attempt_at=at,
                    correlation_id="c",
                    created_at=at,
                )
                .returning(OUTBOX.c.id)
            ).scalar_one()
            conn.execute(
                insert(OUTBOX_ATTEMPTS).values(
                    message_id=msg,
                    target="crm",
                    attempt=1,
                    publisher="p",
                    started_at=at,
                    finished_at=at + timedelta(seconds=k),
                    outcome="failed",
                    status_code=503,
                    error=None,
                )
            )
        for k in range(3):
            conn.execute(
                insert(RECON_RUNS).values(
                    run_id=f"run-{k}",
                    source="stripe",
                    trigger="schedule",
                    status="failed",
                    started_at=at,
                    finished_at=at + timedelta(seconds=k),
                    counts={},
                    error=f"Stripe answered 401 (request req_{k}9)" if k < 2 else None,
                )
            )
        for k, cause in enumerate(("webhook_lost", "webhook_lost", "handler_skipped")):
            conn.execute(
                insert(DISCREPANCIES).values(
                    source="stripe",
                    kind="missing",
                    record_key=f"evt_{k}",
                    field="",
                    cause=cause,
                    first_seen_at=at,
                    last_seen_at=at,
                    first_run_id="r",
                    last_run_id="r",
                    status="open",
                )
            )
    refresh(engine, now)
    got = {(i.kind.value, i.source, i.event_type, i.signature): i.count for i in issues(engine)}
    assert got == {
        ("outbox_failure", "outbox:crm", "", "HTTP <n>"): 2,
        ("reconcile_failure", "stripe", "", "Stripe answered <n> (request <n>)"): 2,
        ("reconcile_failure", "stripe", "", "(no error text)"): 1,  # and no sample
        ("discrepancy", "stripe", "missing", "webhook_lost"): 2,
        ("discrepancy", "stripe", "missing", "handler_skipped"): 1,
    }
    outbox = issues(engine, kinds=(IssueKind.OUTBOX_FAILURE,))[0]
    with pytest.raises(ActionRefusedError, match="only dead events"):
        actions.retry_selection(engine, outbox.id)


def test_list_filters_and_show_pages_members_and_a_trend(engine: Engine) -> None:
    now = utcnow()
    for k in range(5):
        dead_event(engine, now - timedelta(hours=k), f"boom {k}")
    dead_event(engine, now - timedelta(minutes=1), "other", source="github")
    refresh(engine, now)
    stripe = issues(engine, sources=("stripe",))
    assert [i.count for i in stripe] == [5]
    assert len(issues(engine, statuses=(IssueStatus.OPEN,))) == 2
    assert issues(engine, statuses=(IssueStatus.RESOLVED,)) == []
    with engine.connect() as conn:
        first = members(conn, stripe[0].id, limit=3)
        rest = members(conn, stripe[0].id, before_id=first[-1].id, limit=3)
        hours = trend(conn, stripe[0].id, now, width=timedelta(hours=1), buckets=24)
        page = list_issues(conn, limit=1)
        after = list_issues(conn, before=(page[0].last_seen, page[0].id), limit=5)
    assert len(first) == 3 and len(rest) == 2 and {m.state for m in first + rest} == {"dead"}
    assert len({m.item for m in first + rest}) == 5
    assert len(hours) == 24 and sum(n for _, n in hours) == 5
    assert hours[-1][1] == 1 and hours[-1][0] <= now < hours[-1][0] + timedelta(hours=1)
    assert [i.source for i in page + after] == ["stripe", "github"]  # stripe failed last
