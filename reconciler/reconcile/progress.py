"""What a running reconciliation reports as it goes: records read, slices done, request rate.

Shared by the CLI's progress bar and the dashboard's "Reconcile now" (pure, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ProgressHook", "ScanProgress"]


@dataclass(frozen=True)
class ScanProgress:
    records: int  # records read from the source so far
    slices_done: int | None = None  # of a scan read as time slices at once (None: sequential)
    slices_planned: int | None = None  # grows while dense slices are split
    request_rate: float | None = None  # requests a second the source was sent lately

    def fraction(self) -> float | None:
        """How far the scan is, where it can tell (slices done of planned); None otherwise."""
        if not self.slices_planned or self.slices_done is None:
            return None
        return self.slices_done / self.slices_planned

    def describe(self) -> str:
        """One line: ``12,345 records · slices 3/8 · 18.4 requests/s``."""
        parts = [f"{self.records:,} records"]
        if self.slices_planned:
            parts.append(f"slices {self.slices_done or 0}/{self.slices_planned}")
        if self.request_rate is not None:
            parts.append(f"{self.request_rate:.1f} requests/s")
        return " · ".join(parts)


ProgressHook = Callable[[str, ScanProgress], None]  # (source, progress so far)
