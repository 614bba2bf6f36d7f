"""Outbox: outgoing messages per target: pending now, success rate and pause over the range, over
time, each message's attempts (its permalink: ``/outbox?message=ID``, the message first and the
list one click back) and its own retry; replay chosen dead ones with their keys, or every one of a
target that died since a time; pause and resume a target; check the outbox now."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import streamlit as st

from dashboard import charts, context, data, urlstate, widgets
from reconciler.errors import HookledgerError, NoSuchRecordError
from reconciler.ops import frames
from reconciler.ops import operator_actions as actions
from reconciler.ops import outbox as outbox_ops
from reconciler.ops.display import age as display_age
from reconciler.ops.display import count, when
from reconciler.ops.links import event_url, page_url
from reconciler.ops.masking import Masker
from reconciler.ops.timerange import choose_bucket, describe_width
from reconciler.outbox import pauses
from reconciler.states import OUTBOX_SOURCE_PREFIX, OutboxStatus

PAGE = 50
RECOVER_LOOKBACK = timedelta(hours=24)  # "Recover since" starts a day back: an outage's deaths


def _paused_note(pause: pauses.Pause) -> str:
    return (
        f":orange[**Paused** by `{pause.paused_by}` at {when(pause.paused_at, context.tz())}: "
        f"{pause.reason}. Its messages wait, pending, until it is resumed.]"
    )


def show_message(message_id: int) -> None:
    """One message at the top of the page: what it is, its attempts, its payload, its retry."""
    try:
        detail = data.outbox_message(message_id)
    except NoSuchRecordError as exc:
        st.error(str(exc))
        return
    tz = context.tz()
    masker = Masker(context.settings().dashboard.mask_fields)
    base = context.link_base()
    m = detail.message
    st.subheader(f"Message #{m['id']} to {m['target']}")
    hint = "" if base else " (relative: set `[dashboard] public_url` for links that work pasted)"
    st.caption(f"Permalink: `{page_url('outbox', base, message=m['id'])}`{hint}")
    c = st.columns(3)
    c[0].metric("Status", str(m["status"]))
    c[1].metric("Attempts", m["attempts"])
    c[2].metric("Last HTTP status", str(m["last_status_code"] or "-"))
    cause = (
        f" · caused by [{m['source']} event `{m['event_id']}`]"
        f"({event_url(m['source'], m['event_id'], base)})"
        if m["event_id"] and m["source"]
        else ""
    )
    st.markdown(
        f"Written {when(m['created_at'], tz)} · key `{m['key']}` · correlation id "
        f"`{m['correlation_id']}`{cause}"
    )
    pause = context.read(pauses.paused).get(m["target"])
    if pause is not None:
        st.markdown(f"Target {m['target']}: " + _paused_note(pause))
    if m["last_error"]:
        kind = f" ({m['error_class']})" if m["error_class"] else ""
        st.error(f"Last error{kind}: {masker.mask(m['last_error'])}")
    st.markdown("**Attempts**")
    if detail.attempts:
        widgets.dataframe(frames.table(detail.attempts, tz, text=("status_code",)), "ob_attempts")
    else:
        st.caption("No attempt yet.")
    st.markdown("**Payload** (secrets and configured PII fields masked)")
    st.code(masker.mask_body(m["payload"]), language="json")
    with st.expander("Headers the writer gave"):
        st.json(masker.mask(m["headers"] or {}))
    who = context.identity()
    if m["status"] not in (OutboxStatus.DEAD.value, OutboxStatus.FAILED.value):
        return
    if not who.can_act:
        st.caption("Read-only view: retry needs an operator sign-in.")
        return
    go, why, _ = context.confirmed_form(
        "ob_one", f"Yes, send message #{m['id']} again with its key", "Retry this message"
    )
    if go:
        engine = context.engine()
        one = [int(m["id"])]
        context.act_and_refresh(lambda a: outbox_ops.replay(engine, one, actor=a, reason=why))


def pause_controls(n: int, target: str, paused: bool) -> None:
    """Pause or resume one target: a reason, a confirmation, an audit entry."""
    verb = "Resume" if paused else "Pause"
    with st.expander(f"{verb} sending to {target}"):
        go, why, _ = context.confirmed_form(
            f"ob_pause_{n}",
            f"Yes, resume sending to {target}"
            if paused
            else f"Yes, pause {target}: its messages wait, pending",
            verb,
        )
    if go:
        engine = context.engine()
        act = outbox_ops.resume if paused else outbox_ops.pause
        context.act_and_refresh(lambda a: act(engine, target, actor=a, reason=why))


st.title("Outbox")
if not context.guard():
    st.stop()
urlstate.arrive("ob_")

urlstate.seed("ob_open", "message", None, parse=urlstate.parse_id)
opened: int | None = st.session_state["ob_open"]
if opened is not None:  # a permalink or a picked message: the message first, the list one back
    kept = {k: st.query_params.get_all(k) for k in st.query_params if k != "message"}
    if st.button("← All messages", key="ob_back"):
        st.session_state["ob_open"] = None
        urlstate.publish(kept)
        st.rerun()
    urlstate.publish({**kept, "message": opened})
    show_message(int(opened))
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
urlstate.seed_many("ob_status", "status", [], [s.value for s in OutboxStatus])
selected = right.multiselect("Targets", names, key="ob_targets")
st.caption(
    f"{rng.start:%Y-%m-%d %H:%M} - {rng.end:%Y-%m-%d %H:%M} UTC · one bar per "
    f"{describe_width(width)} · counts cached for {context.ttl()} s"
)

who = context.identity()
in_range: dict[tuple[str, str], int] = {}
for bucket in view.attempts:
    pair = (bucket.source, bucket.key)
    in_range[pair] = in_range.get(pair, 0) + bucket.n
for n, t in enumerate(view.targets):
    if t.target not in selected:
        continue
    pause = view.paused.get(t.target)
    with st.container(border=True):
        st.subheader(
            t.target
            + ("" if t.target in configured else " (not configured)")
            + (" (paused)" if pause else "")
        )
        c = st.columns(6)
        c[0].metric("Pending now", f"{t.unsent:,}")
        age = t.oldest_age_seconds(view.now)
        c[1].metric("Oldest pending", display_age(age))
        c[2].metric("Sent in range", f"{in_range.get((t.target, 'sent'), 0):,}")
        c[3].metric("Failed attempts in range", f"{in_range.get((t.target, 'failed'), 0):,}")
        c[4].metric("Dead now", f"{t.by_status.get(OutboxStatus.DEAD.value, 0):,}")
        rate = view.rates.get(t.target)
        c[5].metric(
            "Success rate in range",
            f"{rate.rate:.1%}" if rate else "-",
            help="Attempts answered with a 2xx ÷ all attempts that finished in the range"
            + (f": {rate.sent:,} of {rate.attempts:,}" if rate else " (none finished)"),
        )
        if pause is not None:
            st.markdown(_paused_note(pause))
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
        if who.can_act:
            pause_controls(n, t.target, pause is not None)

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
widgets.dataframe(frames.table(rows, tz, text=("last_status_code",)), "ob_messages")
n1, n2 = st.columns(2)
if st.session_state["ob_before"] and n1.button("Newer", key="ob_newer"):
    st.session_state["ob_before"].pop()
    st.rerun()
if len(rows) == PAGE and n2.button("Older", key="ob_older"):
    st.session_state["ob_before"].append(rows[-1]["id"])
    st.rerun()


def _open_picked() -> None:
    st.session_state["ob_open"] = st.session_state["ob_pick"]


st.selectbox(
    "Inspect",
    [r["id"] for r in rows],
    format_func=lambda i: next(
        f"#{r['id']} · {r['target']} · {r['status']} · {r['key']}" for r in rows if r["id"] == i
    ),
    index=None,
    key="ob_pick",
    on_change=_open_picked,
)
urlstate.publish(
    {**range_params, "target": [] if selected == names else selected, "status": statuses}
)

if not who.can_act:
    st.caption("Read-only view: replay and pause need an operator sign-in.")
    st.stop()

st.subheader("Dead messages")
dead, dead_total = data.outbox_messages(
    context.db_key(), tuple(selected), (OutboxStatus.DEAD.value,), None, 500
)
if not dead:
    st.success("No dead message for the selected targets.")
else:
    st.caption(
        f"{count(dead_total, 'dead message')} (the newest {len(dead):,} can be chosen here)."
    )
    # nothing chosen until the operator chooses: retrying one must not replay them all
    chosen = st.multiselect(
        "Replay these messages (same keys)", [r["id"] for r in dead], key="ob_dead_pick"
    )
    if not chosen:
        st.caption("Pick the messages to replay: none is chosen.")
    else:
        go, reason, _ = context.confirmed_form(
            "ob",
            f"Yes, replay {len(chosen)} message{'s' if len(chosen) != 1 else ''} with their keys",
            "Replay",
        )
        if go:
            engine = context.engine()
            context.act_and_refresh(
                lambda a: outbox_ops.replay(engine, chosen, actor=a, reason=reason)
            )

st.subheader("Recover since")
st.caption(
    "Every message of a target that went dead since a time, back to pending with its key (as "
    "Svix's recover): counted first, refused if the count moved before you confirm."
)
if "ob_recover_day" not in st.session_state:
    start = (now - RECOVER_LOOKBACK).astimezone(UTC)
    st.session_state["ob_recover_day"] = start.date()
    st.session_state["ob_recover_time"] = time(start.hour, start.minute - start.minute % 5)
r1, r2, r3 = st.columns([2, 2, 1])
recover_target = r1.selectbox("Target", names, key="ob_recover_target")
recover_day = r2.date_input("Went dead since (UTC date)", key="ob_recover_day")
recover_at = r3.time_input("at (UTC)", key="ob_recover_time", step=300)
if recover_target and isinstance(recover_day, date):
    since = datetime.combine(recover_day, recover_at or time.min, UTC)
    waiting = data.outbox_dead_since(context.db_key(), recover_target, since)
    st.caption(
        f"{count(waiting, 'message')} of {recover_target} went dead since "
        f"{since:%Y-%m-%d %H:%M} UTC."
    )
    if not waiting:
        context.here("ob_recover")  # the recovery just done: its result where its form was
    else:
        go_recover, why_recover, _ = context.confirmed_form(
            "ob_recover",
            "Yes, send this message again with its key"
            if waiting == 1
            else f"Yes, send these {waiting:,} messages again with their keys",
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
