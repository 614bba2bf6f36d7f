"""Plotly figures built from the read models' values (pure: values in, figures out)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import plotly.graph_objects as go

from reconciler.ops.outbox import UnsentPoint
from reconciler.ops.overview import BucketCount, RunPoint, SnapshotPoint
from reconciler.ops.timerange import TimeRange, bucket_indexes, bucket_start

OUTCOME_COLOURS = {
    "accepted": "#2e7d32",
    "duplicate": "#f9a825",
    "rejected": "#c62828",
    "processed": "#2e7d32",
    "sent": "#2e7d32",
    "failed": "#ef6c00",
    "dead": "#b71c1c",
    "ignored": "#9e9e9e",
}
KIND_ORDER = ("missing", "duplicate", "diverged", "unapplied", "orphaned", "stuck", "dead")


def _layout(fig: go.Figure, title: str, y_title: str) -> go.Figure:
    fig.update_layout(
        title=title,
        barmode="stack",
        height=320,
        margin={"l": 40, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "h", "y": -0.2},
        yaxis_title=y_title,
    )
    return fig


def stacked_counts(
    counts: Sequence[BucketCount], rng: TimeRange, width: int, title: str
) -> go.Figure:
    """One stacked bar per bucket, a trace per (source, outcome); empty buckets are zero."""
    xs = list(bucket_indexes(rng, width))
    series: dict[tuple[str, str], dict[int, int]] = {}
    for c in counts:
        series.setdefault((c.source, c.key), {})[c.bucket] = c.n
    fig = go.Figure()
    times = [bucket_start(i, width) for i in xs]
    for (source, key), values in sorted(series.items()):
        fig.add_bar(
            x=times,
            y=[values.get(i, 0) for i in xs],
            name=f"{source} · {key}",
            marker_color=OUTCOME_COLOURS.get(key),
        )
    return _layout(fig, title, "count")


def queue_history(
    points: Sequence[SnapshotPoint], width: int, threshold_seconds: float
) -> tuple[go.Figure, go.Figure]:
    """Pending count, and oldest-unprocessed age with the stuck threshold drawn."""
    return _depth_and_age(
        [
            (p.source, bucket_start(p.bucket, width), p.unprocessed, p.oldest_age_seconds)
            for p in points
        ],
        threshold_seconds,
        ("Pending events (snapshots)", "events"),
        "Oldest unprocessed age (snapshots)",
    )


def outbox_history(
    points: Sequence[UnsentPoint], width: int, threshold_seconds: float
) -> tuple[go.Figure, go.Figure]:
    """Unsent messages, and the oldest one's age with the stuck threshold, per target."""
    return _depth_and_age(
        [(p.target, bucket_start(p.bucket, width), p.unsent, p.oldest_age_seconds) for p in points],
        threshold_seconds,
        ("Pending messages (snapshots)", "messages"),
        "Oldest pending message age (snapshots)",
    )


def _depth_and_age(
    rows: Sequence[tuple[str, datetime, float, float]],
    threshold_seconds: float,
    depth_title: tuple[str, str],
    age_title: str,
) -> tuple[go.Figure, go.Figure]:
    """A line per name: (name, time, depth, oldest age) rows as two figures."""
    depth, age = go.Figure(), go.Figure()
    by_name: dict[str, list[tuple[str, datetime, float, float]]] = {}
    for row in rows:
        by_name.setdefault(row[0], []).append(row)
    for name, pts in sorted(by_name.items()):
        xs = [p[1] for p in pts]
        depth.add_scatter(x=xs, y=[p[2] for p in pts], mode="lines+markers", name=name)
        age.add_scatter(x=xs, y=[p[3] for p in pts], mode="lines+markers", name=name)
    age.add_hline(
        y=threshold_seconds,
        line_dash="dash",
        line_color="#c62828",
        annotation_text=f"stuck after {threshold_seconds:.0f} s",
    )
    return _layout(depth, *depth_title), _layout(age, age_title, "seconds")


def discrepancies_per_run(runs: Sequence[RunPoint]) -> go.Figure:
    fig = go.Figure()
    labels = [f"{r.source} {r.started_at:%m-%d %H:%M}" for r in runs]
    kinds = [k for k in KIND_ORDER if any(r.counts.get(k) for r in runs)]
    for kind in kinds:
        fig.add_bar(x=labels, y=[r.counts.get(kind, 0) for r in runs], name=kind)
    return _layout(fig, "Discrepancies found per run", "records")
