"""The judge stage of a page: its records and the facts looked up for it in, findings out.

Pure but for one memory (:class:`.recent.NewestMet`): a page listing an older record of an object
a check judged already on a newer one is not judged by that check again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from connectors.base import Record
from reconciler.config import CheckSettings
from reconciler.reconcile import judge
from reconciler.reconcile.lookup import PageFacts
from reconciler.reconcile.recent import REMEMBERED, NewestMet


class PageJudge:
    """Judges a scan's pages in order (see the module)."""

    def __init__(
        self,
        checks: Sequence[CheckSettings],
        source: judge.Source,
        cutoff: datetime,
        remembered: int = REMEMBERED,
    ) -> None:
        self.checks, self.source, self.cutoff = checks, source, cutoff
        self.judged = NewestMet(remembered)

    def __call__(
        self, records: Sequence[Record], inbox: judge.InboxFacts, facts: PageFacts
    ) -> list[judge.Finding]:
        """The page's findings: missing events, then each check's business findings. Every event
        id is remembered by the store; only the settled records are judged."""
        settled = judge.settled(records, self.cutoff)
        found = judge.missing(settled, inbox, self.source, self.checks)
        if not self.checks:
            return found
        received = judge.received(settled, inbox)
        for index, check in enumerate(self.checks):
            rows = facts.business[index]
            every = self.judged.without_older(index, judge.latest_records(check, settled))
            latest = judge.judged(every, judge.received_objects(check, settled, received), rows)
            fresh = {o: r for o, r in latest.items() if (r.object_type or "", o) not in facts.stale}
            found += judge.business(check, fresh, rows, self.source, facts.current)
            # stale ones too: the page with their newer event judges them, and a page listing an
            # older record of them is staler still (the look-up asked nothing about it)
            self.judged.remember(index, latest.values())
        return found
