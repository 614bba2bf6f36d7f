"""Outbox: outgoing messages per target: pending now, over time, each message's attempts (its
permalink: ``/outbox?message=ID``) and its own retry; replay chosen dead ones with their keys, or
every dead one of a target since a time; check the outbox for stuck and dead messages now."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

import streamlit as st

from dashboard import charts, context, data, urlstate, widgets
from reconciler.errors import HookledgerError, NoSuchRecordError
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops import outbox as outbox_ops
from reconciler.ops.display import age as display_age
from reconciler.ops.links import page_url
from reconciler.ops.masking import Masker
from reconciler.ops.timerange import choose_bucket, describe_width
from reconciler.states import OUTBOX_SOURCE_PREFIX, OutboxStatus

PAGE = 50

st.title("Outbox")
if not context.guard():
    st.stop()

cfg = context.settings()
configured = [t.name for t in cfg.outbox.targets]
threshold = cfg.reconcile.stuck_after_seconds
left, right = st.columns([1, 3])
rng, range_params = widgets.range_picker("ob", context.now(), where=left)
now = context.now()
width = choose_bucket(rng)
view = data.load_outbox(context.db_key(), rng.start, rng.end, width, now, tuple(configured))
names = [t.target for t in view.targets]
if not names:
    st.info(
        "No outbox target is configured and no message was written: add `[[outbox.targets]]` to "
        "the configuration and write messages with `event.outbox.add(...)` in a handler."
    )
    st.stop()
urlstate.seed_many("ob_targets", "target", names, names)
urlstate.seed("ob_open", "message", None, parse=urlstate.parse_id)
urlstate.seed_many("ob_status", "status", [], [s.value for s in OutboxStatus])
selected = right.multiselect("Targets", names, key="ob_targets")
st.caption(
    f"{rng.start:%Y-%m-%d %H:%M} - {rng.end:%Y-%m-%d %H:%M} UTC · one bar per "
    f"{describe_width(width)} · counts cached for {context.ttl()} s"
)

in_range: dict[tuple[str, str], int] = {}
for bucket in view.attempts:
    pair = (bucket.source, bucket.key)
    in_range[pair] = in_range.get(pair, 0) + bucket.n
for t in view.targets:
    if t.target not in selected:
        continue
    with st.container(border=True):
        st.subheader(t.target + ("" if t.target in configured else " (not configured)"))
        c = st.columns(5)
        c[0].metric("Pending now", f"{t.unsent:,}")
        age = t.oldest_age_seconds(view.now)
        c[1].metric("Oldest pending", display_age(age))
        c[2].metric("Sent in range", f"{in_range.get((t.target, 'sent'), 0):,}")
        c[3].metric("Failed attempts in range", f"{in_range.get((t.target, 'failed'), 0):,}")
        c[4].metric("Dead now", f"{t.by_status.get(OutboxStatus.DEAD.value, 0):,}")
        if age is not None and age > threshold:
            st.markdown(
                f":red[**The oldest pending message is {display_age(age)} old: past "
                f"stuck_after_seconds ({display_age(threshold)}).**]"
            )
        if t.target not in configured:
            st.markdown(
                ":orange[No `[[outbox.targets]]` entry has this name: nothing will send these "
                "messages until one does.]"
            )

tz = context.tz()
attempts = [b for b in view.attempts if b.source in selected]
st.plotly_chart(
    charts.stacked_counts(
        frames.counts_frame(attempts, width, tz), rng, "Publisher attempts by outcome"
    ),
    key="ob_chart_attempts",
)
points = [(p.target, p.bucket, p.unsent, p.oldest_age_seconds) for p in view.unsent]
history = frames.history_frame(
    [p for p in points if p[0] in selected],
    width,
    tz,
    every_seconds=cfg.reconcile.snapshot_interval_seconds,
)
depth, age_fig = charts.history(
    history,
    rng,
    threshold,
    ("Pending messages (snapshots)", "messages", "Oldest pending message age (snapshots)"),
)
st.plotly_chart(depth, key="ob_chart_depth")
st.plotly_chart(age_fig, key="ob_chart_age")

st.subheader("Messages")
f1, f2 = st.columns([3, 1])
statuses = f1.multiselect("Status", [s.value for s in OutboxStatus], key="ob_status")
if "ob_before" not in st.session_state:
    st.session_state["ob_before"] = []  # the pages' keyset positions, newest page first
before = st.session_state["ob_before"][-1] if st.session_state["ob_before"] else None
rows, total = data.outbox_messages(context.db_key(), tuple(selected), tuple(statuses), before, PAGE)
shown = len(st.session_state["ob_before"]) * PAGE
st.caption(f"{total:,} matching messages; showing {shown + 1:,}-{shown + len(rows):,}.")
widgets.dataframe(frames.table(rows, tz), "ob_messages")
n1, n2 = st.columns(2)
if st.session_state["ob_before"] and n1.button("Newer", key="ob_newer"):
    st.session_state["ob_before"].pop()
    st.rerun()
if len(rows) == PAGE and n2.button("Older", key="ob_older"):
    st.session_state["ob_before"].append(rows[-1]["id"])
    st.rerun()

masker = Masker(cfg.dashboard.mask_fields)
ids = [r["id"] for r in rows]


def _open_picked() -> None:
    st.session_state["ob_open"] = st.session_state["ob_pick"]


st.selectbox(
    "Inspect",
    ids,
    format_func=lambda i: next(
        f"#{r['id']} · {r['target']} · {r['status']} · {r['key']}" for r in rows if r["id"] == i
    ),
    index=None,
    key="ob_pick",
    on_change=_open_picked,
)
who = context.identity()
opened: int | None = st.session_state["ob_open"]
urlstate.publish(
    {
        **range_params,
        "target": [] if selected == names else selected,
        "status": statuses,
        "message": opened,
    }
)
if opened is not None:
    try:
        detail = data.outbox_message(int(opened))
    except NoSuchRecordError as exc:
        st.error(str(exc))
    else:
        m = detail.message
        st.markdown(
            f"**Message #{m['id']}** to `{m['target']}` · key `{m['key']}` · {m['status']} after "
            f"{m['attempts']} attempts · correlation id `{m['correlation_id']}`"
            + (f" · caused by {m['source']} event `{m['event_id']}`" if m["event_id"] else "")
        )
        link_base = context.link_base()
        relative = "" if link_base else " (relative: set `[dashboard] public_url`)"
        st.caption(f"Permalink: `{page_url('outbox', link_base, message=m['id'])}`{relative}")
        if m["last_error"]:
            st.error(f"Last error ({m['error_class']}): {masker.mask(m['last_error'])}")
        st.markdown("**Attempts**")
        st.table(frames.table(detail.attempts or [{"attempt": "none yet"}], tz))
        st.markdown("**Payload** (secrets and configured PII fields masked)")
        st.code(masker.mask_body(m["payload"]), language="json")
        with st.expander("Headers the writer gave"):
            st.json(masker.mask(m["headers"] or {}))
        if m["status"] in (OutboxStatus.DEAD.value, OutboxStatus.FAILED.value) and who.can_act:
            go_one, why_one, _ = context.confirmed_form(
                "ob_one", f"Yes, send message #{m['id']} again with its key", "Retry this message"
            )
            if go_one:
                engine = context.engine()
                one = [int(m["id"])]
                context.act_and_refresh(
                    lambda a: outbox_ops.replay(engine, one, actor=a, reason=why_one)
                )

if not who.can_act:
    st.caption("Read-only view: replay needs an operator sign-in.")
    st.stop()

st.subheader("Dead messages")
dead, dead_total = data.outbox_messages(
    context.db_key(), tuple(selected), (OutboxStatus.DEAD.value,), None, 500
)
if not dead:
    st.success("No dead message for the selected targets.")
else:
    st.caption(f"{dead_total:,} dead messages (the newest {len(dead):,} can be chosen here).")
    # nothing chosen until the operator chooses: retrying one must not replay them all
    chosen = st.multiselect(
        "Replay these messages (same keys)", [r["id"] for r in dead], key="ob_dead_pick"
    )
    go, reason, _ = context.confirmed_form(
        "ob", f"Yes, replay {len(chosen)} messages with their keys", "Replay"
    )
    if go:
        engine = context.engine()
        context.act_and_refresh(lambda a: outbox_ops.replay(engine, chosen, actor=a, reason=reason))

st.subheader("Recover since")
st.caption(
    "Every dead message of a target written since a time, back to pending with its key (as Svix's "
    "recover): counted first, refused if the count moved before you confirm."
)
r1, r2, r3 = st.columns([2, 2, 1])
recover_target = r1.selectbox("Target", names, key="ob_recover_target")
recover_day = r2.date_input("Written since (UTC date)", key="ob_recover_day")
recover_at = r3.time_input("at (UTC)", key="ob_recover_time", step=300)
if recover_target and isinstance(recover_day, date):
    since = datetime.combine(recover_day, recover_at or time.min, UTC)
    waiting = data.outbox_dead_since(context.db_key(), recover_target, since)
    st.caption(f"{waiting:,} dead messages of {recover_target} since {since:%Y-%m-%d %H:%M} UTC.")
    if waiting:
        go_recover, why_recover, _ = context.confirmed_form(
            "ob_recover",
            f"Yes, send these {waiting:,} messages again with their keys",
            "Recover",
        )
        if go_recover:
            engine = context.engine()
            context.act_and_refresh(
                lambda a: outbox_ops.recover(
                    engine, recover_target, since, actor=a, reason=why_recover, expected=waiting
                )
            )

st.subheader("Check now")
st.caption(
    "Reports messages pending past stuck_after_seconds (`outbox_stuck`) and dead ones "
    "(`outbox_dead`) as discrepancies, as the nightly run does."
)
target = st.selectbox("Target", names, key="ob_check_target")
if st.button("Check the outbox now", key="ob_check"):
    engine, settings = context.engine(), context.settings()

    def check(actor: str) -> str:
        name = f"{OUTBOX_SOURCE_PREFIX}{target}"
        summary = actions.reconcile_now(engine, settings, name, actor=actor)
        found = ", ".join(f"{k} {v}" for k, v in sorted(summary.found.items())) or "nothing"
        return f"{name}: {summary.status}; found {found}; resolved {summary.resolved}"

    try:
        context.act_and_refresh(check)
    except HookledgerError as exc:
        st.error(str(exc))
