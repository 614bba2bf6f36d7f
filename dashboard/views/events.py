"""Events: find an event by any of its ids and see everything that happened to it."""

from __future__ import annotations

import streamlit as st

from dashboard import context, data
from reconciler.errors import NotFoundError
from reconciler.ops import operator_actions as actions
from reconciler.ops.events import timeline
from reconciler.ops.masking import Masker

st.title("Events")
if not context.guard():
    st.stop()

query = st.text_input(
    "Event id, object id, delivery id or correlation id", key="e_query", placeholder="evt_..."
)
if not query.strip():
    st.caption("Exact match on any of the four ids.")
    st.stop()
found = data.search_events(context.db_key(), query.strip(), tuple(context.source_names()))
related = data.messages_of_correlation(context.db_key(), query.strip())
if related:
    st.markdown(f"**Outgoing messages** with correlation id `{query.strip()}`")
    st.dataframe(related, hide_index=True, key="e_correlated")
if not found:
    st.info(f"No event in the inbox matches '{query.strip()}'.")
    st.stop()
st.dataframe(found, hide_index=True, key="e_results")
keys = [(r["source"], r["event_id"]) for r in found]
picked = st.selectbox(
    "Event", keys, format_func=lambda k: f"{k[0]} · {k[1]}", key="e_pick", index=0
)
source, event_id = picked
try:
    detail = data.event(source, event_id)
except NotFoundError as exc:
    st.error(str(exc))
    st.stop()

ev = detail.event
st.subheader(f"{ev['event_type'] or 'event'} {event_id}")
c = st.columns(5)
c[0].metric("Status", str(ev["status"]))
c[1].metric("Origin", str(ev["origin"]))
c[2].metric("Attempts", ev["attempts"])
c[3].metric("Deliveries", len(detail.deliveries))
c[4].metric("Audit entries", len(detail.audit))
if ev["last_error"]:
    st.error(f"Last error ({ev['error_class']}): {ev['last_error']}")

st.markdown("**Timeline**")
st.table(
    [
        {"at": t.at, "what": t.kind, "summary": t.summary, "detail": t.detail}
        for t in timeline(detail)
    ]
)

masker = Masker(context.settings().dashboard.mask_fields)
st.markdown(f"**Correlation id** `{ev['correlation_id']}`: search it to see every event it joins.")
chain = data.business_rows(
    context.db_key(), source, ev["event_type"], ev["object_type"], ev["object_id"]
)
for rows_of in chain:
    what = f"`{rows_of.table}` for {ev['object_type'] or 'object'} `{rows_of.key}`"
    if rows_of.error:
        st.warning(f"{rows_of.table}: {rows_of.error}")
    elif rows_of.rows:
        st.markdown(f"**Business rows** in {what}")
        st.dataframe([masker.mask(r) for r in rows_of.rows], hide_index=True)
    else:
        st.markdown(f"**Business rows** in {what}: none")
if detail.messages:
    st.markdown("**Outgoing messages** this event's handler wrote (see the Outbox page)")
    st.dataframe(detail.messages, hide_index=True, key="e_messages")
st.markdown("**Payload** (secrets and configured PII fields masked)")
st.code(masker.mask_body(ev["body"]), language="json")
with st.expander("Stored headers"):
    st.json(masker.mask(ev["headers"] or {}))

who = context.identity()
if who.can_act:
    go, reason, _ = context.confirmed_form(
        "e", f"Yes, replay {event_id} with the same event id", "Replay"
    )
    if go:
        engine = context.engine()
        context.show_result(
            context.act(lambda a: actions.replay(engine, source, event_id, actor=a, reason=reason))
        )
else:
    st.caption("Read-only view: replay needs an operator sign-in.")
