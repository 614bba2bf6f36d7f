"""The redelivery drill: deliver stored events again, several times, shuffled, and compare the
business state that results with the state of each event applied once, in provider order.

``handlers`` mode runs the configured handlers in process, without the inbox's dedup (replays and
lease take-overs run a handler again, so a handler must be safe on its own), against a scratch
business database whose schema is copied from ``[business] url`` by reflection; the reference is
a second scratch database. ``target`` mode re-signs each stored body with the source's own scheme
and secret and POSTs it to a staging receiver, then compares the staging business database with a
reference (default ``[business] url``) on the drilled objects' rows.

Nothing is written to the production inbox or business database: the inbox is only read (its event
ids, in memory; bodies a batch at a time), and a scratch or staging URL equal to production's is
refused, as is a target that is this deployment's own receiver.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import Engine, MetaData, func, inspect, select
from sqlalchemy.engine import make_url

from reconciler.config import Settings, SourceSettings
from reconciler.errors import ActionRefusedError, ConfigError
from reconciler.inbox.claims import event_of
from reconciler.inbox.handlers import (
    Event,
    HandlerRegistry,
)
from reconciler.ops.drill_compare import Difference, TableSpec, compare_messages, compare_states
from reconciler.ops.replaying import RecordedOutbox, ReplayApplier
from reconciler.sources import provider
from reconciler.storage.engine import make_engine
from reconciler.storage.models import INBOX_EVENTS

BATCH = 200
Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class DrillResult:
    deliveries: int = 0
    events: int = 0
    differences: list[Difference] = field(default_factory=list)
    failed: int = 0  # applications whose every attempt failed (or that failed permanently)

    @property
    def equal(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {
            "deliveries": self.deliveries,
            "events": self.events,
            "equal": self.equal,
            "failed_applications": self.failed,
            "differences": [d.to_json() for d in self.differences],
        }


def event_ids(inbox: Engine, source: str, since: datetime, until: datetime | None) -> list[int]:
    """The source's stored events received in ``[since, until)``, in provider order (occurred,
    then received). Only their row ids are held, not their bodies."""
    e = INBOX_EVENTS
    stmt = select(e.c.id).where(e.c.source == source, e.c.received_at >= since)
    if until is not None:
        stmt = stmt.where(e.c.received_at < until)
    stmt = stmt.order_by(func.coalesce(e.c.occurred_at, e.c.received_at), e.c.received_at, e.c.id)
    with inbox.connect() as conn:
        return [int(i) for (i,) in conn.execute(stmt)]


def _events(inbox: Engine, ids: Sequence[int]) -> dict[int, Event]:
    with inbox.connect() as conn:
        rows = conn.execute(select(INBOX_EVENTS).where(INBOX_EVENTS.c.id.in_(list(ids))))
        return {int(r.id): event_of(r) for r in rows}


def plan(ids: Sequence[int], times: int, shuffle: bool, seed: int) -> list[int]:
    """Each id ``times`` times: shuffled (seeded), or in provider order, copies side by side."""
    order = [i for i in ids for _ in range(times)]
    if shuffle:
        random.Random(seed).shuffle(order)
    return order


def _same_database(a: str, b: str | None) -> bool:
    if not b:
        return False
    ua, ub = make_url(a), make_url(b)
    return ua.set(password=None).render_as_string() == ub.set(password=None).render_as_string()


def check_scratch_url(url: str, settings: Settings, option: str) -> None:
    for production, name in (
        (settings.database.url, "[database] url"),
        (settings.business.url, "[business] url"),
    ):
        if _same_database(url, production):
            raise ConfigError(
                f"{option}: is the production database ({name}); the drill needs a scratch one"
            )


def check_target(url: str, settings: Settings) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--target {url!r}: not an http(s) URL")
    own_hosts = {"127.0.0.1", "localhost", "::1", "0.0.0.0", settings.receiver.host}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.hostname in own_hosts and port == settings.receiver.port:
        raise ConfigError(
            f"--target {url!r}: is this deployment's own receiver ([receiver] "
            f"{settings.receiver.host}:{settings.receiver.port}); the drill needs a staging one"
        )


def _source_tables(settings: Settings, source: SourceSettings) -> list[TableSpec]:
    seen: dict[str, TableSpec] = {}
    for check in source.checks:
        seen.setdefault(check.table, TableSpec(check.table, check.unique_by or check.key))
    if not seen:
        raise ConfigError(
            f"source '{source.name}' has no [[sources.checks]]: the drill compares the tables "
            "the checks name"
        )
    return list(seen.values())


def copy_schema(source: Engine, target: Engine, tables: Sequence[str] | None = None) -> None:
    """The business tables' schema (all of them, or those named) created in ``target`` by
    reflection, in generic types; refuses a target that already holds rows in them."""
    meta = MetaData()
    meta.reflect(source, only=list(tables) if tables else None)
    for table in meta.tables.values():
        for column in table.columns:
            # a dialect type with no generic twin keeps its reflected type
            with suppress(NotImplementedError):
                column.type = column.type.as_generic()
            column.server_default = None  # (PostgreSQL's nextval() means nothing elsewhere)
    existing = set(inspect(target).get_table_names())
    with target.connect() as conn:
        for table in meta.tables.values():
            if (
                table.name in existing
                and conn.execute(select(func.count()).select_from(table)).scalar()
            ):
                raise ConfigError(
                    f"--business-url: table '{table.name}' is not empty; the drill needs a "
                    "scratch database"
                )
    meta.create_all(target)


@contextmanager
def _scratch(url: str | None, directory: Path, name: str) -> Iterator[Engine]:
    engine = make_engine(url or f"sqlite:///{directory / name}")
    try:
        yield engine
    finally:
        engine.dispose()


def drill_handlers(
    inbox: Engine,
    settings: Settings,
    registry: HandlerRegistry,
    source: SourceSettings,
    *,
    since: datetime,
    until: datetime | None = None,
    times: int = 2,
    shuffle: bool = True,
    seed: int = 0,
    business_url: str | None = None,
    progress: Progress | None = None,
) -> DrillResult:
    if business_url:
        check_scratch_url(business_url, settings, "--business-url")
    tables = _source_tables(settings, source)
    ids = event_ids(inbox, source.name, since, until)
    order = plan(ids, times, shuffle, seed)
    result = DrillResult(deliveries=len(order), events=len(ids))
    production = (
        make_engine(settings.business.url, readonly=True) if settings.business.url else inbox
    )
    names = None if settings.business.url else [t.name for t in tables]
    total = len(order) + len(ids)
    with (
        tempfile.TemporaryDirectory(prefix="hookledger-drill-") as tmp,
        _scratch(business_url, Path(tmp), "drilled.db") as drilled,
        _scratch(None, Path(tmp), "reference.db") as reference,
        _scratch(None, Path(tmp), "inbox.db") as scratch_inbox,
    ):
        try:
            copy_schema(production, drilled, names)
            copy_schema(production, reference, names)
        finally:
            if production is not inbox:
                production.dispose()
        done = 0
        separate = settings.business.url is not None
        outboxes: list[RecordedOutbox] = []
        for engine, sequence in ((reference, ids), (drilled, order)):
            applier = ReplayApplier(
                registry,
                engine,
                scratch_inbox if separate else engine,
                max_attempts=settings.worker.max_attempts,
                targets=frozenset(t.name for t in settings.outbox.targets),
                max_payload_bytes=settings.outbox.max_payload_bytes,
            )
            outboxes.append(applier.outbox)
            for start in range(0, len(sequence), BATCH):
                chunk = sequence[start : start + BATCH]
                events = _events(inbox, sorted(set(chunk)))
                for i in chunk:
                    applied = applier.apply(events[i])
                    if engine is drilled and not applied.ok:
                        result.failed += 1
                done += len(chunk)
                if progress:
                    progress(done, total)
        with reference.connect() as ref, drilled.connect() as dr:
            result.differences = compare_states(ref, dr, tables)
        result.differences += compare_messages(outboxes[0].messages, outboxes[1].messages)
    return result


def drill_target(
    inbox: Engine,
    settings: Settings,
    source: SourceSettings,
    *,
    target: str,
    business_url: str,
    reference_url: str | None,
    since: datetime,
    until: datetime | None = None,
    times: int = 2,
    shuffle: bool = True,
    seed: int = 0,
    wait_seconds: float = 60.0,
    client: httpx.Client | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> DrillResult:
    check_target(target, settings)
    check_scratch_url(business_url, settings, "--business-url")
    reference_url = reference_url or settings.business.url
    if not reference_url:
        raise ConfigError("--reference-url: needed when [business] url is not set")
    sender = provider(source.kind)
    if not sender.resignable:
        raise ActionRefusedError(f"source kind '{source.kind}' cannot be re-signed")
    secret = source.signing_secrets()[0]
    from reconciler.sources import options_of

    options = options_of(source, secrets=False)
    url = target.rstrip("/")
    if not url.endswith(f"/webhooks/{source.name}"):
        url = f"{url}/webhooks/{source.name}"
    tables = _source_tables(settings, source)
    ids = event_ids(inbox, source.name, since, until)
    order = plan(ids, times, shuffle, seed)
    result = DrillResult(deliveries=len(order), events=len(ids))
    keys: set[str] = set()
    own = client is None
    http = client or httpx.Client(timeout=30, follow_redirects=False)
    try:
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            events = _events(inbox, sorted(set(chunk)))
            for i in chunk:
                event = events[i]
                if event.object_id:
                    keys.add(event.object_id)
                # one event of a batch goes as a batch of one, as its provider would send it
                headers, body = sender.signed_afresh(
                    options, event.headers, sender.delivery_of(event.body), secret, clock(), url
                )
                try:
                    answer = http.post(url, content=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise ActionRefusedError(
                        f"--target {target}: cannot be reached ({exc.__class__.__name__})"
                    ) from None
                if answer.status_code >= 300:
                    raise ActionRefusedError(
                        f"--target {target}: answered HTTP {answer.status_code} to event "
                        f"{event.event_id}: {answer.text[:200]}"
                    )
            if progress:
                progress(start + len(chunk), len(order))
    finally:
        if own:
            http.close()
    staging = make_engine(business_url, readonly=True)
    reference = make_engine(reference_url, readonly=True)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:  # the staging worker applies asynchronously: compare until equal or waited
            with reference.connect() as ref, staging.connect() as dr:
                result.differences = compare_states(ref, dr, tables, keys)
            if result.equal or time.monotonic() >= deadline:
                return result
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
    finally:
        staging.dispose()
        reference.dispose()
