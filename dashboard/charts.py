"""Plotly figures built from the read models' values (pure: values in, figures out)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from reconciler.ops.overview import BucketCount, RunPoint, SnapshotPoint
from reconciler.ops.timerange import TimeRange, bucket_indexes, bucket_start

OUTCOME_COLOURS = {
    "accepted": "#2e7d32",
    "duplicate": "#f9a825",
    "rejected": "#c62828",
    "processed": "#2e7d32",
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
    depth, age = go.Figure(), go.Figure()
    by_source: dict[str, list[SnapshotPoint]] = {}
    for p in points:
        by_source.setdefault(p.source, []).append(p)
    for source, pts in sorted(by_source.items()):
        xs = [bucket_start(p.bucket, width) for p in pts]
        depth.add_scatter(x=xs, y=[p.unprocessed for p in pts], mode="lines+markers", name=source)
        age.add_scatter(
            x=xs, y=[p.oldest_age_seconds for p in pts], mode="lines+markers", name=source
        )
    age.add_hline(
        y=threshold_seconds,
        line_dash="dash",
        line_color="#c62828",
        annotation_text=f"stuck after {threshold_seconds:.0f} s",
    )
    return (
        _layout(depth, "Pending events (snapshots)", "events"),
        _layout(age, "Oldest unprocessed age (snapshots)", "seconds"),
    )


def discrepancies_per_run(runs: Sequence[RunPoint]) -> go.Figure:
    fig = go.Figure()
    labels = [f"{r.source} {r.started_at:%m-%d %H:%M}" for r in runs]
    kinds = [k for k in KIND_ORDER if any(r.counts.get(k) for r in runs)]
    for kind in kinds:
        fig.add_bar(x=labels, y=[r.counts.get(kind, 0) for r in runs], name=kind)
    return _layout(fig, "Discrepancies found per run", "records")
