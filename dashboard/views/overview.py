"""Overview: delivery health, processing outcomes, queue depth and discrepancies per source."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import streamlit as st

from dashboard import charts, context, data
from reconciler.ops.overview import kpis
from reconciler.ops.timerange import PRESETS, TimeRange, choose_bucket, describe_width, preset

st.title("Overview")
if not context.guard():
    st.stop()

names = context.source_names()
cfg = context.settings()
threshold = cfg.reconcile.stuck_after_seconds

left, right = st.columns([2, 3])
choice = left.selectbox("Range", [*PRESETS, "Custom"], index=1, key="ov_range")
now = context.now()
if choice == "Custom":
    today = now.date()
    picked = right.date_input(
        "From - to (UTC dates)", value=(today - timedelta(days=1), today), key="ov_custom"
    )
    if not isinstance(picked, tuple) or len(picked) != 2:
        st.info("Pick a start and an end date.")
        st.stop()
    start = datetime.combine(picked[0], time.min, UTC)
    end = datetime.combine(picked[1], time.min, UTC) + timedelta(days=1)
    rng = TimeRange(start, min(end, now)) if start < min(end, now) else TimeRange(start, end)
else:
    rng = preset(choice, now)
selected = right.multiselect("Sources", names, default=names, key="ov_sources")
if not names:
    st.warning("No source is configured: add a [[sources]] table to the configuration.")
    st.stop()
if not selected:
    st.info("Select at least one source.")
    st.stop()

width = choose_bucket(rng)
ov = data.load_overview(context.db_key(), rng.start, rng.end, width, now, tuple(selected))
st.caption(
    f"{rng.start:%Y-%m-%d %H:%M} - {rng.end:%Y-%m-%d %H:%M} UTC · one bar per "
    f"{describe_width(width)} · counts cached for {context.ttl()} s"
)

for k in kpis(ov, threshold):
    with st.container(border=True):
        st.subheader(k.source)
        if not k.has_data:
            st.info(f"No deliveries, events or discrepancies for '{k.source}' in this range.")
            continue
        c = st.columns(8)
        c[0].metric("Accepted", f"{k.accepted:,}")
        c[1].metric("Duplicate", f"{k.duplicate:,}")
        c[2].metric("Rejected", f"{k.rejected:,}")
        c[3].metric("Processed", f"{k.processed:,}")
        c[4].metric("Failed attempts", f"{k.failed:,}")
        c[5].metric("Dead-lettered", f"{k.dead:,}")
        c[6].metric("Pending now", f"{k.pending_now:,}")
        age = "-" if k.oldest_age_seconds is None else f"{k.oldest_age_seconds:,.0f} s"
        c[7].metric("Oldest unprocessed", age)
        if k.stuck:
            st.markdown(
                f":red[**Oldest unprocessed event is {k.oldest_age_seconds:,.0f} s old: past "
                f"stuck_after_seconds ({threshold} s).**]"
            )
        if k.conflict:
            st.markdown(
                f":orange[**{k.conflict:,} conflicting redeliveries** (an event id again with other "
                "content: held back, see Discrepancies, kind conflict).]"
            )
        if k.attempts:
            shares = " · ".join(
                f"{cls} {k.failure_share(cls):.1%}"
                for cls in ("transient", "ambiguous", "permanent")
            )
            st.markdown(f"Failed attempts by class (share of {k.attempts:,} attempts): {shares}")
        waiting = sum(k.waiting_for_a_person.values())
        if waiting:
            ambiguous = k.waiting_for_a_person.get("ambiguous", 0)
            st.markdown(
                f":red[**{waiting:,} events wait for a person**] (dead letters"
                + (
                    f"; {ambiguous:,} ambiguous: check whether their effect happened"
                    if ambiguous
                    else ""
                )
                + ")"
            )
        if k.open_discrepancies:
            st.markdown(
                "Open discrepancies: "
                + ", ".join(f"**{kind}** {n:,}" for kind, n in k.open_discrepancies.items())
            )
        else:
            st.markdown("Open discrepancies: none")

st.plotly_chart(
    charts.stacked_counts(ov.deliveries, rng, width, "Deliveries by outcome"),
    key="chart_deliveries",
)
st.plotly_chart(
    charts.stacked_counts(ov.attempts, rng, width, "Processing outcomes"), key="chart_attempts"
)
if ov.snapshots:
    depth, age_fig = charts.queue_history(ov.snapshots, width, threshold)
    st.plotly_chart(depth, key="chart_depth")
    st.plotly_chart(age_fig, key="chart_age")
else:
    st.info(
        "No queue snapshots in this range: `hookledger schedule` records one per source every "
        f"{cfg.reconcile.snapshot_interval_seconds} s."
    )
if ov.runs:
    st.plotly_chart(charts.discrepancies_per_run(ov.runs), key="chart_runs")
else:
    st.info("No reconciliation run in this range.")
