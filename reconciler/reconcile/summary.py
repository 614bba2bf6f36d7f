"""What a run reports: counts by kind, its window, the gaps it met, detection delays."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from connectors.base import Page
from reconciler.states import DiscrepancyKind


@dataclass
class RunSummary:
    run_id: str
    source: str
    status: str
    records_scanned: int = 0
    pages: int = 0
    found: dict[str, int] = field(default_factory=dict)  # discrepancies seen this run, by kind
    resolved: int = 0
    open_after: dict[str, int] = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    gaps: list[dict[str, Any]] = field(default_factory=list)
    detection_delay_median_seconds: float | None = None
    detection_delay_max_seconds: float | None = None
    error: str | None = None
    # the oldest webhook event inside the grace period the scan did not list (orphan watermark)
    unlisted_since: datetime | None = None
    quiet: bool = False  # the [[notify]] targets are not told what it found (reconcile --no-notify)

    def add(self, kind: DiscrepancyKind, n: int = 1) -> None:
        if n:
            self.found[kind.value] = self.found.get(kind.value, 0) + n

    def account(self, page: Page) -> None:
        """A page read: its records counted, the window widened to its times, its gap noted."""
        self.pages += 1
        self.records_scanned += len(page.records)
        times = [r.occurred_at for r in page.records if r.occurred_at is not None]
        if times:
            self.window_start = min(times + ([self.window_start] if self.window_start else []))
            self.window_end = max(times + ([self.window_end] if self.window_end else []))
        if page.gap:
            self.gaps.append(
                {
                    "start": page.gap.start.isoformat() if page.gap.start else None,
                    "end": page.gap.end.isoformat(),
                    "reason": page.gap.reason,
                    "cause": page.gap.cause,
                }
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "status": self.status,
            "records_scanned": self.records_scanned,
            "pages": self.pages,
            "found": self.found,
            "resolved": self.resolved,
            "open": self.open_after,
            "window_start": self.window_start.isoformat() if self.window_start else None,
            "window_end": self.window_end.isoformat() if self.window_end else None,
            "gaps": self.gaps,
            "detection_delay_median_seconds": self.detection_delay_median_seconds,
            "detection_delay_max_seconds": self.detection_delay_max_seconds,
            "error": self.error,
        }
