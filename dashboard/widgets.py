"""Widgets more than one page renders: the time range picker, in-app links, the health strip,
readable tables. They render only; what they show comes from ``reconciler.ops``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import urlstate
from reconciler.ops.health import Level, Signal
from reconciler.ops.links import PageLink
from reconciler.ops.timerange import (
    PRESETS,
    TimeRange,
    describe_span,
    parse_relative,
    relative_code,
)

CUSTOM = "Custom"
REFRESH = {"off": None, "10s": 10, "30s": 30, "1m": 60, "5m": 300}
LEVEL_BADGE = {
    Level.OK: ":green-badge[OK]",
    Level.WARN: ":orange-badge[CHECK]",
    Level.BAD: ":red-badge[ACT]",
}
SILENCED_BADGE = ":gray-badge[SILENCED]"


# how the presets are written in a URL (as the docs write them: ``now-24h``, not ``now-1d``)
PRESET_CODES = {
    "Last 15 minutes": "now-15m",
    "Last hour": "now-1h",
    "Last 24 hours": "now-24h",
    "Last 7 days": "now-7d",
    "Last 30 days": "now-30d",
}


def _linked(raw: str | None) -> str | None:
    """The label of a URL's ``range`` (``now-1h``, any minutes, hours or days; the older ``1h``),
    None without one; a range that cannot be read is said on the page, then ignored."""
    if not raw or raw == "custom":
        return None
    try:
        return describe_span(parse_relative(raw))
    except ValueError:
        st.warning(
            f"The link's range '{raw[:40]}' is not a range like now-1h, now-90m or now-7d: "
            "showing the page's default instead."
        )
        return None


def _code(label: str, raw: str | None, linked: str | None) -> str:
    """The URL's ``range`` for a picked label: the link's own text when it is the link's range
    (kept as written), else the preset's code."""
    if raw and label == linked:
        return raw
    span = PRESETS.get(label) or _span_of_label(label)
    return PRESET_CODES.get(label) or relative_code(span)


def range_picker(
    prefix: str, now: datetime, default: str = "now-24h", where: Any = None
) -> tuple[TimeRange, dict[str, Any]]:
    """A range relative to now (the presets, or any ``range=now-90m`` a link carries) or a custom
    one with times (UTC); returns the range and its URL parameters (``range=now-1h``)."""
    key = f"{prefix}_range"
    raw = st.query_params.get("range")
    choices = list(PRESETS)
    linked = _linked(raw)
    if linked is not None and linked not in choices:
        choices.append(linked)  # a link's own span joins the list for this page
    choices.append(CUSTOM)
    if key not in st.session_state:
        preset_name = describe_span(parse_relative(default))
        st.session_state[key] = CUSTOM if raw == "custom" else (linked or preset_name)
    label = (where or st).selectbox("Range", choices, key=key)
    if label != CUSTOM:
        span = PRESETS.get(label) or _span_of_label(label)
        return TimeRange.last(span, now), {"range": _code(label, raw, linked)}
    day_ago = now - timedelta(days=1)
    ends: tuple[tuple[str, str, datetime], ...] = (("1", "from", day_ago), ("2", "to", now))
    for part, param, fallback in ends:
        urlstate.seed(
            f"{prefix}_d{part}",
            param,
            fallback.date(),
            parse=lambda r: urlstate.parse_time(r).date(),
        )
        urlstate.seed(
            f"{prefix}_t{part}",
            param,
            fallback.time().replace(second=0, microsecond=0),
            parse=lambda r: urlstate.parse_time(r).time(),
        )
    c = st.columns(4)
    d1 = c[0].date_input("From (UTC date)", key=f"{prefix}_d1")
    t1 = c[1].time_input("at (UTC)", key=f"{prefix}_t1", step=300)
    d2 = c[2].date_input("To (UTC date)", key=f"{prefix}_d2")
    t2 = c[3].time_input("at (UTC) ", key=f"{prefix}_t2", step=300)
    if not isinstance(d1, date) or not isinstance(d2, date):
        st.info("Pick a start and an end date.")
        st.stop()
    start = datetime.combine(d1, t1 or time.min, UTC)
    end = datetime.combine(d2, t2 or time.min, UTC)
    if end <= start:
        st.error(
            f"The range ends ({end:%Y-%m-%d %H:%M}) before it starts ({start:%Y-%m-%d %H:%M})."
        )
        st.stop()
    return TimeRange(start, end), {"range": "custom", "from": start, "to": end}


ANY_TIME = "Any time"


def received_range(
    prefix: str, where: Any = None
) -> tuple[datetime | None, datetime | None, dict[str, Any]]:
    """When the items were received: any time, a range relative to when the page was opened (the
    presets, or any ``range=now-90m`` a link carries, kept as written), or two typed times (ISO
    8601, UTC without a zone; ``from``/``to`` in the URL). Returns the bounds and the URL
    parameters; a typed time that does not parse stops the page with one clear line."""
    key = f"{prefix}_received"
    raw = st.query_params.get("range")
    typed = bool(st.query_params.get("from") or st.query_params.get("to"))
    linked = _linked(raw)
    choices = [ANY_TIME, *PRESETS]
    if linked is not None and linked not in choices:
        choices.append(linked)
    choices.append(CUSTOM)
    if key not in st.session_state:
        st.session_state[key] = linked or (CUSTOM if raw == "custom" or typed else ANY_TIME)
    box = where or st
    label = box.selectbox("Received", choices, key=key)
    if label == ANY_TIME:
        return None, None, {}
    if label != CUSTOM:
        # anchored when picked, so the list's pages stay put while it is read
        anchor_key = f"{prefix}_received_anchor"
        anchored = st.session_state.get(anchor_key)
        if not anchored or anchored[0] != label:
            anchored = st.session_state[anchor_key] = (label, datetime.now(UTC))
        span = PRESETS.get(label) or _span_of_label(label)
        box.caption(f"Received after {anchored[1] - span:%Y-%m-%d %H:%M} UTC")
        return anchored[1] - span, None, {"range": _code(label, raw, linked)}
    times: list[datetime | None] = []
    cols = box.columns(2)
    for i, (param, label_, example) in enumerate(
        (
            ("from", "Received from", "2026-12-02T10:00"),
            ("to", "Received before", "2026-12-02T11:00"),
        )
    ):
        key = f"{prefix}_{param}"
        urlstate.seed(key, param, "", parse=lambda r: urlstate.parse_time(r).isoformat())
        text = cols[i].text_input(label_, key=key, placeholder=example).strip()
        if not text:
            times.append(None)
            continue
        try:
            times.append(urlstate.parse_time(text))
        except ValueError:
            st.error(f"{label_}: '{text}' is not a time like {example} (UTC).")
            st.stop()
    return times[0], times[1], {"range": "custom", "from": times[0], "to": times[1]}


def _span_of_label(label: str) -> timedelta:
    """``Last 90 minutes`` → its span (the labels :func:`describe_span` gives)."""
    _, n, noun = label.split(" ", 2)
    size = {"minute": 60, "hour": 3600, "day": 86400}[noun.rstrip("s")]
    return timedelta(seconds=int(n) * size)


def range_at(params: dict[str, Any], now: datetime, picked: TimeRange) -> TimeRange:
    """The picked range as of ``now``: a relative one moves with time (a refresh), a custom one
    not."""
    code = params["range"]
    return picked if code == "custom" else TimeRange.last(parse_relative(code), now)


def refresh_picker(prefix: str, where: Any = None) -> tuple[int | None, dict[str, Any]]:
    """How often the page's figures refresh (``refresh=30s`` in the URL; off by default); the
    seconds, or None, and the URL parameter."""
    key = f"{prefix}_refresh"
    legacy = {"true": "30s", "1": "30s", "yes": "30s", "false": "off", "0": "off", "no": "off"}
    urlstate.seed(key, "refresh", "off", parse=lambda r: legacy.get(r, r), choices=list(REFRESH))
    code = (where or st).selectbox(
        "Refresh",
        list(REFRESH),
        key=key,
        format_func=lambda c: "off" if c == "off" else f"every {c}",
    )
    return REFRESH[code], {"refresh": None if code == "off" else code}


def link(target: PageLink, label: str) -> None:
    """An in-app link (no reload; the target page opens with the link's state)."""
    st.page_link(f"views/{target.page}.py", label=label, query_params=target.query() or None)


def health_strip(signals: Sequence[Signal]) -> None:
    """The strip: each signal's badge, figure and detail, and a link to what it counts."""
    per_row = 4
    for first in range(0, len(signals), per_row):
        cols = st.columns(per_row)
        for i, signal in enumerate(signals[first : first + per_row]):
            with cols[i].container(border=True):
                badge = SILENCED_BADGE if signal.silenced else LEVEL_BADGE[signal.level]
                st.markdown(f"{badge} {signal.label}: **{signal.value}**")
                st.caption(signal.detail)
                if signal.silenced:
                    st.caption(signal.silenced)
                if signal.link is not None:
                    link(signal.link, "Open")


# an amount in the currency's units (frames.table): two decimals, the column still sorts as numbers
MONEY = {"amount": st.column_config.NumberColumn("amount", format="%.2f")}


def dataframe(frame: pd.DataFrame, key: str, **kwargs: Any) -> None:
    """A readable table, or a line saying it is empty."""
    if frame.empty:
        st.caption("Nothing to show.")
        return
    st.dataframe(frame, hide_index=True, key=key, **kwargs)
