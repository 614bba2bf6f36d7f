"""The progress line a running reconciliation shows (pure)."""

from __future__ import annotations

from reconciler.reconcile.progress import ScanProgress


def test_a_sequential_scan_shows_records_and_rate_and_no_fraction() -> None:
    now = ScanProgress(12_345, request_rate=3.25)
    assert now.describe() == "12,345 records · 3.2 requests/s"
    assert now.fraction() is None


def test_a_sliced_scan_shows_its_slices_done_of_planned() -> None:
    now = ScanProgress(800, slices_done=3, slices_planned=8, request_rate=19.96)
    assert now.describe() == "800 records · slices 3/8 · 20.0 requests/s"
    assert now.fraction() == 3 / 8


def test_a_connector_that_counts_no_requests_shows_records_only() -> None:
    assert ScanProgress(0).describe() == "0 records"
    assert ScanProgress(5, slices_done=0, slices_planned=1).describe() == "5 records · slices 0/1"
