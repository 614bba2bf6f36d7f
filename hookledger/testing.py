"""Testing webhook handlers: build the event a handler would see, and deliver it the ways
production does (once, twice, shuffled, replayed), then assert on what the handler wrote.

    from hookledger.testing import Deliveries, event_of

    def test_paid_invoice_is_recorded_once(business_engine):
        paid = event_of("stripe", "invoice.paid")
        Deliveries(business_engine).deliver(paid, way="twice")
        ...  # assert on the business tables

``event_of`` signs a sample delivery (or your payload) as the provider signs it and reads it with
hookledger's own receiver code, so the event carries what a stored one carries. ``Deliveries``
runs the handlers in the worker's transactions, retries included, but applies every delivery as a
replay would: nothing deduplicates it, so a handler that is right only once shows it. With pytest,
``pytest_plugins = ["hookledger.pytest_plugin"]`` adds the fixture ``hookledger_deliver``, which
runs a test once for each way (docs/handlers.md, "Testing a handler").
"""

from reconciler.ops.replaying import Applied, Status
from reconciler.testkit.deliveries import WAYS, Deliver, Deliveries, HandlerFailed, order_of
from reconciler.testkit.events import event_of, sample_payload

__all__ = [
    "WAYS",
    "Applied",
    "Deliver",
    "Deliveries",
    "HandlerFailed",
    "Status",
    "event_of",
    "order_of",
    "sample_payload",
]
