"""Dead letters: dead events grouped by source, type and last error; replay a group, several
groups, or everything the filters match — counted first, confirmed, in batches, one audit entry."""

from __future__ import annotations

import streamlit as st

from dashboard import context, data, urlstate, widgets
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops.dead_letters import DeadFilter
from reconciler.ops.display import count
from reconciler.ops.links import to

SHOWN = 100

st.title("Dead letters")
if not context.guard():
    st.stop()
urlstate.arrive("dl_")

names = context.source_names()
tz = context.tz()
all_groups = data.dead_groups(context.db_key(), tuple(names))
if not all_groups:
    urlstate.publish({})
    st.success("No dead-lettered events.")
    st.stop()

types_known = sorted({g.event_type for g in all_groups if g.event_type})
urlstate.seed_many("dl_sources", "source", [], names)
urlstate.seed_many("dl_types", "type", [], types_known)
urlstate.seed("dl_error", "error", "")
f1, f2, f3 = st.columns([1, 1, 2])
sources = f1.multiselect("Source", names, key="dl_sources")
types = f2.multiselect("Type", types_known, key="dl_types")
error = f3.text_input("Last error contains (any case)", key="dl_error").strip()
received_from, received_to, range_params = widgets.received_range("dl")
urlstate.publish({"source": sources, "type": types, "error": error, **range_params})

groups = [
    g
    for g in all_groups
    if (not sources or g.source in sources)
    and (not types or g.event_type in types)
    and (not error or error.lower() in (g.last_error or "").lower())
]
st.markdown(
    "**Groups** (source · type · last error; counts are all dead events of the group). Tick "
    "groups to narrow the selection to them."
)
picked = st.dataframe(
    frames.table(
        [
            {
                "source": g.source,
                "event_type": g.event_type,
                "dead events": g.count,
                "newest": g.newest,
                "last_error": (g.last_error or "")[:300],
            }
            for g in groups
        ],
        tz,
    ),
    hide_index=True,
    key="dl_groups",
    on_select="rerun",
    selection_mode="multi-row",
)
chosen_groups = tuple(
    (groups[i].source, groups[i].event_type, groups[i].last_error)
    for i in picked.selection.rows
    if i < len(groups)
)
flt = DeadFilter(
    sources=tuple(sources),
    types=tuple(types),
    error_contains=error,
    received_from=received_from,
    received_to=received_to,
    groups=chosen_groups,
)
total = data.count_dead(context.db_key(), flt)
st.markdown(f"**{count(total, 'event')} selected: {flt.describe()}**")
if total:
    rows = data.list_dead(context.db_key(), flt, None, SHOWN)
    st.caption(
        f"The newest {len(rows):,} of {total:,}"
        + ("; the replay below takes all of them." if total > len(rows) else ".")
    )
    shown = st.dataframe(
        frames.table(rows, tz, drop=("id",)),
        hide_index=True,
        key="dl_events",
        on_select="rerun",
        selection_mode="single-row",
    )
    if shown.selection.rows and shown.selection.rows[0] < len(rows):
        one = rows[shown.selection.rows[0]]
        widgets.link(
            to("events", source=one["source"], event_id=one["event_id"]),
            f"Timeline of {one['event_id']}",
        )
focus = [g for g in groups if (g.source, g.event_type, g.last_error) in chosen_groups] or groups
if len(focus) == 1 and focus[0].last_error:
    st.code(focus[0].last_error)

who = context.identity()
if not who.can_act:
    st.info("Read-only view: replay needs an operator sign-in.")
    st.stop()
if not total:
    st.stop()
go, reason, _ = context.confirmed_form(
    "dl",
    f"Yes, replay {count(total, 'event')} ({flt.describe()})",
    f"Replay {count(total, 'event')}",
)
if go:
    engine = context.engine()
    bar = st.progress(0.0, text=f"Replaying {total:,} events…")

    def progress(done: int, of: int) -> None:
        bar.progress(done / of, text=f"{done:,} of {of:,} put back to pending…")

    context.act_and_refresh(
        lambda a: actions.replay_dead_matching(
            engine, flt, actor=a, reason=reason, expected=total, progress=progress
        )
    )
