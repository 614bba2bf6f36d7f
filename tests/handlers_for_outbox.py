"""``[worker] handlers = ["tests.handlers_for_outbox"]``: a Stripe ``customer.updated`` event sends
one message to the outbox target ``crm`` (its key derived from the event). A type no other module
registers on the process-wide registry (the demo's handlers take every Stripe type)."""

from sqlalchemy import Connection

from reconciler.inbox.handlers import Event, handler


@handler("stripe", "customer.updated")
def notify_crm(event: Event, conn: Connection) -> None:
    event.outbox.add("crm", {"event": event.event_id, "type": event.event_type})
