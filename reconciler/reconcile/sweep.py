"""Reconciling sources one after another: the loop the CLI, the scheduler and the dashboard share.

One source failing never stops the others; each outcome says what happened to its source.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from reconciler.config import Settings
from reconciler.errors import HookledgerError
from reconciler.reconcile.outbox_check import check_outbox, is_outbox, outbox_sources
from reconciler.reconcile.progress import ProgressHook
from reconciler.reconcile.run import Reconciler, RunSummary, reconcilable_sources
from reconciler.storage.engine import make_engine
from reconciler.storage.queries import register_notify_targets
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    source: str
    summary: RunSummary | None  # None: the run failed
    error: str | None = None


@contextlib.contextmanager
def reconciler_for(engine: Engine, settings: Settings) -> Iterator[Reconciler]:
    """A reconciler on the inbox's engine, with the business tables' own read-only engine when
    ``[business] url`` names one (disposed afterwards)."""
    url = settings.business.url
    business = make_engine(url, readonly=True) if url else None
    try:
        yield Reconciler(engine, settings, business_engine=business)
    finally:
        if business is not None:
            business.dispose()


def reconcile_sources(
    reconciler: Reconciler,
    sources: Sequence[str],
    *,
    trigger: str,
    full: bool = False,
    since: datetime | None = None,
    dry_run: bool = False,
    progress_for: Callable[[str], ProgressHook | None] | None = None,
    slot: datetime | None = None,
    quiet: bool = False,
) -> list[Outcome]:
    """Each source in turn; a failure is logged and kept in its outcome."""
    out = []
    for name in sources:
        try:
            summary = reconcile_one(
                reconciler,
                name,
                trigger=trigger,
                full=full,
                since=since,
                dry_run=dry_run,
                progress=progress_for(name) if progress_for else None,
                slot=slot,
                quiet=quiet,
            )
        except HookledgerError as exc:
            log.error("reconciliation of %s failed: %s", name, exc, extra={"source": name})
            out.append(Outcome(name, None, str(exc)))
        else:
            out.append(Outcome(name, summary))
    return out


def reconcile_one(
    reconciler: Reconciler,
    name: str,
    *,
    trigger: str,
    full: bool = False,
    since: datetime | None = None,
    dry_run: bool = False,
    progress: ProgressHook | None = None,
    slot: datetime | None = None,
    quiet: bool = False,
) -> RunSummary:
    """One source's run, or one outbox target's check (``outbox:<target>``)."""
    if not dry_run and not quiet:  # the run is news to a target configured before it
        register_targets(reconciler.engine, reconciler.settings, clock=reconciler.clock)
    if is_outbox(name):
        return check_outbox(
            reconciler.engine,
            reconciler.settings,
            name,
            trigger=trigger,
            owner=reconciler.owner,
            now=reconciler.clock(),
            dry_run=dry_run,
            slot=slot,
            quiet=quiet,
        )
    return reconciler.run(
        name,
        trigger=trigger,
        full=full,
        since=since,
        dry_run=dry_run,
        progress=progress,
        slot=slot,
        quiet=quiet,
    )


def register_targets(
    engine: Engine, settings: Settings, *, clock: Callable[[], datetime] = utcnow
) -> None:
    """Each ``[[notify]]`` target not seen before is first seen now, before a command that sends
    (a run from the CLI, the scheduler or the dashboard; the scheduler at start) does anything: a
    target added before a run hears about that run, and a fresh install's first night is not
    silent. Never raises (the notification pass that follows says what is wrong)."""
    if not settings.notify:
        return
    try:
        with engine.begin() as conn:
            register_notify_targets(conn, [t.name for t in settings.notify], clock())
    except Exception as exc:
        log.warning("notifications: the targets could not be recorded: %s", exc)


def nightly_names(engine: Engine, settings: Settings) -> list[str]:
    """What a reconciliation of everything covers: every source with an API, then every outbox
    target."""
    with engine.connect() as conn:
        targets = outbox_sources(conn, settings)
    return [s.name for s in reconcilable_sources(settings)] + targets
