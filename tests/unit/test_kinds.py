"""Every discrepancy kind is registered once (reconciler/kinds.py), fits its column, and is
described in docs/reconciliation.md; what the code treats alike is read from the registry (pure)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dashboard.charts import KIND_ORDER
from reconciler.issues.failures import _NOT_GROUPED
from reconciler.kinds import REGISTRY, FoundBy, kind, kinds
from reconciler.reconcile.export import IMPACT_KINDS
from reconciler.reconcile.judge import BUSINESS_KINDS, JUDGED_KINDS
from reconciler.reconcile.outbox_check import KINDS as OUTBOX_KINDS
from reconciler.states import DiscrepancyKind
from reconciler.storage.models import DISCREPANCIES

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_is_registered_once_and_fits_its_column() -> None:
    assert [k.value for k in REGISTRY] == list(DiscrepancyKind)
    length = DISCREPANCIES.c.kind.type.length
    for registered in REGISTRY:
        assert len(registered.value) <= length, registered.value
        assert registered.label and registered.label == registered.label.strip()
        assert registered.meaning.endswith(".") and "\n" not in registered.meaning


def test_the_reconciliation_page_describes_every_kind() -> None:
    page = (ROOT / "docs" / "reconciliation.md").read_text()
    table = page.split("| kind | meaning |", 1)[1].split("\n\n", 1)[0]
    described = set(
        re.findall(r"`([a-z_]+)`", " ".join(re.findall(r"^\| ([^|]+) \|", table, re.M)))
    )
    assert described >= {k.value for k in DiscrepancyKind}


def test_the_code_that_treats_kinds_alike_reads_the_registry() -> None:
    m = DiscrepancyKind
    assert set(JUDGED_KINDS) == {m.MISSING, m.UNAPPLIED, m.DUPLICATE, m.DIVERGED}
    assert set(BUSINESS_KINDS) == {m.UNAPPLIED, m.DUPLICATE, m.DIVERGED}
    assert set(IMPACT_KINDS) == {m.MISSING, m.DIVERGED, m.UNAPPLIED}
    assert set(_NOT_GROUPED) == {m.DEAD, m.OUTBOX_DEAD}
    assert set(OUTBOX_KINDS) == {m.OUTBOX_STUCK, m.OUTBOX_DEAD}
    assert KIND_ORDER == (
        "missing",
        "duplicate",
        "diverged",
        "unapplied",
        "orphaned",
        "stuck",
        "dead",
    )
    assert kinds(found_by=FoundBy.RECEIVER) == (m.CONFLICT,)


def test_a_stored_value_names_its_kind_and_an_unknown_one_says_so() -> None:
    assert kind("orphaned").causes == ("not_listed_by_source", "not_known_to_source")
    with pytest.raises(ValueError, match="'nope'"):
        kind("nope")
