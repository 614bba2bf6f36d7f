"""Events: browse the inbox with filters a page at a time, or find an event by any of its ids, and
see everything that happened to one (its permalink: ``/events?source=…&event_id=…``)."""

from __future__ import annotations

from datetime import datetime

import streamlit as st

from dashboard import context, data, urlstate, widgets
from reconciler.errors import NoSuchRecordError
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops.events import EventFilter, timeline
from reconciler.ops.links import event_url, page_url
from reconciler.ops.masking import masker_for
from reconciler.states import EventOrigin, EventStatus

PAGE = 50


def show_event(source: str, event_id: str) -> None:
    """One event at the top of the page: what happened to it, its links, its actions."""
    try:
        detail = data.event(source, event_id)
    except NoSuchRecordError as exc:
        st.error(str(exc))
        return

    ev = detail.event
    tz = context.tz()
    masker = masker_for(context.settings(), source)
    base = context.link_base()
    st.subheader(f"{ev['event_type'] or 'event'} {event_id}")
    hint = "" if base else " (relative: set `[dashboard] public_url` for links that work pasted)"
    st.caption(f"Permalink: `{event_url(source, event_id, base)}`{hint} · source {source}")
    c = st.columns(5)
    c[0].metric("Status", str(ev["status"]))
    c[1].metric("Origin", str(ev["origin"]))
    c[2].metric("Attempts", ev["attempts"])
    c[3].metric("Deliveries", len(detail.deliveries))
    c[4].metric("Audit entries", len(detail.audit))
    if ev["last_error"]:
        st.error(f"Last error ({ev['error_class']}): {masker.mask(ev['last_error'])}")

    st.markdown("**Timeline**")
    st.table(
        frames.table(
            [
                {"at": t.at, "what": t.kind, "summary": t.summary, "detail": masker.mask(t.detail)}
                for t in timeline(detail)
            ],
            tz,
        )
    )

    links = []
    if ev["object_id"]:
        others = page_url("events", base, q=ev["object_id"])
        links.append(
            f"[other events of {ev['object_type'] or 'object'} {ev['object_id']}]({others})"
        )
    links.append(
        f"[events with its correlation id]({page_url('events', base, q=ev['correlation_id'])})"
    )
    st.markdown(" · ".join(links))
    found = data.discrepancies_of_event(source, event_id, ev["object_id"])
    if found:
        st.markdown("**Discrepancies** naming this event or its object")
        widgets.dataframe(
            frames.table(
                [{**r, "open": page_url("discrepancies", base, id=r["id"])} for r in found], tz
            ),
            "e_discrepancies",
            column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
        )
    chain = data.business_rows(
        context.db_key(), source, ev["event_type"], ev["object_type"], ev["object_id"]
    )
    for rows_of in chain:
        what = f"`{rows_of.table}` for {ev['object_type'] or 'object'} `{rows_of.key}`"
        if rows_of.error:
            st.warning(f"{rows_of.table}: {rows_of.error}")
        elif rows_of.rows:
            st.markdown(f"**Business rows** in {what}")
            widgets.dataframe(
                frames.table([masker.mask(r) for r in rows_of.rows], tz), "e_business"
            )
        else:
            st.markdown(f"**Business rows** in {what}: none")
    if detail.messages:
        st.markdown("**Outgoing messages** this event's handler wrote (see the Outbox page)")
        widgets.dataframe(
            frames.table(detail.messages, tz, text=("last_status_code",)), "e_messages"
        )
    st.markdown("**Payload** (secrets, configured PII and personal fields masked)")
    st.code(masker.mask_body(ev["body"], ev["content_type"]), language="json")
    with st.expander("Stored headers"):
        st.json(masker.mask(ev["headers"] or {}))

    who = context.identity()
    if who.can_act:
        go, reason, _ = context.confirmed_form(
            "e", f"Yes, replay {event_id} with the same event id", "Replay"
        )
        if go:
            engine = context.engine()
            context.act_and_refresh(
                lambda a: actions.replay(engine, source, event_id, actor=a, reason=reason)
            )
    else:
        st.caption("Read-only view: replay needs an operator sign-in.")


st.title("Events")
if not context.guard():
    st.stop()
urlstate.arrive("e_")

names = context.source_names()
tz = context.tz()
STATUSES = [s.value for s in EventStatus]
ORIGINS = [o.value for o in EventOrigin]

urlstate.seed("e_query", "q", "")
urlstate.seed("e_prefix", "prefix", "")
urlstate.seed_many("e_sources", "source", [], names)
urlstate.seed_many("e_statuses", "status", [], STATUSES)
urlstate.seed_many("e_origins", "origin", [], ORIGINS)
if "e_open" not in st.session_state:
    source_param, id_param = st.query_params.get("source"), st.query_params.get("event_id")
    st.session_state["e_open"] = (source_param, id_param) if source_param and id_param else None

opened: tuple[str, str] | None = st.session_state["e_open"]
if opened is not None:  # a permalink or a picked row: the event first, the list one click back
    if st.button("← All events", key="e_back"):
        st.session_state["e_open"] = None  # (the picked row stays picked: not opened again)
        urlstate.publish({})
        st.rerun()
    urlstate.publish({"source": opened[0], "event_id": opened[1]})
    show_event(*opened)
    st.stop()

query = st.text_input(
    "Find by event id, object id, delivery id or correlation id (exact)",
    key="e_query",
    placeholder="evt_...",
).strip()

page_params: dict[str, object] = {}
if query:
    found = data.search_events(context.db_key(), query, tuple(names))
    related = data.messages_of_correlation(context.db_key(), query)
    if related:
        st.markdown(f"**Outgoing messages** with correlation id `{query}`")
        widgets.dataframe(frames.table(related, tz), "e_correlated")
    if not found:
        st.info(f"No event in the inbox matches '{query}' exactly.")
    rows = found
    st.caption(f"{len(found):,} events match '{query}' exactly.")
    page_params = {"q": query}
else:
    with st.expander("Filters", expanded=True):
        f1, f2, f3, f4 = st.columns(4)
        sources = f1.multiselect("Source", names, key="e_sources")
        types_known = data.event_types(context.db_key(), tuple(sources))
        urlstate.seed_many("e_types", "type", [], types_known)
        types = f2.multiselect("Type", types_known, key="e_types")
        statuses = f3.multiselect("Status", STATUSES, key="e_statuses")
        origins = f4.multiselect("Origin", ORIGINS, key="e_origins")
        g1, g2 = st.columns([1, 1])
        prefix = g1.text_input("Event id starts with (any case)", key="e_prefix").strip()
        received_from, received_to, range_params = widgets.received_range("e", g2)
    flt = EventFilter(
        sources=tuple(sources),
        types=tuple(types),
        statuses=tuple(statuses),
        origins=tuple(origins),
        received_from=received_from,
        received_to=received_to,
        id_prefix=prefix,
    )
    # the keyset cursors of the pages seen so far, reset whenever the filter changes
    if st.session_state.get("e_filter") != flt:
        st.session_state["e_filter"] = flt
        st.session_state["e_cursors"] = [None]
    cursors: list[tuple[datetime, int] | None] = st.session_state["e_cursors"]
    page = data.list_events(context.db_key(), flt, cursors[-1], PAGE)
    rows = page.rows
    first = (len(cursors) - 1) * PAGE
    nav = st.columns([3, 1, 1])
    nav[0].caption(
        f"{first + 1:,}-{first + len(rows):,} of {page.total:,} events, newest first"
        if rows
        else f"0 of {page.total:,} events"
    )
    if nav[1].button("Previous", disabled=len(cursors) == 1, key="e_prev"):
        cursors.pop()
        st.rerun()
    if nav[2].button("Next", disabled=page.next_after is None, key="e_next"):
        cursors.append(page.next_after)
        st.rerun()
    page_params = {
        "source": sources,
        "type": types,
        "status": statuses,
        "origin": origins,
        "prefix": prefix,
        **range_params,
    }

if rows:
    shown = frames.table(rows, tz, drop=("id",))
    picked = st.dataframe(
        shown, hide_index=True, key="e_results", on_select="rerun", selection_mode="single-row"
    )
    pick = picked.selection.rows[0] if picked.selection.rows else None
    if pick is not None and pick < len(rows):
        picked_key = (str(rows[pick]["source"]), str(rows[pick]["event_id"]))
        if st.session_state.get("e_last_pick") != picked_key:
            st.session_state["e_last_pick"] = picked_key
            st.session_state["e_open"] = picked_key
            st.rerun()
    elif len(rows) == 1 and query:
        st.session_state["e_open"] = (str(rows[0]["source"]), str(rows[0]["event_id"]))
        st.rerun()

urlstate.publish(page_params)  # type: ignore[arg-type]
st.caption("Pick a row to see the event's timeline.")
