"""Discrepancies: filter, sort, inspect one side by side, act on it, download the CSV."""

from __future__ import annotations

import io
from datetime import UTC, datetime, time

import streamlit as st

from dashboard import context, data
from reconciler.errors import HookledgerError
from reconciler.ops import operator_actions as actions
from reconciler.ops import outbox as outbox_ops
from reconciler.ops.discrepancies import SORTABLE, body_diff, masked_values, value_diff
from reconciler.ops.masking import Masker
from reconciler.reconcile.export import DiscrepancyFilter, write_csv
from reconciler.states import OUTBOX_SOURCE_PREFIX
from reconciler.storage.models import DiscrepancyKind, DiscrepancyStatus

st.title("Discrepancies")
if not context.guard():
    st.stop()

names = context.source_names() + [
    f"{OUTBOX_SOURCE_PREFIX}{t.name}" for t in context.settings().outbox.targets
]
f1, f2, f3, f4 = st.columns(4)
sources = f1.multiselect("Source", names, key="d_sources")
kinds = f2.multiselect("Kind", [k.value for k in DiscrepancyKind], key="d_kinds")
status = f3.selectbox("Status", ["open", "resolved", "ignored", "all"], key="d_status")
since_date = f4.date_input("Last seen on or after (UTC)", value=None, key="d_since")
s1, s2, s3 = st.columns([2, 1, 1])
sort = s1.selectbox("Sort by", list(SORTABLE), key="d_sort")
descending = s2.toggle("Descending", value=True, key="d_desc")
limit = int(s3.number_input("Rows shown", 10, 5000, 500, step=100, key="d_limit"))

flt = DiscrepancyFilter(
    sources=tuple(sources),
    kinds=tuple(kinds),
    status=status,
    since=datetime.combine(since_date, time.min, UTC) if since_date else None,
)
rows, total = data.list_discrepancies(context.db_key(), flt, sort, descending, limit)
st.caption(f"{total:,} matching discrepancies; showing {len(rows):,}.")

impact = data.impact(context.db_key(), tuple(sources))
if impact:
    with st.expander("Money impact of open missing / diverged / unapplied records", expanded=True):
        st.dataframe(impact, hide_index=True, key="d_impact")


def _csv() -> bytes:
    out = io.StringIO()
    with context.connect() as conn:
        write_csv(conn, flt, out)
    return out.getvalue().encode("utf-8")


st.download_button(
    "Download CSV",
    data=_csv,
    file_name=f"discrepancies-{status}.csv",
    mime="text/csv",
    key="d_download",
    on_click="ignore",
)

if not rows:
    st.info("No discrepancy matches these filters.")
    st.stop()

masker = Masker(context.settings().dashboard.mask_fields)
st.dataframe(masked_values(rows, masker), hide_index=True, key="d_table")

labels = {
    r["id"]: f"#{r['id']} · {r['source']} · {r['kind']} · {r['event_id'] or r['object_id'] or ''}"
    f"{' · ' + r['field'] if r['field'] else ''}"
    for r in rows
}
chosen = st.selectbox(
    "Inspect", list(labels), format_func=lambda i: labels[i], key="d_pick", index=None
)
if chosen is None:
    st.stop()

row, related = data.discrepancy(int(chosen))
[row] = masked_values([row], masker)
related = masked_values(related, masker)
conflict = row["kind"] == DiscrepancyKind.CONFLICT
st.subheader(f"Discrepancy #{row['id']}: {row['kind']} ({row['status']})")
meta = {
    k: row[k]
    for k in (
        "source",
        "event_id",
        "event_type",
        "object_type",
        "object_id",
        "field",
        "cause",
        "recover_by",
        "amount",
        "currency",
        "first_seen_at",
        "last_seen_at",
        "resolution",
    )
    if row.get(k) not in (None, "")
}
st.json(meta, expanded=True)
left, right = st.columns(2)
left.markdown("**Later delivery has**" if conflict else "**Source says**")
left.code(row["source_value"] or "(nothing)", language="json")
right.markdown("**Stored (applied) version has**" if conflict else "**Local has**")
right.code(row["local_value"] or "(nothing)", language="json")
if conflict:
    st.markdown("**Every conflicting field of this event** (stored beside the later delivery)")
    st.dataframe(
        [
            {
                "field": r["field"] or "(whole body)",
                "stored": r["local_value"],
                "later delivery": r["source_value"],
                "status": r["status"],
            }
            for r in related
        ],
        hide_index=True,
        key="d_conflict_fields",
    )
    try:
        bodies = data.conflict(int(row["id"]))
    except HookledgerError as exc:
        st.warning(str(exc))
    else:
        st.markdown(
            f"**The two bodies** (the later one received {bodies.received_at:%Y-%m-%d %H:%M:%S} "
            "UTC and never applied; masked)"
        )
        st.code(body_diff(bodies.stored, bodies.later, masker), language="diff")
if row["kind"] == DiscrepancyKind.DIVERGED and len(related) > 0:
    st.markdown("**Every field of this object** (source beside local)")
    diff = [
        {
            "field": r["field"],
            "path": d.path,
            "source": d.source,
            "local": d.local,
            "status": r["status"],
        }
        for r in related
        for d in value_diff(r["source_value"], r["local_value"])
    ]
    st.dataframe(diff, hide_index=True, key="d_diff")

who = context.identity()
if not who.can_act:
    st.info("Read-only view: actions need an operator sign-in.")
    st.stop()

KEEP, APPLY = "keep stored version", "apply later delivery"
REPLAY_MESSAGE = "replay the message (same key)"
outgoing = row["kind"] in (DiscrepancyKind.OUTBOX_STUCK, DiscrepancyKind.OUTBOX_DEAD)
options = ["resolve", "ignore"]
if conflict:
    options = [KEEP, APPLY, "ignore"] if row["status"] == DiscrepancyStatus.OPEN else ["ignore"]
elif row["kind"] == DiscrepancyKind.OUTBOX_DEAD:
    options = [REPLAY_MESSAGE, *options]
elif row["event_id"] and not outgoing:
    options = ["replay", "backfill", *options]
go, reason, action = context.confirmed_form(
    "d",
    f"Yes, apply this action to discrepancy #{row['id']}",
    "Apply",
    lambda: st.radio("Action", options, horizontal=True, key="d_action_kind"),
)
if go:
    engine = context.engine()
    src, eid = row["source"], row["event_id"]
    if action == KEEP:
        result = context.act(
            lambda a: actions.keep_stored_version(engine, int(row["id"]), actor=a, reason=reason)
        )
    elif action == APPLY:
        result = context.act(
            lambda a: actions.apply_later_version(engine, int(row["id"]), actor=a, reason=reason)
        )
    elif action == REPLAY_MESSAGE:
        message_id = int(row["object_id"])
        result = context.act(
            lambda a: outbox_ops.replay(engine, [message_id], actor=a, reason=reason)
        )
    elif action == "replay":
        result = context.act(lambda a: actions.replay(engine, src, eid, actor=a, reason=reason))
    elif action == "backfill":
        settings = context.settings()
        result = context.act(
            lambda a: actions.backfill_event(engine, settings, src, eid, actor=a, reason=reason)
        )
    else:
        new = DiscrepancyStatus.RESOLVED if action == "resolve" else DiscrepancyStatus.IGNORED
        result = context.act(
            lambda a: actions.set_discrepancy_status(
                engine, int(row["id"]), new, actor=a, reason=reason
            )
        )
    context.show_result(result)
