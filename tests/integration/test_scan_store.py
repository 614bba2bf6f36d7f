"""The reconciler on a real database with an in-memory source: the store's guarantees on SQLite and
PostgreSQL, without a sandbox or a receiver (connectors.testing.MemoryConnector)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from connectors.base import Record
from connectors.providers.stripe.signature import parse_stripe
from connectors.testing import MemoryConnector, StopsAfter
from reconciler.cursors import load_cursor
from reconciler.errors import HookledgerError
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.reconcile.judge import Finding
from reconciler.reconcile.run import Reconciler
from reconciler.reconcile.store import open_store
from reconciler.states import DiscrepancyKind
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import DISCREPANCIES, RECON_SEEN
from tests.conftest import make_settings

NOW = datetime.now(UTC).replace(microsecond=0)


def stripe_event(i: int, *, hours_ago: float = 2) -> dict[str, Any]:
    return {
        "id": f"evt_{i:04d}",
        "object": "event",
        "type": "charge.succeeded",
        "created": int((NOW - timedelta(hours=hours_ago)).timestamp()),
        "data": {"object": {"id": f"ch_{i:04d}", "object": "charge"}},
    }


def record(event: dict[str, Any]) -> Record:
    created = datetime.fromtimestamp(event["created"], UTC)
    obj = event["data"]["object"]
    return Record(event["id"], event["type"], obj["object"], obj["id"], created, None, event)


def receive(engine: Engine, events: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        items = []
        for e in events:
            body = json.dumps(e).encode()
            received = datetime.fromtimestamp(e["created"], UTC) + timedelta(seconds=5)
            items.append(IncomingEvent("stripe", parse_stripe({}, body), body, {}, received))
        store_items(conn, items)


def found(engine: Engine) -> set[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(DISCREPANCIES.c.kind, DISCREPANCIES.c.record_key).where(
                DISCREPANCIES.c.status == "open", DISCREPANCIES.c.kind != "stuck"
            )
        )
        return {(str(k), r) for k, r in rows}


@pytest.fixture
def world(engine: Engine, db_url: str) -> Any:
    """120 source events; the inbox lacks three and holds two the source never sent."""
    upgrade(engine)
    events = [stripe_event(i) for i in range(120)]
    lacking = {events[3]["id"], events[50]["id"], events[119]["id"]}
    forged = [stripe_event(900 + i) for i in range(2)]
    receive(engine, [e for e in events if e["id"] not in lacking] + forged)
    settings = make_settings(db_url, reconcile={"grace_seconds": 0})
    expected = {("missing", e) for e in lacking} | {("orphaned", e["id"]) for e in forged}

    def reconciler(pages: int | None = None, page_size: int = 25) -> Reconciler:
        def factory(source: Any) -> Any:
            memory = MemoryConnector("stripe", [record(e) for e in events], page_size=page_size)
            return memory if pages is None else StopsAfter(memory, pages)

        return Reconciler(engine, settings, connector_factory=factory)

    return reconciler, expected


def test_a_run_finds_what_the_inbox_lacks_and_what_the_source_never_sent(
    engine: Engine, world: Any
) -> None:
    reconciler, expected = world
    summary = reconciler().run("stripe")
    assert (summary.records_scanned, summary.pages) == (120, 5)
    assert found(engine) == expected
    reconciler().run("stripe", full=True)  # and a rerun changes nothing
    assert found(engine) == expected


@pytest.mark.parametrize("pages", [1, 2, 4])
def test_a_run_that_dies_after_some_pages_resumes_to_the_same_findings(
    engine: Engine, world: Any, pages: int
) -> None:
    reconciler, expected = world
    with pytest.raises(HookledgerError, match=f"stopped after {pages} page"):
        reconciler(pages).run("stripe")
    with engine.connect() as conn:
        assert load_cursor(conn, "stripe") == {"offset": pages * 25}  # moved with its pages
    resumed = reconciler().run("stripe")
    assert resumed.records_scanned == 120 - pages * 25
    assert found(engine) == expected


@pytest.mark.parametrize("chunk", [7, 5000])
def test_pages_looked_up_in_several_chunks_find_the_same(
    engine: Engine, world: Any, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.reconcile.store.scan import Scan

    monkeypatch.setattr(Scan, "lookup_chunk", chunk)
    reconciler, expected = world
    reconciler(page_size=60).run("stripe")
    assert found(engine) == expected


def test_a_dry_run_writes_nothing(engine: Engine, world: Any) -> None:
    reconciler, _ = world
    summary = reconciler().run("stripe", dry_run=True)
    assert summary.found == {"missing": 3, "orphaned": 2, "stuck": 119}  # (none processed)
    assert found(engine) == set()
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(RECON_SEEN)).scalar_one() == 0
        assert load_cursor(conn, "stripe") is None


def test_a_page_write_keeps_the_last_finding_of_a_natural_key_and_its_cursor(
    engine: Engine,
) -> None:
    upgrade(engine)
    twice = [
        Finding(DiscrepancyKind.DIVERGED, "t:1", field="status", source_value="a"),
        Finding(DiscrepancyKind.DIVERGED, "t:1", field="status", source_value="b", amount=7),
        Finding(DiscrepancyKind.MISSING, "evt_1", occurred_at=NOW - timedelta(hours=1)),
    ]
    with engine.connect() as conn:
        store = open_store(conn, "s", "run-1", NOW, dry_run=False)
        store.begin(full=True)
        page = [record(stripe_event(1))]
        store.lookup(page)
        store.write(page, twice, {"after": "x"})
        store.end_pages()
        store.close()
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                DISCREPANCIES.c.kind,
                DISCREPANCIES.c.source_value,
                DISCREPANCIES.c.amount,
                DISCREPANCIES.c.detection_delay_seconds,
                DISCREPANCIES.c.occurred_at,
            ).order_by(DISCREPANCIES.c.kind)
        ).all()
        assert load_cursor(conn, "s") == {"after": "x"}
    assert [tuple(r) for r in rows] == [
        ("diverged", "b", 7, None, None),
        ("missing", None, None, 3600.0, NOW - timedelta(hours=1)),
    ]


def test_a_naive_time_in_a_finding_is_refused(engine: Engine) -> None:
    upgrade(engine)
    naive = Finding(DiscrepancyKind.MISSING, "e", recover_by=datetime(2026, 1, 1))
    with engine.connect() as conn:
        store = open_store(conn, "s", "run-1", NOW, dry_run=False)
        store.begin(full=True)
        with pytest.raises(Exception, match="naive datetime"):
            store.write([], [naive], {})
            store.end_pages()
        store.close()
