"""A small business schema and idempotent handlers, as an application would write them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Column, Connection, Engine, Integer, MetaData, String, Table

from reconciler.inbox.handlers import Event, HandlerRegistry, upsert_if_newer
from reconciler.storage.dialect import insert_for

metadata = MetaData()
invoices = Table(
    "t_invoices",
    metadata,
    Column("invoice_id", String(64), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("amount", Integer, nullable=False),
    Column("version", Integer, nullable=False),
)
credits = Table(
    "t_credits",
    metadata,
    Column("invoice_id", String(64), primary_key=True),  # one credit per paid invoice
    Column("amount", Integer, nullable=False),
    Column("event_id", String(64), nullable=False),
)
runs = Table(
    "t_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(64), nullable=False),
    Column("worker", String(128), nullable=False),
)


@contextmanager
def business_tables(engine: Engine) -> Iterator[None]:
    metadata.drop_all(engine)
    metadata.create_all(engine)
    try:
        yield
    finally:
        metadata.drop_all(engine)


def apply_invoice_event(event: Event, conn: Connection) -> None:
    """Absolute state, only if newer; a paid invoice gets exactly one credit."""
    obj: dict[str, Any] = event.payload["data"]["object"]
    upsert_if_newer(
        conn,
        invoices,
        {
            "invoice_id": obj["id"],
            "status": obj["status"],
            "amount": obj["amount"],
            "version": obj["version"],
        },
        key=["invoice_id"],
        version="version",
    )
    if event.event_type == "invoice.paid":
        conn.execute(
            insert_for(conn, credits)
            .values(invoice_id=obj["id"], amount=obj["amount"], event_id=event.event_id)
            .on_conflict_do_nothing(index_elements=["invoice_id"])
        )


def invoice_registry() -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("stripe", "*", apply_invoice_event)
    return registry
