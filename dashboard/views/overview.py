"""Overview: the health strip, then delivery health, processing outcomes, queue depth and
discrepancies per source over the selected range."""

from __future__ import annotations

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from dashboard import charts, context, data, urlstate, widgets
from reconciler.ops import frames, silences
from reconciler.ops.display import age, count
from reconciler.ops.health import Level, Signal, judge
from reconciler.ops.links import to
from reconciler.ops.masking import masker_for
from reconciler.ops.overview import kpis
from reconciler.ops.timerange import choose_bucket, describe_width
from reconciler.reconcile.run import reconcilable_sources

st.title("Overview")
if not context.guard():
    st.stop()
urlstate.arrive("ov_")

names = context.source_names()
cfg = context.settings()
threshold = cfg.reconcile.stuck_after_seconds
if not names:
    st.warning("No source is configured: add a [[sources]] table to the configuration.")
    st.stop()

left, middle, right = st.columns([2, 4, 2], vertical_alignment="bottom")
rng, range_params = widgets.range_picker("ov", context.now(), where=left)
urlstate.seed_many("ov_sources", "source", names, names)
selected = middle.multiselect("Sources", names, key="ov_sources")
every, refresh_params = widgets.refresh_picker("ov", where=right)
urlstate.publish(
    {**range_params, "source": selected if selected != names else [], **refresh_params}
)
if not selected:
    st.info("Select at least one source.")
    st.stop()


def silence_controls(signals: list[Signal]) -> None:
    """One popover under the strip: silence a warning nobody can act on, or show a silenced one
    again, with a reason; audited. (One for all warnings: each is a form the page draws.)"""
    if not signals:
        return
    engine, now = context.engine(), context.now()
    label = "Silence a warning" if not any(s.silenced for s in signals) else "Silences"
    by_label = {s.label: s for s in signals}
    with st.popover(label):
        name = st.selectbox(
            "Warning",
            list(by_label),
            key="ov_silence_which",
            format_func=lambda n: n + (" (silenced)" if by_label[n].silenced else ""),
        )
        signal = by_label[name]
        reason = st.text_input("Reason (required, recorded in the audit log)", key="ov_silence_why")
        if signal.silenced:
            if st.button("Show it again", key="ov_silence_off"):
                context.act_and_refresh(
                    lambda a: silences.unsilence(engine, signal.label, now, actor=a, reason=reason)
                )
            return
        length = st.selectbox("For", list(silences.DURATIONS), key="ov_silence_for")
        if st.button(f"Silence '{signal.label}'", key="ov_silence_on"):
            span = silences.DURATIONS[length]
            context.act_and_refresh(
                lambda a: silences.silence(engine, signal.label, span, now, actor=a, reason=reason)
            )


def body() -> None:
    now = context.now()
    current = widgets.range_at(range_params, now, rng)
    width = choose_bucket(current)
    tz = context.tz()
    can_reconcile = {s.name for s in reconcilable_sources(cfg)}
    reconciled = tuple(s for s in selected if s in can_reconcile)
    facts = data.health_facts(context.db_key(), now, tuple(selected), float(threshold), reconciled)
    signals = judge(facts, threshold, min(60, cfg.reconcile.snapshot_interval_seconds))
    widgets.health_strip(signals)
    if context.identity().can_act:
        silence_controls([s for s in signals if s.level is Level.WARN])
    ov = data.load_overview(
        context.db_key(), current.start, current.end, width, now, tuple(selected)
    )
    st.caption(
        f"{current.start.astimezone(tz):%Y-%m-%d %H:%M} - {current.end.astimezone(tz):%Y-%m-%d %H:%M} "
        f"{context.tz_name()} · one bar per {describe_width(width)} · counts cached for "
        f"{context.ttl()} s"
    )
    for k in kpis(ov, threshold):
        with st.container(border=True):
            st.subheader(k.source)
            run = facts.last_run.get(k.source)
            if run is not None and run.status == "failed":
                ago = age((now - run.finished_at).total_seconds())
                error = masker_for(cfg, k.source).mask(run.error or "")
                st.error(f"The last reconciliation of {k.source} failed {ago} ago: {error}")
                widgets.link(to("runs", source=[k.source]), f"Runs of {k.source}")
            if not k.has_data:
                st.info(f"No deliveries, events or discrepancies for '{k.source}' in this range.")
                continue
            c = st.columns(8)
            c[0].metric("Accepted", f"{k.accepted:,}")
            c[1].metric("Duplicate", f"{k.duplicate:,}")
            c[2].metric("Rejected", f"{k.rejected:,}")
            c[3].metric("Processed", f"{k.processed:,}")
            c[4].metric("Failed attempts", f"{k.failed:,}")
            c[5].metric("Dead-lettered", f"{k.dead_lettered:,}")  # events, not attempts
            c[6].metric("Pending now", f"{k.pending_now:,}")
            c[7].metric("Oldest unprocessed", age(k.oldest_age_seconds))
            if k.stuck:
                st.markdown(
                    f":red[**The oldest unprocessed event is {age(k.oldest_age_seconds)} old: past "
                    f"stuck_after_seconds ({age(threshold)}).**]"
                )
            if k.conflict:
                conflicts = count(k.conflict, "conflicting redelivery", "conflicting redeliveries")
                st.markdown(
                    f":orange[**{conflicts}** (an event id again with other content: held back).]"
                )
                widgets.link(
                    to("discrepancies", source=[k.source], kind=["conflict"]),
                    "Conflicts of " + k.source,
                )
            if k.attempts:
                shares = " · ".join(
                    f"{cls} {k.failure_share(cls):.1%}"
                    for cls in ("transient", "ambiguous", "permanent", "hung")
                )
                st.markdown(
                    f"Failed attempts by class (share of {k.attempts:,} attempts): {shares}"
                )
            links = st.columns(4)
            waiting = sum(k.waiting_for_a_person.values())
            if waiting:
                ambiguous = k.waiting_for_a_person.get("ambiguous", 0)
                hung = k.waiting_for_a_person.get("hung", 0)
                verb = "waits" if waiting == 1 else "wait"
                st.markdown(
                    f":red[**{count(waiting, 'event')} {verb} for a person**] (dead letters"
                    + (
                        f"; {ambiguous:,} ambiguous: check whether their effect happened"
                        if ambiguous
                        else ""
                    )
                    + (
                        f"; {hung:,} hung: their handler timed out or killed its worker "
                        "max_hangs times"
                        if hung
                        else ""
                    )
                    + ")"
                )
                with links[0]:
                    widgets.link(
                        to("dead_letters", source=[k.source]), count(waiting, "dead letter")
                    )
            if k.open_discrepancies:
                st.markdown(
                    "Open discrepancies: "
                    + ", ".join(f"**{kind}** {n:,}" for kind, n in k.open_discrepancies.items())
                )
                with links[1]:
                    widgets.link(
                        to("discrepancies", source=[k.source]),
                        count(
                            sum(k.open_discrepancies.values()),
                            "open discrepancy",
                            "open discrepancies",
                        ),
                    )
            else:
                st.markdown("Open discrepancies: none")
            if k.pending_now:
                with links[2]:
                    widgets.link(
                        to("events", source=[k.source], status=["pending", "processing", "failed"]),
                        count(k.pending_now, "pending event"),
                    )
            with links[3]:
                widgets.link(
                    to("events", source=[k.source], **{"from": current.start, "to": current.end}),
                    "Events in this range",
                )

    st.plotly_chart(
        charts.stacked_counts(
            frames.counts_frame(ov.deliveries, width, tz), current, "Deliveries by outcome"
        ),
        key="chart_deliveries",
    )
    st.plotly_chart(
        charts.stacked_counts(
            frames.counts_frame(ov.attempts, width, tz), current, "Processing outcomes"
        ),
        key="chart_attempts",
    )
    history = frames.history_frame(
        frames.snapshot_points(ov.snapshots),
        width,
        tz,
        every_seconds=cfg.reconcile.snapshot_interval_seconds,
    )
    depth, age_fig = charts.history(
        history,
        current,
        threshold,
        (
            "Pending events (snapshots)",
            "events",
            "Oldest unprocessed age (snapshots)",
        ),
    )
    st.plotly_chart(depth, key="chart_depth")
    st.plotly_chart(age_fig, key="chart_age")
    if not ov.snapshots:
        st.caption(
            "Queue snapshots come from `hookledger schedule`, one per source every "
            f"{cfg.reconcile.snapshot_interval_seconds} s."
        )
    st.plotly_chart(charts.discrepancies_per_run(ov.runs, current), key="chart_runs")


def refreshed() -> None:
    """The figures, refreshed every ``every`` seconds; a database lost meanwhile is one line, and
    the next refresh after it returns shows the figures again."""
    try:
        body()
    except SQLAlchemyError as exc:
        st.error(context.lost(exc))
        st.caption(
            "Turn on Refresh, or reload the page, to see the figures again."
            if every is None
            else f"The figures come back at the next refresh (every {every} s) once it answers."
        )


st.fragment(refreshed, run_every=every)()
