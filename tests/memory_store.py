"""An in-memory scan store (reconcile.store.interface.ScanStore) that records the calls made of it
by name, as procrastinate's in-memory connector does: unit tests of the run's page loop and of the
closing passes need no database, and pin what is asked of the store rather than its SQL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from connectors.base import Record
from reconciler.reconcile.judge import Finding, InboxFacts

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


class Calls:
    """Every call made, in order, as (name, args); ``names()`` for the sequence of names."""

    def __init__(self) -> None:
        self.made: list[tuple[str, tuple[Any, ...]]] = []

    def __call__(self, name: str, *args: Any) -> None:
        self.made.append((name, args))

    def names(self) -> list[str]:
        return [name for name, _ in self.made]

    def args(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.made if called == name]


class MemoryScan:
    """What every database's store shares (store.scan.Scan), in memory."""

    def __init__(self, calls: Calls, *, now: datetime = NOW, dry_run: bool = False) -> None:
        self.calls, self.now, self.dry_run = calls, now, dry_run
        self.source, self.run_id, self.conn = "memory", "run-1", None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.calls("transaction")
        yield None
        self.calls("commit")


class MemoryPasses:
    """The closing passes (store.passes.Passes): each call recorded; answers come from
    ``answers`` by name (a callable is called with the arguments), else a neutral value."""

    NEUTRAL: Mapping[str, Any] = {
        "window": (None, 0),
        "open_kinds": set(),
        "orphans": 0,
        "orphans_by_id": 0,
        "stuck_and_dead": (0, 0),
        "resolve_set_kinds": 0,
        "open_judged": [],
        "inbox_presence": (set(), set()),
        "resolve": 0,
        "first_unlisted_in_grace": None,
        "forget_seen": None,
        "detection_delays": None,
        "orphan_watermark": None,
        "save_orphan_watermark": None,
        "late_orphan_candidates": [],
    }

    def __init__(self, calls: Calls, answers: Mapping[str, Any]) -> None:
        self._calls, self._answers = calls, dict(answers)

    def __getattr__(self, name: str) -> Any:
        if name not in self.NEUTRAL:
            raise AttributeError(f"the closing passes have no '{name}'")

        def call(*args: Any) -> Any:
            self._calls(name, *args)
            answer = self._answers.get(name, self.NEUTRAL[name])
            return answer(*args) if callable(answer) else answer

        return call


class MemoryStore:
    """A scan store over an in-memory inbox (the event ids it holds). ``fail_on``: the name of a
    page call that raises ``failure`` (a database gone away)."""

    def __init__(
        self,
        inbox: Sequence[str] = (),
        *,
        answers: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        fail_on: str | None = None,
        failure: BaseException | None = None,
    ) -> None:
        self.calls = Calls()
        self.scan: Any = MemoryScan(self.calls, dry_run=dry_run)
        self.passes: Any = MemoryPasses(self.calls, answers or {})
        self.inbox = set(inbox)
        self.cursor: Mapping[str, Any] | None = None
        self.findings: list[Finding] = []
        self.seen: list[str] = []
        self.fail_on, self.failure = fail_on, failure

    def _call(self, name: str, *args: Any) -> None:
        self.calls(name, *args)
        if name == self.fail_on and self.failure is not None:
            raise self.failure

    def begin(self, *, full: bool) -> dict[str, Any] | None:
        self._call("begin", full)
        return None if full or self.cursor is None else dict(self.cursor)

    def lookup(self, records: Sequence[Record]) -> InboxFacts:
        self._call("lookup", [r.event_id for r in records])
        absent = {r.event_id for r in records if r.event_id and r.event_id not in self.inbox}
        return InboxFacts(frozenset(absent))

    def write(
        self, records: Sequence[Record], findings: Sequence[Finding], cursor: Mapping[str, Any]
    ) -> None:
        self._call("write", [r.event_id for r in records], cursor)
        self.seen += [r.event_id for r in records if r.event_id]
        self.findings += findings
        self.cursor = cursor

    def relisted(self, records: Sequence[Record]) -> None:
        self._call("relisted", [r.event_id for r in records])
        self.seen += [r.event_id for r in records if r.event_id]

    def end_pages(self) -> None:
        self._call("end_pages")

    def close(self) -> None:
        self._call("close")
