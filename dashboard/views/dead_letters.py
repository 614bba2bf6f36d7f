"""Dead letters: dead events grouped by source, type and last error; replay one or a selection."""

from __future__ import annotations

import streamlit as st

from dashboard import context, data
from reconciler.ops import operator_actions as actions

st.title("Dead letters")
if not context.guard():
    st.stop()

groups = data.dead_groups(context.db_key(), tuple(context.source_names()))
if not groups:
    st.success("No dead-lettered events.")
    st.stop()
st.dataframe(
    [
        {
            "source": g.source,
            "event_type": g.event_type,
            "count": g.count,
            "newest": g.newest,
            "last_error": (g.last_error or "")[:200],
        }
        for g in groups
    ],
    hide_index=True,
    key="dl_groups",
)
index = st.selectbox(
    "Group",
    range(len(groups)),
    format_func=lambda i: (
        f"{groups[i].source} · {groups[i].event_type} · {groups[i].count} · "
        f"{(groups[i].last_error or '')[:80]}"
    ),
    key="dl_group",
)
group = groups[index]
rows = data.dead_events(context.db_key(), group.source, group.event_type, group.last_error)
st.dataframe(rows, hide_index=True, key="dl_events")
if group.last_error:
    st.code(group.last_error)

who = context.identity()
if not who.can_act:
    st.info("Read-only view: replay needs an operator sign-in.")
    st.stop()
ids = [r["event_id"] for r in rows]
chosen = st.multiselect("Replay these events", ids, default=ids, key="dl_pick")
go, reason, _ = context.confirmed_form("dl", f"Yes, replay {len(chosen)} events", "Replay")
if go:
    engine = context.engine()
    keys = [(group.source, e) for e in chosen]
    context.show_result(
        context.act(lambda a: actions.replay_selection(engine, keys, actor=a, reason=reason))
    )
