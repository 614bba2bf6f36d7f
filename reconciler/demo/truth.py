"""The demo's faults and what the reconciliation must find because of them (pure: values in, values
out). Everything here is decided from the sandbox world, the seed and the delivery plan, never from
what hookledger stored: that independence is what makes the comparison a test."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from connectors.sandbox.sender import Report
from connectors.sandbox.world import World
from reconciler.demo.handlers import STEP
from reconciler.outbox.writer import event_key
from reconciler.states import DiscrepancyKind

KINDS = tuple(kind.value for kind in DiscrepancyKind)


@dataclass(frozen=True)
class HandlerFaults:
    transient: list[str]  # fail once, then succeed (the failed attempt's writes roll back)
    permanent: list[str]  # dead-lettered
    # Shopify orders written, then "the fulfilment call got no answer": the retry's verify finds
    # the order written and settles the event without running the handler again
    ambiguous: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Tampering:
    """Business rows changed behind hookledger's back after the events were applied."""

    invoice_status: list[str] = field(default_factory=list)  # status set to "uncollectible"
    invoice_deleted: list[str] = field(default_factory=list)
    order_status: list[str] = field(default_factory=list)  # financial_status set to "voided"
    order_deleted: list[str] = field(default_factory=list)
    # a second ledger credit written by the application's own code, outside any handler's
    # transaction (no applied mark guards it): what the reconciler's duplicate check is for
    ledger_doubled: list[str] = field(default_factory=list)


def _received(report: Report) -> list[str]:
    dropped = set(report.dropped)
    return [e for e in report.planned if e not in dropped]


def choose_handler_faults(
    world: World, reports: Mapping[str, Report], seed: int, rate: float = 0.02
) -> HandlerFaults:
    """Transient failures on ~``rate`` of the received events (at least three invoice.paid ones),
    permanent ones on ~``rate``/2 of the event types no business check covers."""
    rng = random.Random(seed * 7 + 1)
    types = {e["id"]: e["type"] for e in world.stripe_events}
    types |= {a.guid: a.event for a in world.github_attempts}
    received = [e for r in reports.values() for e in _received(r)]
    paid = [e for e in received if types.get(e) == "invoice.paid"]
    transient = set(rng.sample(paid, min(3, len(paid))))
    transient |= {e for e in received if rng.random() < rate}
    unchecked = [
        e
        for e in received
        if types.get(e) in ("charge.succeeded", "customer.created", "push") and e not in transient
    ]
    permanent = {e for e in unchecked if rng.random() < rate / 2}
    for report in reports.values():  # at least one dead letter per source that can have one
        mine = [e for e in _received(report) if e in set(unchecked)]
        if mine and not permanent & set(mine):
            permanent.add(rng.choice(mine))
    shopify = (
        [e for e in _received(reports["shopify"]) if e not in transient | permanent]
        if "shopify" in reports
        else []
    )
    ambiguous = set(rng.sample(shopify, min(2, len(shopify))))
    return HandlerFaults(sorted(transient), sorted(permanent), sorted(ambiguous))


def choose_conflict(
    world: World, reports: Mapping[str, Report], faults: HandlerFaults, seed: int
) -> str | None:
    """A received invoice.paid event that the demo delivers once more with another ``amount_paid``
    (a proxy or a second system reusing the id): a conflict with one field, never applied."""
    if "stripe" not in reports:
        return None
    rng = random.Random(seed * 7 + 3)
    skip = set(faults.transient) | set(faults.permanent)
    received = set(_received(reports["stripe"]))
    candidates = sorted(
        e["id"]
        for e in world.stripe_events
        if e["type"] == "invoice.paid" and e["id"] in received and e["id"] not in skip
    )
    return rng.choice(candidates) if candidates else None


def conflicting_copy(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with ``data.object.amount_paid`` changed (what :func:`choose_conflict` sends)."""
    obj = dict(event["data"]["object"])
    obj["amount_paid"] = int(obj.get("amount_paid") or 0) + 100
    return {**event, "data": {**event["data"], "object": obj}}


def _invoice_events(world: World) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in world.stripe_events:
        if e["type"] in STEP:
            out.setdefault(e["data"]["object"]["id"], []).append(e)
    return out


def choose_tampering(
    world: World, reports: Mapping[str, Report], faults: HandlerFaults, seed: int
) -> Tampering:
    """Rows to change or delete, among objects whose every event was received and applied."""
    rng = random.Random(seed * 7 + 2)
    skip = set(faults.transient) | set(faults.permanent)
    stripe_dropped = set(reports["stripe"].dropped) if "stripe" in reports else set()
    complete = sorted(
        inv
        for inv, events in _invoice_events(world).items()
        if all(e["id"] not in stripe_dropped and e["id"] not in skip for e in events)
    )
    rng.shuffle(complete)
    received_orders = []
    if "shopify" in reports:
        received_orders = sorted(
            _order_of(world, reports["shopify"])[e] for e in _received(reports["shopify"])
        )
        rng.shuffle(received_orders)
    n_inv = max(1, len(complete) // 40)
    n_ord = max(1, len(received_orders) // 40)
    n_del = max(1, n_inv // 2)
    paid = {
        inv
        for inv, events in _invoice_events(world).items()
        if any(e["type"] == "invoice.paid" for e in events)
    }
    credited = [inv for inv in complete[n_inv + n_del :] if inv in paid]
    return Tampering(
        invoice_status=sorted(complete[:n_inv]),
        invoice_deleted=sorted(complete[n_inv : n_inv + n_del]),
        ledger_doubled=sorted(credited[: max(3, n_inv)]),
        order_status=sorted(received_orders[:n_ord]),
        order_deleted=sorted(received_orders[n_ord : n_ord + max(1, n_ord // 2)]),
    )


def _order_of(world: World, report: Report) -> dict[str, str]:
    """Webhook id -> order id: the sender sends one webhook per order, in updated_at order."""
    orders = sorted(world.shopify_orders.values(), key=lambda o: o["updated_at"])
    return {wid: str(o["id"]) for wid, o in zip(report.planned, orders, strict=True)}


def expected_counts(
    world: World,
    reports: Mapping[str, Report],
    faults: HandlerFaults,
    tampering: Tampering,
    conflict: str | None = None,
) -> dict[str, dict[str, int]]:
    """Open discrepancies per source and kind that the reconciliation must report."""
    out: dict[str, dict[str, int]] = {}

    def add(source: str, kind: str, n: int = 1) -> None:
        if n:
            bucket = out.setdefault(source, {})
            bucket[kind] = bucket.get(kind, 0) + n

    permanent = set(faults.permanent)
    for source, report in reports.items():
        if source != "twilio":  # Stripe by event, GitHub by delivery, Shopify by order (one
            # webhook per order); Twilio below
            add(source, "missing", len(report.dropped))
        add(source, "dead", len(permanent & set(_received(report))))
    if "twilio" in reports:
        missing, diverged = _twilio_expected(world, reports["twilio"])
        add("twilio", "missing", missing)
        add("twilio", "diverged", diverged)

    if "stripe" in reports:
        dropped = set(reports["stripe"].dropped)
        deleted = set(tampering.invoice_deleted)
        changed = set(tampering.invoice_status)
        for inv, events in _invoice_events(world).items():
            got = [e for e in events if e["id"] not in dropped]
            if not got or inv in deleted:
                continue
            newest = max(got, key=lambda e: e["created"] * 10 + STEP[e["type"]])
            local = dict(newest["data"]["object"])
            if inv in changed:
                local["status"] = "uncollectible"
            truth = world.stripe_objects[("invoice", inv)]
            add("stripe", "diverged", sum(local[f] != truth[f] for f in ("status", "amount_paid")))
        add("stripe", "unapplied", len(deleted))
        # A transient fault after the ledger credit no longer credits twice (the failed attempt's
        # writes roll back with it: docs/handlers.md, "Applied once"); the credits the
        # application doubled itself are the duplicates
        add("stripe", "duplicate", len(tampering.ledger_doubled))
    if conflict is not None:
        add("stripe", "conflict")  # one field: amount_paid
    if "shopify" in reports:
        add("shopify", "diverged", len(tampering.order_status))
        add("shopify", "unapplied", len(tampering.order_deleted))
    return {s: dict(sorted(k.items())) for s, k in sorted(out.items())}


def _twilio_expected(world: World, report: Report) -> tuple[int, int]:
    """Twilio lists each message at its current status only: a dropped callback of that status is
    missing (an earlier status's cannot be seen), and the message's row, written by the callbacks
    that did arrive, is left at an earlier status (diverged) unless none arrived at all."""
    dropped = set(report.dropped)
    missing = diverged = 0
    for sid, message in world.twilio_messages.items():
        final = f"{sid}:{message['status']}"
        if final in dropped:
            missing += 1
            earlier = [f"{sid}:{s}" for s in world.twilio_paths[sid][:-1]]
            diverged += any(e not in dropped for e in earlier)
    return missing, diverged


def expected_drill(world: World, reports: Mapping[str, Report]) -> dict[str, int]:
    """What ``hookledger drill --handlers`` over the Stripe events must report: the ledger credit
    is not idempotent, so every invoice with a received invoice.paid event is credited once per
    delivery: one ``duplicate`` difference each (every other table converges: "only if newer")."""
    if "stripe" not in reports:
        return {}
    received = set(_received(reports["stripe"]))
    paid = {
        e["data"]["object"]["id"]
        for e in world.stripe_events
        if e["type"] == "invoice.paid" and e["id"] in received
    }
    return {"duplicate": len(paid)} if paid else {}


def expected_receipts(world: World, reports: Mapping[str, Report]) -> set[str]:
    """The keys of the receipts the mailer must have, one per paid invoice whose invoice.paid
    event was received (a dropped one never ran its handler; duplicates and retries send nothing
    twice); ``invoice.paid`` is never among the permanent faults."""
    if "stripe" not in reports:
        return set()
    received = set(_received(reports["stripe"]))
    return {
        event_key("stripe", e["id"], "mailer")
        for e in world.stripe_events
        if e["type"] == "invoice.paid" and e["id"] in received
    }


def ground_truth(
    reports: Mapping[str, Report],
    faults: HandlerFaults,
    tampering: Tampering,
    expected: Mapping[str, Mapping[str, int]],
    conflict: str | None = None,
    drill: Mapping[str, int] | None = None,
    receipts: set[str] | None = None,
) -> dict[str, Any]:
    return {
        "expected_receipts": sorted(receipts or ()),
        "drill_differences": dict(drill or {}),
        "deliveries": {s: r.to_json() for s, r in reports.items()},
        "handler_faults": asdict(faults),
        "tampering": asdict(tampering),
        "conflicting_redelivery": conflict,
        "expected_open_discrepancies": expected,
    }


def compare(
    expected: Mapping[str, Mapping[str, int]], found: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """Differences, one line each (empty when the reconciliation found exactly the ground truth)."""
    lines = []
    for source in sorted(set(expected) | set(found)):
        for kind in KINDS:
            e = expected.get(source, {}).get(kind, 0)
            f = found.get(source, {}).get(kind, 0)
            if e != f:
                lines.append(f"{source} {kind}: expected {e}, found {f}")
    return lines


def count_by(rows: Iterable[Sequence[Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for source, kind, n in rows:
        out.setdefault(str(source), {})[str(kind)] = int(n)
    return out
