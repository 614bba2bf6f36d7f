"""Discrepancies: filter, sort, inspect one side by side, act on it, download the CSV."""

from __future__ import annotations

import io
from datetime import UTC, datetime, time

import pandas as pd
import streamlit as st

from dashboard import context, data, urlstate, widgets
from reconciler.errors import HookledgerError, NoSuchRecordError
from reconciler.kinds import kind as kind_of
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops import outbox as outbox_ops
from reconciler.ops.discrepancies import SORTABLE, body_diff, masked_values, value_diff
from reconciler.ops.display import cell, money
from reconciler.ops.links import discrepancy_url, to
from reconciler.ops.masking import masker_for
from reconciler.reconcile.export import DiscrepancyFilter, csv_file_name, write_csv
from reconciler.states import OUTBOX_SOURCE_PREFIX
from reconciler.storage.models import DiscrepancyKind, DiscrepancyStatus

st.title("Discrepancies")
if not context.guard():
    st.stop()
urlstate.arrive("d_")

names = context.source_names() + [
    f"{OUTBOX_SOURCE_PREFIX}{t.name}" for t in context.settings().outbox.targets
]
KINDS = [k.value for k in DiscrepancyKind]
STATUSES = ["open", "resolved", "ignored", "all"]
urlstate.seed_many("d_sources", "source", [], names)
urlstate.seed_many("d_kinds", "kind", [], KINDS)
urlstate.seed("d_status", "status", "open", choices=STATUSES)
urlstate.seed("d_since", "since", None, parse=lambda r: urlstate.parse_time(r).date())
urlstate.seed("d_sort", "sort", "last_seen_at", choices=list(SORTABLE))
urlstate.seed("d_desc", "desc", True, parse=urlstate.parse_bool)
urlstate.seed("d_id", "id", None, parse=urlstate.parse_id)
urlstate.seed("d_run", "run", "", parse=urlstate.parse_run_id)
# an opened discrepancy (its permalink, a picked row, a typed id) is drawn here, above the list
top = st.container()
f1, f2, f3, f4 = st.columns(4)
sources = f1.multiselect("Source", names, key="d_sources")
kinds = f2.multiselect("Kind", KINDS, key="d_kinds")
status = f3.selectbox("Status", STATUSES, key="d_status")
since_date = f4.date_input("Last seen on or after (UTC)", key="d_since")
s1, s2, s3, s4 = st.columns([2, 1, 1, 2])
sort = s1.selectbox("Sort by", list(SORTABLE), key="d_sort")
descending = s2.toggle("Descending", key="d_desc")
limit = int(s3.number_input("Rows shown", 10, 5000, 500, step=100, key="d_limit"))
run_id = s4.text_input("Found by run", key="d_run", help="a run id, as the Runs page links it")

flt = DiscrepancyFilter(
    sources=tuple(sources),
    kinds=tuple(kinds),
    status=status,
    since=datetime.combine(since_date, time.min, UTC) if since_date else None,
    run_id=run_id.strip() or None,
)
rows, total = data.list_discrepancies(context.db_key(), flt, sort, descending, limit)
st.caption(
    f"{total:,} matching discrepancies; showing {len(rows):,}"
    + (" (raise 'Rows shown' or narrow the filters to see the rest)." if total > len(rows) else ".")
)

impact = data.impact(context.db_key(), flt)
if impact:
    with st.expander(
        "Money impact of the matching open missing / diverged / unapplied records", expanded=True
    ):
        widgets.dataframe(
            frames.table(impact, context.tz(), money_columns={"amount": "currency"}),
            "d_impact",
            column_config=widgets.MONEY,
        )


def _csv() -> bytes:
    out = io.StringIO()
    with context.connect() as conn:
        write_csv(conn, flt, out)
    return out.getvalue().encode("utf-8")


st.download_button(
    "Download CSV",
    data=_csv,
    file_name=csv_file_name(flt, context.now().date()),
    mime="text/csv",
    key="d_download",
    on_click="ignore",
)

who = context.identity()
if who.can_act and total and status in ("open", "all"):
    with st.expander(f"Resolve or ignore all {total:,} matching discrepancies"):
        go_bulk, bulk_reason, bulk_action = context.confirmed_form(
            "d_bulk",
            f"Yes, mark all {total:,} discrepancies matching these filters",
            "Apply to all matching",
            lambda: st.radio(
                "Mark them", ["resolved", "ignored"], horizontal=True, key="d_bulk_to"
            ),
        )
        if go_bulk:
            engine = context.engine()
            new_status = DiscrepancyStatus(bulk_action or "resolved")
            context.act_and_refresh(
                lambda a: actions.set_status_matching(
                    engine, flt, new_status, actor=a, reason=bulk_reason, expected=total
                )
            )

maskers = {name: masker_for(context.settings(), name) for name in {str(r["source"]) for r in rows}}
if rows:
    shown = frames.table(
        [masked_values([r], maskers[str(r["source"])])[0] for r in rows],
        context.tz(),
        money_columns={"amount": "currency"},
    )
    picked = st.dataframe(
        shown,
        hide_index=True,
        column_config=widgets.MONEY,
        key="d_table",
        on_select="rerun",
        selection_mode="single-row",
    )
    pick = picked.selection.rows[0] if picked.selection.rows else None
    if pick is not None and st.session_state.get("d_last_pick") != (pick, rows[pick]["id"]):
        # a newly clicked row opens; the id box stays free to type another
        st.session_state["d_last_pick"] = (pick, rows[pick]["id"])
        st.session_state["d_id"] = int(rows[pick]["id"])
else:
    st.info("No discrepancy matches these filters.")

chosen = st.number_input(
    "Open discrepancy # (or pick a row above)", min_value=1, step=1, key="d_id"
)
urlstate.publish(
    {
        "source": sources,
        "kind": kinds,
        "status": None if status == "open" else status,
        "since": since_date.isoformat() if since_date else None,
        "sort": None if sort == "last_seen_at" else sort,
        "desc": None if descending else False,
        "run": run_id.strip() or None,
        "id": chosen,
    }
)
if chosen is None:
    st.stop()


def _close() -> None:
    st.session_state["d_id"] = None


with top:
    st.button("← All discrepancies", key="d_back", on_click=_close)
    try:
        row, related, same = data.discrepancy(int(chosen))
    except NoSuchRecordError as exc:
        st.error(str(exc))
        st.stop()
    masker = masker_for(context.settings(), str(row["source"]))  # (related rows: its source's)
    [row] = masked_values([row], masker)
    related = masked_values(related, masker)
    conflict = row["kind"] == DiscrepancyKind.CONFLICT
    st.subheader(f"Discrepancy #{row['id']}: {row['kind']} ({row['status']})")
    registered = kind_of(str(row["kind"]))
    st.caption(f"{registered.label[:1].upper()}{registered.label[1:]}. {registered.meaning}")
    tz = context.tz()
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
            "first_seen_at",
            "last_seen_at",
            "resolution",
        )
        if row.get(k) not in (None, "")
    }
    if row.get("amount") is not None:
        meta["amount"] = money(int(row["amount"]), row.get("currency"))
    st.table(pd.DataFrame({"": list(meta), "value": [cell(v, tz) for v in meta.values()]}))
    link_base = context.link_base()
    relative = (
        "" if link_base else " (relative: set `[dashboard] public_url` for links that work pasted)"
    )
    st.caption(
        f"Link to this discrepancy: `{discrepancy_url(int(row['id']), link_base)}`{relative}"
    )
    nav = st.columns(3)
    in_inbox = bool(row["event_id"]) and data.event_exists(row["source"], row["event_id"])
    if in_inbox:
        with nav[0]:
            widgets.link(
                to("events", source=row["source"], event_id=row["event_id"]),
                f"Timeline of {row['event_id']}",
            )
    elif row["event_id"]:
        nav[0].caption(f"{row['event_id']} is not in the inbox.")
    if row.get("object_id") and not str(row["source"]).startswith(OUTBOX_SOURCE_PREFIX):
        with nav[1]:
            widgets.link(to("events", q=row["object_id"]), f"Every event of {row['object_id']}")
    if same:
        st.markdown(f"**Other discrepancies of this object** ({len(same)})")
        for other in same[:10]:
            label = (
                f"#{other['id']} {other['kind']} ({other['status']})"
                + (f" · {other['event_id']}" if other["event_id"] else "")
                + (f" · {other['field']}" if other["field"] else "")
            )
            widgets.link(to("discrepancies", id=other["id"], status="all"), label)
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
            st.code(
                body_diff(bodies.stored, bodies.later, masker, bodies.content_type), language="diff"
            )
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
        # a replay needs the event in the inbox; one the inbox never got can only be fetched
        options = ["replay", "backfill", *options] if in_inbox else ["backfill", *options]
    go, reason, action = context.confirmed_form(
        "d",
        f"Yes, apply this action to discrepancy #{row['id']}",
        "Apply",
        lambda: st.radio("Action", options, horizontal=True, key="d_action_kind"),
    )
    if go:
        engine = context.engine()
        src, eid, did = row["source"], row["event_id"], int(row["id"])
        if action == KEEP:
            context.act_and_refresh(
                lambda a: actions.keep_stored_version(engine, did, actor=a, reason=reason)
            )
        elif action == APPLY:
            context.act_and_refresh(
                lambda a: actions.apply_later_version(engine, did, actor=a, reason=reason)
            )
        elif action == REPLAY_MESSAGE:
            message_id = int(row["object_id"])
            context.act_and_refresh(
                lambda a: outbox_ops.replay(engine, [message_id], actor=a, reason=reason)
            )
        elif action == "replay":
            context.act_and_refresh(
                lambda a: actions.replay(engine, src, eid, actor=a, reason=reason)
            )
        elif action == "backfill":
            settings = context.settings()
            context.act_and_refresh(
                lambda a: actions.backfill_event(engine, settings, src, eid, actor=a, reason=reason)
            )
        else:
            new = DiscrepancyStatus.RESOLVED if action == "resolve" else DiscrepancyStatus.IGNORED
            context.act_and_refresh(
                lambda a: actions.set_discrepancy_status(engine, did, new, actor=a, reason=reason)
            )
