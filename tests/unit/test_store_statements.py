"""The one-event INSERT compiled once (reconciler.storage.dialect.CompiledOnce) names every value
an event row has: an added column cannot be left out of it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.dialects import postgresql, sqlite

from connectors.parsing import ParsedEvent
from reconciler.inbox.store import EVENT_COLUMNS, STORE_ONE_EVENT, IncomingEvent, _event_row


def test_the_compiled_insert_takes_exactly_an_event_rows_values() -> None:
    item = IncomingEvent("stripe", ParsedEvent(event_id="evt_1"), b"{}", {}, datetime.now(UTC))
    assert set(_event_row(item, "f")) == set(EVENT_COLUMNS)


def test_it_compiles_to_insert_on_conflict_do_nothing_returning_on_both_databases() -> None:
    for dialect in (sqlite.dialect(), postgresql.psycopg.dialect()):
        compiled, processors = STORE_ONE_EVENT._for(dialect)
        sql = compiled.string
        assert sql.startswith("INSERT INTO inbox_events")
        assert "ON CONFLICT (source, event_id) DO NOTHING" in sql
        assert "RETURNING" in sql and sql.endswith("event_id")
        assert set(processors) == set(EVENT_COLUMNS)
