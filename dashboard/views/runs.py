"""Runs: reconciliation history, cursor positions, the next scheduled run, "Reconcile now"."""

from __future__ import annotations

import streamlit as st

from dashboard import context, data, urlstate, widgets
from reconciler.errors import HookledgerError
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops.health import first_line
from reconciler.ops.identity import require_operator
from reconciler.ops.links import page_url, to
from reconciler.ops.masking import Masker, masker_for
from reconciler.ops.runs import next_scheduled_run
from reconciler.reconcile.progress import ScanProgress
from reconciler.reconcile.run import reconcilable_sources

st.title("Runs")
if not context.guard():
    st.stop()
urlstate.arrive("r_")

settings = context.settings()
try:
    nxt = next_scheduled_run(settings, context.now())
    st.caption(
        f"Next scheduled reconciliation: {nxt:%Y-%m-%d %H:%M %Z} (cron '{settings.reconcile.schedule}'"
        f", when `hookledger schedule` runs)"
    )
except HookledgerError as exc:
    st.warning(str(exc))

names = context.source_names()
urlstate.seed_many("r_sources", "source", [], names)
chosen = st.multiselect("Sources", names, key="r_sources")
urlstate.publish({"source": chosen})
runs = data.recent_runs(context.db_key(), tuple(chosen or names))
maskers = {name: masker_for(settings, name) for name in names}


def masker(source: str) -> Masker:
    return maskers.get(source) or masker_for(settings, source)


if runs:
    widgets.dataframe(
        frames.table(
            [
                {
                    "started_at": r["started_at"],
                    "source": r["source"],
                    "trigger": r["trigger"],
                    "status": str(r["status"]),
                    "took": r["duration_seconds"],
                    "window_start": r["window_start"],
                    "window_end": r["window_end"],
                    "scanned": r["records_scanned"],
                    **{f"n_{k}": v for k, v in sorted((r["counts"] or {}).items())},
                    "error": first_line(masker(r["source"]).mask(r["error"] or "")),
                    "run_id": r["run_id"],
                    # what the run found, on the Discrepancies page (resolved ones too)
                    "findings": page_url(
                        "discrepancies", context.link_base(), run=r["run_id"], status="all"
                    ),
                }
                for r in runs
            ],
            context.tz(),
            age_columns=("took",),
        ),
        "r_runs",
        column_config={
            "findings": st.column_config.LinkColumn("findings", display_text="open findings")
        },
    )
    failed = [r for r in runs if str(r["status"]) == "failed"][:5]
    if failed:
        st.markdown("**Why recent runs failed** (the full error of each)")
        for r in failed:
            when = r["started_at"].astimezone(context.tz())
            with st.expander(f":red[{r['source']} {when:%Y-%m-%d %H:%M}] · run {r['run_id']}"):
                st.code(
                    masker(r["source"]).mask(r["error"] or "(no error recorded)"), language=None
                )
    with_findings = [r for r in runs if any((r["counts"] or {}).values())][:10]
    if (
        with_findings
    ):  # links a click follows (the table's cells are drawn, not links a keyboard reaches)
        st.markdown("**What recent runs found**")
        for r in with_findings:
            when = r["started_at"].astimezone(context.tz())
            widgets.link(
                to("discrepancies", run=r["run_id"], status="all"),
                f"{r['source']} {when:%Y-%m-%d %H:%M} ({sum((r['counts'] or {}).values()):,})",
            )
else:
    st.info("No reconciliation has run yet.")

st.subheader("Cursors")
cursors = data.cursors(context.db_key())
if cursors:
    widgets.dataframe(frames.table(cursors, context.tz()), "r_cursors")
else:
    st.caption("No source has a stored cursor yet.")

st.subheader("Reconcile now")
sources = [s.name for s in reconcilable_sources(settings)]
who = context.identity()
if not sources:
    st.info("No source can be reconciled: give one an API key (api_key_env) in the configuration.")
elif not who.can_act:
    st.info("Read-only view: reconciling needs an operator sign-in.")
else:
    for name in sources:
        if st.button(f"Reconcile {name} now", key=f"r_now_{name}"):
            bar = st.progress(0.0, text=f"{name}: starting")

            def hook(
                source: str, now: ScanProgress, bar: st.delta_generator.DeltaGenerator = bar
            ) -> None:
                # a sequential scan's total is unknown until the source says it has no more pages
                n = now.records
                share = now.fraction()
                done = min(0.95, n / (n + 2000)) if share is None else min(0.99, share)
                bar.progress(done, text=f"{source}: {now.describe()}")

            engine = context.engine()
            try:
                actor = require_operator(context.identity())
                summary = actions.reconcile_now(engine, settings, name, actor=actor, progress=hook)
            except HookledgerError as exc:
                result = context.ActionResult(False, f"{name}: {exc}")
            else:
                found = ", ".join(f"{k} {v}" for k, v in sorted(summary.found.items())) or "none"
                result = context.ActionResult(
                    True,
                    f"{name}: {summary.status}; {summary.records_scanned:,} records scanned; "
                    f"found: {found}; resolved {summary.resolved}",
                )
            # the run table shows the run just made, a failed one too (it is recorded)
            st.cache_data.clear()
            context.flash(result, at="r_now")
            st.rerun()
    context.here("r_now")  # what the last "Reconcile … now" did, beside the buttons
