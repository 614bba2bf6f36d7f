"""What the demo prints: the reconciliation's findings against the ground truth, the receive-only
sources, the mailer's receipts and the notifications sent."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from sqlalchemy import Engine, func, select

from reconciler.demo import truth
from reconciler.demo.mailer import Mailer
from reconciler.demo.ops_channel import OpsChannel
from reconciler.storage.models import (
    DELIVERIES,
    DISCREPANCIES,
    INBOX_EVENTS,
    DiscrepancyStatus,
    EventStatus,
)

RECEIVE_ONLY = ("slack",)  # sources the demo sends webhooks of but has no list API to reconcile


def notifications(
    console: Console, ops: OpsChannel, found: dict[str, dict[str, int]], engine: Engine
) -> list[str]:
    """One signed message a source about its new discrepancies and one about the issue its dead
    letters are grouped in, at the stand-in ops channel: lines that differ."""
    messages = ops.received()
    told = {(m["type"], m["data"].get("source")) for m in messages}
    with engine.connect() as conn:
        dead = {
            str(s)
            for s in conn.execute(
                select(INBOX_EVENTS.c.source)
                .where(INBOX_EVENTS.c.status == EventStatus.DEAD)
                .distinct()
            ).scalars()
        }
    # (a conflict is recorded by the receiver, not found by a run)
    wanted = {
        ("hookledger.discrepancies", s)
        for s, kinds in found.items()
        if any(n for kind, n in kinds.items() if kind != "conflict")
    }
    wanted |= {("hookledger.issue", s) for s in dead}  # dead letters: told per issue
    console.print(
        f"notifications: {len(messages)} signed messages at the demo's ops channel "
        f"({ops.refused} refused): " + "; ".join(sorted(m["data"]["title"] for m in messages))
    )
    return [f"no '{kind}' notification about {source}" for kind, source in sorted(wanted - told)]


def receipts(console: Console, mailer: Mailer, expected: set[str]) -> list[str]:
    """One receipt per paid invoice at the stand-in mailer, by key: lines that differ."""
    lines = mailer.check(expected)
    console.print(
        f"outbox: {len(expected)} paid invoices, {len(mailer.receipts)} receipts at the mailer, "
        f"one per key ({mailer.retried} keys sent more than once after a 503 or a late answer, "
        "mailed once)"
    )
    return lines


def found_counts(engine: Engine) -> dict[str, dict[str, int]]:
    d = DISCREPANCIES
    with engine.connect() as conn:
        rows = conn.execute(
            select(d.c.source, d.c.kind, func.count())
            .where(d.c.status == DiscrepancyStatus.OPEN)
            .group_by(d.c.source, d.c.kind)
        ).all()
    return truth.count_by(rows)


def received_only(console: Console, engine: Engine) -> None:
    """What the sources the demo does not reconcile received: events, duplicates, handshakes."""
    d = DELIVERIES
    with engine.connect() as conn:
        rows = conn.execute(
            select(d.c.source, d.c.outcome, func.count())
            .where(d.c.source.in_(RECEIVE_ONLY))
            .group_by(d.c.source, d.c.outcome)
        ).all()
    counts: dict[str, dict[str, int]] = {}
    for source, outcome, n in rows:
        counts.setdefault(str(source), {})[str(outcome)] = int(n)
    parts = [
        f"{source} {c.get('accepted', 0)} events ({c.get('duplicate', 0)} duplicate deliveries"
        + (f", {c['handshake']} handshake" if c.get("handshake") else "")
        + ")"
        for source, c in sorted(counts.items())
    ]
    if parts:
        console.print("received, not reconciled: " + "; ".join(parts))


def summary(
    console: Console, expected: dict[str, dict[str, int]], found: dict[str, dict[str, int]]
) -> None:
    # kinds down, sources across: as narrow as the sources are few (a terminal of 100 columns)
    table = RichTable(
        title="Open discrepancies found", caption="a difference: [red]found / ground truth[/red]"
    )
    table.add_column("kind")
    sources = sorted(set(expected) | set(found))
    for source in sources:
        table.add_column(source, justify="right")
    # the outbox's kinds only when there are any: the demo's mailer gets every receipt through
    seen = {k for counts in (*expected.values(), *found.values()) for k, n in counts.items() if n}
    for kind in (k for k in truth.KINDS if not k.startswith("outbox_") or k in seen):
        cells = []
        for source in sources:
            f, e = found.get(source, {}).get(kind, 0), expected.get(source, {}).get(kind, 0)
            cells.append(f"{f}" if f == e else f"[red]{f} / {e}[/red]")
        table.add_row(kind, *cells)
    console.print(table)
