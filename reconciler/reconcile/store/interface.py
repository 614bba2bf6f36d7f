"""What a scan asks of its store: the interface callers type it by.

A scan's store lives on one connection. Per source page it answers :meth:`ScanStore.lookup` (the
page's event ids the inbox lacks, the objects it holds) and stores :meth:`ScanStore.write` (the
page's seen ids, its findings and the cursor after it) atomically, so a run that dies resumes after
the last page stored. After the last page, :attr:`ScanStore.passes` answers the set questions over
the whole inbox (:class:`.passes.Passes`). Each database has one store type (``sqlite.SqliteStore``,
``postgres.PostgresStore``) made of a :class:`.scan.Scan` (what every database does alike), a
:class:`.passes.Passes`, and its own way a page travels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from connectors.base import Record
from reconciler.reconcile.judge import Finding, InboxFacts
from reconciler.reconcile.store.passes import Passes, Window
from reconciler.reconcile.store.scan import Scan

__all__ = ["ScanStore", "Window"]


class ScanStore(Protocol):
    """One scan of one source (see the module)."""

    scan: Scan
    passes: Passes

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        """Start the scan: the cursor to resume from (None: from scratch)."""

    def lookup(self, records: Sequence[Record]) -> InboxFacts:
        """What the inbox holds of a page's records."""

    def write(
        self, records: Sequence[Record], findings: Sequence[Finding], cursor: Mapping[str, Any]
    ) -> None:
        """The page's seen ids, its findings and the cursor after it, stored together."""

    def relisted(self, records: Sequence[Record]) -> None:
        """Records listed again that an earlier scan judged: seen, neither looked up nor judged."""

    def end_pages(self) -> None:
        """After the last page (or a source failure): store what is still held back."""

    def close(self) -> None:
        """Give the connection back as it was (a dry run: everything rolled back)."""
