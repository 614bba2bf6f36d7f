"""The demo application's webhook handlers, for the demo's three sources: the in-process demo
uses :func:`registry`; ``hookledger worker --config var/demo/config.toml`` imports
``reconciler.demo.worker_handlers`` (``[worker] handlers``), which registers them process-wide.

They write the application's own database (``[business] url``, the workspace's ``business.db``)
through ``event.business``, as hookledger hands it to them (``hookledger drill`` hands them a
scratch one), idempotently:
absolute state, "only if newer". Two things are deliberately wrong, as in real applications, and
both are listed in the demo's ``faults.json`` (the ground truth):

- events listed under ``transient`` fail once with a transient error, then succeed on the retry;
  for ``invoice.paid`` the ledger credit is appended *before* that failing step, not idempotent:
  the failure rolls it back with the attempt (the credit commits with the event's applied mark),
  so a retry credits once, while a replay (the drill's) credits again;
- events listed under ``permanent`` fail for good and are dead-lettered;
- Shopify events listed under ``ambiguous`` get no answer from the (pretend) fulfilment call, which
  took effect: an ambiguous failure; the retry's ``verify`` asks the fulfilment service, finds the
  call taken, writes the order row (the failed attempt's writes rolled back with it) and the event is
  processed without running the handler again.

Each paid invoice's receipt goes through the outbox (``event.outbox.add("mailer", ...)``) to the
demo's stand-in mailer (``reconciler.demo.mailer``): exactly one per invoice, retries and all.
"""

from __future__ import annotations

import json
import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert, select

from reconciler.demo.business import (
    fulfilments,
    github_items,
    invoices,
    ledger,
    orders,
    slack_activity,
    sms,
)
from reconciler.errors import AmbiguousError, ConfigError, PermanentError, TransientError
from reconciler.inbox.handlers import Event, HandlerRegistry, Verdict, upsert_if_newer
from reconciler.storage.dialect import insert_for

STEP = {"invoice.created": 0, "invoice.finalized": 1, "invoice.paid": 2, "invoice.voided": 2}


def _dir() -> Path:
    value = os.environ.get("HOOKLEDGER_DEMO_DIR")
    if not value:
        raise ConfigError(
            "the demo handlers need HOOKLEDGER_DEMO_DIR (the demo workspace, e.g. var/demo): "
            "source var/demo/demo.env"
        )
    return Path(value)


@cache
def _faults() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    path = _dir() / "faults.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return (
        frozenset(data.get("transient", ())),
        frozenset(data.get("permanent", ())),
        frozenset(data.get("ambiguous", ())),
    )


def reset() -> None:
    """Forget the cached fault lists (a new demo run replaces the file)."""
    _faults.cache_clear()


# The demo's incident hour: while set, the application's CRM is "down" and every handler fails
# with a transient error that asks to come back in ten minutes. Events with planned faults are
# left alone, so the incident never changes what the reconciliation must find.
OUTAGE = threading.Event()
OUTAGE_RETRY_SECONDS = 600.0


def _outage(event: Event) -> None:
    if OUTAGE.is_set() and not any(event.event_id in planned for planned in _faults()):
        raise TransientError(
            "demo incident: the CRM answers 503 Service Unavailable",
            retry_after=OUTAGE_RETRY_SECONDS,
        )


def _planted(event: Event) -> None:
    """Fail as planned: permanent always, transient on the first attempt only."""
    transient, permanent, _ = _faults()
    if event.event_id in permanent:
        raise PermanentError(f"demo: {event.event_type} for an unknown plan, cannot be applied")
    if event.event_id in transient and event.attempt <= 1:
        raise TransientError("demo: the receipt mailer timed out", retry_after=0.2)


def stripe_event(event: Event, conn: Connection) -> None:
    _outage(event)
    obj: dict[str, Any] = event.payload["data"]["object"]
    if obj.get("object") != "invoice" or event.event_type not in STEP:
        _planted(event)  # charges and customers: nothing to keep, but they can fail
        return
    version = int(event.payload["created"]) * 10 + STEP[event.event_type]
    with event.business.begin() as biz:
        upsert_if_newer(
            biz,
            invoices,
            {
                "stripe_invoice_id": obj["id"],
                "status": obj["status"],
                "amount_paid": obj["amount_paid"],
                "currency": obj["currency"],
                "version": version,
                "correlation_id": event.correlation_id,
            },
            key=["stripe_invoice_id"],
            version="version",
        )
    if event.event_type == "invoice.paid":
        # Not idempotent on purpose: the credit is appended, then the receipt step may fail. The
        # failure rolls the credit back with the attempt (it commits with the event's applied
        # mark), so a retry credits once; a replay, which applies the event again, credits twice
        # (the drill shows it; the fix: insert-if-new keyed by the invoice).
        with event.business.begin() as biz:
            biz.execute(
                insert(ledger).values(
                    stripe_invoice_id=obj["id"],
                    amount=obj["amount_paid"],
                    event_id=event.event_id,
                    correlation_id=event.correlation_id,
                )
            )
        # The receipt, done right: written with the transaction that marks the event processed
        # (a failure below rolls it back; a replay writes the same key), sent by the publisher.
        event.outbox.add("mailer", receipt(obj))
    _planted(event)


def receipt(invoice: dict[str, Any]) -> dict[str, Any]:
    return {
        "invoice": invoice["id"],
        "amount_paid": invoice["amount_paid"],
        "currency": invoice["currency"],
        "customer": invoice.get("customer"),
        "number": invoice.get("number"),
    }


def shopify_order(event: Event, conn: Connection) -> None:
    _outage(event)
    _planted(event)
    if event.event_id in _faults()[2] and event.attempt <= 1:
        _fulfil(event)
        raise AmbiguousError("demo: the fulfilment call was sent and got no answer")
    _store_order(event)


def _store_order(event: Event) -> None:
    order: dict[str, Any] = event.payload
    # the order's updated_at is its version (ISO-8601 UTC strings compare in time order)
    with event.business.begin() as biz:
        upsert_if_newer(
            biz,
            orders,
            {
                "order_id": str(order["id"]),
                "financial_status": order.get("financial_status"),
                "fulfillment_status": order.get("fulfillment_status"),
                "total_price": str(order.get("total_price")),
                "updated_at": str(order["updated_at"]),
                "correlation_id": event.correlation_id,
            },
            key=["order_id"],
            version="updated_at",
        )


def _fulfil(event: Event) -> None:
    """The (pretend) fulfilment service takes the call: its effect is another system's, committed
    whatever becomes of the attempt (here a table of the business database, written apart)."""
    with event.business.engine.begin() as service:
        service.execute(
            insert_for(service, fulfilments).on_conflict_do_nothing(), {"event_id": event.event_id}
        )


def order_fulfilled(event: Event, conn: Connection) -> Verdict:
    """Shopify's verify: did the fulfilment service take the earlier attempt's call? Then the event
    is done: the order row, which the failed attempt rolled back with it, is written here, in the
    transaction that marks the event processed."""
    with event.business.connect() as biz:
        taken = biz.execute(
            select(fulfilments.c.event_id).where(fulfilments.c.event_id == event.event_id)
        ).first()
    if taken is None:
        return Verdict.NOT_DONE
    _store_order(event)
    return Verdict.DONE


def github_activity(event: Event, conn: Connection) -> None:
    _outage(event)
    _planted(event)
    kind = (event.event_type or "").split(".")[0]
    item = event.payload.get(kind) if kind in ("issues", "pull_request") else None
    if not isinstance(item, dict):
        return  # pushes and comments: nothing to keep
    with event.business.begin() as biz:
        upsert_if_newer(
            biz,
            github_items,
            {
                "item_id": str(item["id"]),
                "kind": kind,
                "number": int(item["number"]),
                "last_action": event.payload.get("action"),
                "updated_at": str(item["updated_at"]),
                "correlation_id": event.correlation_id,
            },
            key=["item_id"],
            version="updated_at",
        )


# a status callback's place in a message's lifecycle: Twilio's callbacks may arrive in any order
SMS_RANK = {"queued": 0, "sending": 1, "sent": 2, "failed": 3, "undelivered": 3, "delivered": 3}


def twilio_status(event: Event, conn: Connection) -> None:
    _outage(event)
    fields = event.payload  # the form's fields
    status = str(fields.get("MessageStatus") or "")
    with event.business.begin() as biz:
        upsert_if_newer(
            biz,
            sms,
            {
                "message_sid": str(fields["MessageSid"]),
                "status": status,
                "rank": SMS_RANK.get(status, 0),
                "correlation_id": event.correlation_id,
            },
            key=["message_sid"],
            version="rank",
        )


def slack_event(event: Event, conn: Connection) -> None:
    _outage(event)
    with event.business.begin() as biz:
        biz.execute(
            insert_for(biz, slack_activity).on_conflict_do_nothing(),
            {"event_id": event.event_id, "kind": event.event_type, "channel": event.object_id},
        )


def register(registry: HandlerRegistry) -> HandlerRegistry:
    """The demo's handlers on ``registry`` (every type of each demo source)."""
    registry.register("stripe", "*", stripe_event)
    registry.register("shopify", "*", shopify_order, verify=order_fulfilled)
    registry.register("github", "*", github_activity)
    registry.register("twilio", "*", twilio_status)
    registry.register("slack", "*", slack_event)
    return registry


def registry() -> HandlerRegistry:
    """A registry with only the demo's handlers: the in-process demo uses it, so handlers another
    module registered on the process-wide registry can never take the demo's events."""
    return register(HandlerRegistry())
