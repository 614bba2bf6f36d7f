"""Issues: failures grouped by kind, source, type and error signature; one issue's permalink is
``/issues?id=N`` (its trend, latest failures, and for operators acknowledge, resolve and retry).

The URL is the state: the issue shown is the ``id`` in the URL on every run, so a link to another
issue always opens that one. Queries and actions live in ``reconciler.issues``."""

from __future__ import annotations

from datetime import UTC, timedelta

import pandas as pd
import streamlit as st

from dashboard import context, widgets
from reconciler.errors import HookledgerError
from reconciler.issues import actions
from reconciler.issues.queries import IssueFilter, IssueRow, get_issue, list_issues, members, trend
from reconciler.issues.refresh import refresh
from reconciler.ops import frames
from reconciler.ops.display import age, count, when
from reconciler.ops.links import page_url, to
from reconciler.ops.masking import masker_for
from reconciler.states import IssueKind, IssueStatus

SHOWN = 200
MEMBERS_SHOWN = 50
STATUSES = [s.value for s in IssueStatus]

st.title("Issues")
if not context.guard():
    st.stop()
try:  # what failed up to now (the scheduler does it every minute; cheap when nothing is new)
    refresh(
        context.engine(),
        context.now(),
        auto_resolve_after=context.settings().issues.auto_resolve_delta,
    )
except Exception as exc:  # a read-only database user: the page shows the last pass's issues
    st.caption(f"Issues not brought up to date here ({type(exc).__name__}): as of the last pass.")

raw_id = st.query_params.get("id", "")
# a well-formed id opens that issue (or says there is none); anything else shows the list
well_formed = raw_id.isascii() and raw_id.isdigit() and len(raw_id) < 19 and int(raw_id) > 0
opened = int(raw_id) if well_formed else None
tz = context.tz()


def _issue_list() -> None:
    chosen = st.multiselect("Status", STATUSES, default=["open", "acknowledged"], key="iss_status")
    flt = IssueFilter(statuses=tuple(IssueStatus(s) for s in chosen))
    rows = context.read(list_issues, flt, limit=SHOWN)
    if not rows:
        st.success("No issue matches: nothing is failing." if chosen else "No issues.")
        return
    st.caption("Failures grouped by kind, source, type and error signature; pick one to open it.")
    picked = st.dataframe(
        frames.table(
            [
                {
                    "id": r.id,
                    "status": r.status.value,
                    "kind": r.kind.value,
                    "source": r.source,
                    "type": r.event_type,
                    "count": r.count,
                    "last seen": r.last_seen,
                    "signature": r.signature,
                }
                for r in rows
            ],
            tz,
        ),
        hide_index=True,
        key="iss_table",
        on_select="rerun",
        selection_mode="single-row",
    )
    if picked.selection.rows and picked.selection.rows[0] < len(rows):
        st.query_params["id"] = str(rows[picked.selection.rows[0]].id)
        st.rerun()


def _actions(issue: IssueRow) -> None:
    who = context.identity()
    if not who.can_act:
        st.info("Read-only view: acknowledging, resolving and retrying need an operator sign-in.")
        return
    engine = context.engine()
    if issue.status is IssueStatus.OPEN and st.button("Acknowledge", key="iss_ack"):
        context.act_and_refresh(lambda a: actions.acknowledge(engine, issue.id, actor=a))
    if issue.kind is IssueKind.DEAD_EVENT:
        _, _, dead = actions.retry_selection(engine, issue.id)
        if dead:
            go, reason, _ = context.confirmed_form(
                "iss_retry",
                f"Yes, replay {count(dead, 'dead event')} of issue {issue.id} (same event ids)",
                f"Retry {count(dead, 'dead event')}",
            )
            if go:
                context.act_and_refresh(
                    lambda a: actions.retry_all(
                        engine, issue.id, actor=a, expected=dead, reason=reason
                    )
                )
    if issue.status is not IssueStatus.RESOLVED:
        go, reason, _ = context.confirmed_form(
            "iss_resolve", f"Yes, resolve issue {issue.id}", "Resolve"
        )
        if go:
            context.act_and_refresh(
                lambda a: actions.resolve(engine, issue.id, actor=a, reason=reason)
            )


def _issue(issue_id: int) -> None:
    widgets.link(to("issues"), "← All issues")
    try:
        issue = context.read(get_issue, issue_id)
    except HookledgerError as exc:
        st.error(str(exc))
        return
    st.markdown(
        f"### Issue #{issue.id}: {issue.status.value} · {issue.kind.value.replace('_', ' ')} · "
        f"{issue.source}" + (f" · {issue.event_type}" if issue.event_type else "")
    )
    base = context.link_base()
    relative = "" if base else " (relative: set `[dashboard] public_url`)"
    st.caption(f"Permalink: `{page_url('issues', base, id=issue.id)}`{relative}")
    st.markdown(f"**Signature:** `{issue.signature}`")
    if issue.sample_error:
        masker = masker_for(context.settings())
        st.code(masker.mask(issue.sample_error)[:2000])
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Failures", f"{issue.count:,}")
    now = context.now()
    for col, label, at in (
        (c2, "First seen", issue.first_seen),
        (c3, "Last seen", issue.last_seen),
    ):
        ago = age((now - at.replace(tzinfo=at.tzinfo or UTC)).total_seconds()) + " ago"
        col.metric(label, ago, help=when(at, tz))
    c4.metric("Reopened", issue.reopened_count)
    if issue.acknowledged_by:
        st.caption(f"Acknowledged by {issue.acknowledged_by} at {when(issue.acknowledged_at, tz)}")
    if issue.resolved_by:
        why = f": {issue.resolved_reason}" if issue.resolved_reason else ""
        st.caption(f"Resolved by {issue.resolved_by} at {when(issue.resolved_at, tz)}{why}")
    hours = context.read(trend, issue.id, context.now(), width=timedelta(hours=1), buckets=48)
    st.markdown("**Failures per hour, last 48 hours**")
    st.bar_chart(pd.DataFrame({"failures": [n for _, n in hours]}, index=[t for t, _ in hours]))
    latest = context.read(members, issue.id, limit=MEMBERS_SHOWN)
    st.markdown(f"**Latest {len(latest)} of {issue.count:,}**")
    st.dataframe(
        frames.table(
            [{"failed at": m.at, "item": m.item, "now": m.state or ""} for m in latest], tz
        ),
        hide_index=True,
    )
    if issue.kind is IssueKind.DEAD_EVENT and latest:
        widgets.link(
            to("events", source=issue.source, event_id=latest[0].item),
            f"Timeline of {latest[0].item}",
        )
    _actions(issue)


if opened is None:
    _issue_list()
else:
    _issue(opened)
