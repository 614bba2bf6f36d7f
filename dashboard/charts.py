"""Plotly figures from the read models' DataFrames (pure: frames in, figures out).

Every time chart spans exactly the selected range, colours by source (outcome as the bar's
pattern), draws queue depth as steps that break where there is no snapshot, and says so when the
range holds nothing instead of drawing empty axes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from reconciler.kinds import kinds
from reconciler.ops.overview import RunPoint
from reconciler.ops.timerange import TimeRange

PATTERNS = {
    "accepted": "",
    "processed": "",
    "sent": "",
    "duplicate": "/",
    "ignored": ".",
    "conflict": "x",
    "failed": "x",
    "interrupted": "x",
    "rejected": "\\",
    "handshake": "-",
    "dead": "+",
}
KIND_ORDER = tuple(k.value for k in kinds(charted=True))
# Plotly's own pattern sequence, a source each
SOURCE_PATTERNS = ("", "/", "\\", "x", "-", "|", "+", ".")
NO_DATA = "no data in this range"


def _layout(
    fig: go.Figure, title: str, y_title: str, span: tuple[datetime, datetime] | None
) -> go.Figure:
    fig.update_layout(
        title=title,
        height=320,
        margin={"l": 40, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "v", "yanchor": "top", "y": 1, "x": 1.02, "font_size": 11},
        yaxis_title=y_title,
        xaxis_title=None,
    )
    if span is not None:
        fig.update_xaxes(range=list(span))
    return fig


def _empty(title: str, y_title: str, span: tuple[datetime, datetime] | None) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(
        text=NO_DATA, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font_size=16
    )
    fig.update_yaxes(visible=False)
    fig.update_xaxes(type="date")  # without data Plotly would number the range's axis -1 to 6
    return _layout(fig, title, y_title, span)


def _span(rng: TimeRange, frame_times: pd.Series | None = None) -> tuple[datetime, datetime]:
    tz = frame_times.dt.tz if frame_times is not None and len(frame_times) else None
    start, end = pd.Timestamp(rng.start), pd.Timestamp(rng.end)
    if tz is not None:
        start, end = start.tz_convert(tz), end.tz_convert(tz)
    return start.to_pydatetime(), end.to_pydatetime()


def _stacked(
    frame: pd.DataFrame,
    y: str,
    colour: str,
    pattern: str,
    patterns: dict[str, str],
    colours: list[str],
) -> go.Figure:
    """One bar trace per (colour, pattern) pair, stacked: the figure Plotly Express draws for
    ``px.bar(color=, pattern_shape=)``, built directly (its general machinery is most of the cost
    of a page load's figures; docs/benchmarks.md)."""
    palette = qualitative.Plotly
    colour_of = {name: palette[i % len(palette)] for i, name in enumerate(colours)}
    fig = go.Figure()
    for c in colours:
        mine = frame[frame[colour] == c]
        for p in dict.fromkeys(mine[pattern]):
            part = mine[mine[pattern] == p]
            fig.add_bar(
                x=part["time"],
                y=part[y],
                name=f"{c}, {p}",
                legendgroup=f"{c}, {p}",
                marker={"color": colour_of[c], "pattern": {"shape": patterns.get(p, "-")}},
                hovertemplate=f"{colour}={c}<br>{pattern}={p}<br>{y}=%{{y}}<br>%{{x}}<extra></extra>",
            )
    fig.update_layout(barmode="stack")
    return fig


def stacked_counts(frame: pd.DataFrame, rng: TimeRange, title: str) -> go.Figure:
    """Bars per bucket stacked by (source, outcome): colour is the source, pattern the outcome."""
    if frame.empty or int(frame["n"].sum()) == 0:
        return _empty(title, "count", _span(rng))
    sources = list(dict.fromkeys(frame["source"]))
    fig = _stacked(frame, "n", "source", "outcome", PATTERNS, sources)
    return _layout(fig, title, "count", _span(rng, frame["time"]))


def history(
    frame: pd.DataFrame, rng: TimeRange, threshold_seconds: float, titles: tuple[str, str, str]
) -> tuple[go.Figure, go.Figure]:
    """Depth and oldest age per name as steps (a value holds until the next snapshot); the age
    chart draws the stuck threshold. ``titles``: depth title, its unit, age title."""
    depth_title, unit, age_title = titles
    span = _span(rng, frame["time"] if not frame.empty else None)
    if frame.empty or frame["depth"].isna().all():
        return _empty(depth_title, unit, span), _empty(age_title, "seconds", span)
    depth, age = go.Figure(), go.Figure()
    for name, part in frame.groupby("name", sort=True):
        for fig, column in ((depth, "depth"), (age, "oldest_age_seconds")):
            fig.add_scatter(
                x=part["time"],
                y=part[column],
                mode="lines+markers",
                line_shape="hv",
                connectgaps=False,
                name=str(name),
            )
    age.add_hline(
        y=threshold_seconds,
        line_dash="dash",
        line_color="#c62828",
        annotation_text=f"stuck after {threshold_seconds:.0f} s",
    )
    return _layout(depth, depth_title, unit, span), _layout(age, age_title, "seconds", span)


def discrepancies_per_run(runs: Sequence[RunPoint], rng: TimeRange) -> go.Figure:
    """Discrepancies found per run, by kind, at the run's start time, over the selected range."""
    title = "Discrepancies found per run"
    if not runs:
        return _empty(title, "records", _span(rng))
    frame = pd.DataFrame(
        [
            {
                "time": pd.Timestamp(r.started_at),
                "source": r.source,
                "kind": kind,
                "records": r.counts.get(kind, 0),
            }
            for r in runs
            for kind in KIND_ORDER
            if r.counts.get(kind)
        ],
        columns=["time", "source", "kind", "records"],
    )
    if frame.empty:
        fig = _empty(title, "records", _span(rng))
        fig.add_annotation(
            text=f"{len(runs)} runs, nothing found",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.35,
        )
        return fig
    kinds = [k for k in KIND_ORDER if k in set(frame["kind"])]
    sources = dict.fromkeys(frame["source"])
    patterns = {s: SOURCE_PATTERNS[i % len(SOURCE_PATTERNS)] for i, s in enumerate(sources)}
    fig = _stacked(frame, "records", "kind", "source", patterns, kinds)
    return _layout(fig, title, "records", _span(rng))
