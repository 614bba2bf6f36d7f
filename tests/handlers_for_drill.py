"""A handler module for the drill's CLI test (``[worker] handlers``): its credit is appended per
delivery, the mistake the drill exists to find. Registered for source ``billing`` only, so that it
never meets another test module's handlers on the process-wide registry."""

from __future__ import annotations

from sqlalchemy import Connection, insert

from reconciler.inbox.handlers import Event, handler, upsert_if_newer
from tests.integration.test_drill import credits, invoices


@handler("billing")
def billing(event: Event, conn: Connection) -> None:
    obj = event.payload["data"]["object"]
    with event.business.begin() as biz:
        upsert_if_newer(
            biz,
            invoices,
            {"invoice_id": obj["id"], "status": obj["status"], "version": event.payload["created"]},
            key=["invoice_id"],
            version="version",
        )
        if event.event_type == "invoice.paid":
            biz.execute(insert(credits).values(invoice_id=obj["id"], amount=obj["amount_paid"]))
