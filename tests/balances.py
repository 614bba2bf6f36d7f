"""The balance table of issue 44's tests: each event adds to its account's balance (not idempotent
on purpose), so a second application shows as a doubled balance. Kept apart from the handlers
module, which registers handlers process-wide when imported."""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, String, Table

metadata = MetaData()
balances = Table(
    "test_balances",
    metadata,
    Column("account", String(64), primary_key=True),
    Column("amount", Integer, nullable=False),
)
