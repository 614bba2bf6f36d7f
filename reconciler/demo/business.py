"""The demo application's own database: the business tables its webhook handlers keep.

A separate SQLite file from hookledger's inbox (``[business] url``), as an application's database is:
each attempt's writes commit there with the event's applied mark (``hookledger_applied``), so the
demo's one non-idempotent path (a ledger credit appended before a step that may fail) credits once
per event, and twice only when the event is replayed (as the drill shows).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table

metadata = MetaData()

invoices = Table(
    "demo_invoices",
    metadata,
    Column("stripe_invoice_id", String(64), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("amount_paid", BigInteger, nullable=False),
    Column("currency", String(8), nullable=False),
    Column("version", BigInteger, nullable=False),  # event created * 10 + lifecycle step
    Column("correlation_id", String(64)),  # of the event that wrote the row (hookledger's)
)
ledger = Table(  # credits for paid invoices: one per invoice is right, two is a double credit
    "demo_ledger",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stripe_invoice_id", String(64), nullable=False, index=True),
    Column("amount", BigInteger, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("correlation_id", String(64)),
)
fulfilments = Table(  # the (pretend) fulfilment service's record of the calls it took
    "demo_fulfilments",
    metadata,
    Column("event_id", String(64), primary_key=True),
)
orders = Table(
    "demo_orders",
    metadata,
    Column("order_id", String(32), primary_key=True),
    Column("financial_status", String(32)),
    Column("fulfillment_status", String(32)),
    Column("total_price", String(32), nullable=False),
    Column("updated_at", String(32), nullable=False),
    Column("correlation_id", String(64)),
)
github_items = Table(  # issues and pull requests seen through webhooks
    "demo_github_items",
    metadata,
    Column("item_id", String(32), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("number", Integer, nullable=False),
    Column("last_action", String(32)),
    Column("updated_at", String(32), nullable=False),
    Column("correlation_id", String(64)),
)
sms = Table(  # each text message's latest status, from Twilio's status callbacks in any order
    "demo_sms",
    metadata,
    Column("message_sid", String(64), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("rank", Integer, nullable=False),  # how far along its lifecycle the status is
    Column("correlation_id", String(64)),
)
slack_activity = Table(  # what the team's Slack app was told, one row per event
    "demo_slack_activity",
    metadata,
    Column("event_id", String(64), primary_key=True),
    Column("kind", String(64)),
    Column("channel", String(32)),
)
