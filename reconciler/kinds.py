"""Every discrepancy kind, registered once: what it means, the causes it carries, what finds it, and
how the dashboard, the money impact and the issues treat it.

The code that treats kinds alike reads this registry (the judge's kinds, the money impact, the
Overview's chart, the issues' grouping, the outbox check); docs/reconciliation.md describes each
and holds the checklist for what a new kind needs beyond its entry here. A kind is stored as its
short string (``reconciler.states.DiscrepancyKind``): adding one needs no migration.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from reconciler.states import DiscrepancyKind


class FoundBy(enum.StrEnum):
    PAGE = "page"  # the judge, on each page read; re-checked by the run's closing pass
    CLOSING = "closing"  # a pass over the inbox after the scan (reconcile.store.passes)
    RECEIVER = "receiver"  # the receiver, when a redelivery differs from the stored copy
    OUTBOX = "outbox"  # the outbox check (reconcile.outbox_check)


@dataclass(frozen=True)
class Kind:
    value: DiscrepancyKind
    label: str  # a few words, where a person reads it (the dashboard)
    meaning: str  # one sentence
    causes: tuple[str, ...]  # the values its ``cause`` column takes (empty: none)
    found_by: FoundBy
    business: bool = False  # about a check's business rows
    money: bool = False  # its amounts count in the money impact
    charted: bool = True  # drawn on the Overview's "Discrepancies found per run"
    own_issue: bool = False  # an issue of its own kind (dead letters), not grouped with the rest


REGISTRY: tuple[Kind, ...] = (
    Kind(
        DiscrepancyKind.MISSING,
        "missing from the inbox",
        "The source has the event (or object) and the inbox does not, past the grace period.",
        ("provider_failed", "lost_after_ack", "not_received"),
        FoundBy.PAGE,
        money=True,
    ),
    Kind(
        DiscrepancyKind.DUPLICATE,
        "applied more than once",
        "A business effect is on several rows where the check's key says one.",
        (),
        FoundBy.PAGE,
        business=True,
    ),
    Kind(
        DiscrepancyKind.DIVERGED,
        "business row differs",
        "A mapped business column differs from the source's latest state of the object.",
        (),
        FoundBy.PAGE,
        business=True,
        money=True,
    ),
    Kind(
        DiscrepancyKind.UNAPPLIED,
        "stored, not applied",
        "The inbox has an event a check applies to, and the check's table has no row for it.",
        (),
        FoundBy.PAGE,
        business=True,
        money=True,
    ),
    Kind(
        DiscrepancyKind.ORPHANED,
        "unknown to the source",
        "The inbox has a webhook event in the scanned window that the source does not list.",
        ("not_listed_by_source", "not_known_to_source"),
        FoundBy.CLOSING,
    ),
    Kind(
        DiscrepancyKind.STUCK,
        "waiting too long",
        "An inbox event has waited to be processed longer than stuck_after_seconds.",
        ("pending", "processing", "failed"),  # its status
        FoundBy.CLOSING,
    ),
    Kind(
        DiscrepancyKind.DEAD,
        "dead letter",
        "An inbox event failed for good: a person decides (replay, or leave it).",
        ("dead_letter",),
        FoundBy.CLOSING,
        own_issue=True,
    ),
    Kind(
        DiscrepancyKind.CONFLICT,
        "redelivered with other content",
        "A redelivery of a stored event differs from it, field by field: kept, never applied.",
        ("redelivery",),
        FoundBy.RECEIVER,
        charted=False,
    ),
    Kind(
        DiscrepancyKind.OUTBOX_STUCK,
        "outgoing message unsent",
        "An outgoing message has been unsent longer than its target's stuck_after_seconds.",
        ("pending", "sending", "failed"),  # its status
        FoundBy.OUTBOX,
        charted=False,
    ),
    Kind(
        DiscrepancyKind.OUTBOX_DEAD,
        "outgoing message gave up",
        "An outgoing message failed for good: a person decides (retry, or leave it).",
        ("transient", "permanent", "ambiguous"),  # its last error's class
        FoundBy.OUTBOX,
        charted=False,
        own_issue=True,
    ),
)
_BY_VALUE = {k.value: k for k in REGISTRY}


def kind(value: str) -> Kind:
    """The registered kind of a stored value (ValueError names an unknown one)."""
    return _BY_VALUE[DiscrepancyKind(value)]


def kinds(**having: object) -> tuple[DiscrepancyKind, ...]:
    """The kinds whose registered attributes equal ``having``, in the registry's order:
    ``kinds(found_by=FoundBy.PAGE)``, ``kinds(money=True)``."""
    return tuple(k.value for k in REGISTRY if all(getattr(k, a) == v for a, v in having.items()))
