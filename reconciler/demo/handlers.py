"""The demo application's webhook handlers, for the demo's three sources: the in-process demo
uses :func:`registry`; ``hookledger worker --config var/demo/config.toml`` imports
``reconciler.demo.worker_handlers`` (``[worker] handlers``), which registers them process-wide.

They write the application's own database (``$HOOKLEDGER_DEMO_DIR/business.db``) idempotently:
absolute state, "only if newer". Two things are deliberately wrong, as in real applications, and
both are listed in the demo's ``faults.json`` (the ground truth):

- events listed under ``transient`` fail once with a transient error, then succeed on the retry;
  for ``invoice.paid`` the ledger credit is appended *before* that failing step and outside any
  guard, so those invoices are credited twice (the duplicate the reconciler must find);
- events listed under ``permanent`` fail for good and are dead-lettered.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, insert

from reconciler.demo.business import github_items, invoices, ledger, orders
from reconciler.errors import ConfigError, PermanentError, TransientError
from reconciler.inbox.handlers import Event, HandlerRegistry, upsert_if_newer
from reconciler.storage.engine import make_engine

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
def _business() -> Engine:
    return make_engine(f"sqlite:///{_dir() / 'business.db'}")


@cache
def _faults() -> tuple[frozenset[str], frozenset[str]]:
    path = _dir() / "faults.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return frozenset(data.get("transient", ())), frozenset(data.get("permanent", ()))


def reset() -> None:
    """Forget the cached business engine and fault lists (a new demo run replaces both files)."""
    if _business.cache_info().currsize:
        _business().dispose()
    _business.cache_clear()
    _faults.cache_clear()


def _planted(event: Event) -> None:
    """Fail as planned: permanent always, transient on the first attempt only."""
    transient, permanent = _faults()
    if event.event_id in permanent:
        raise PermanentError(f"demo: {event.event_type} for an unknown plan, cannot be applied")
    if event.event_id in transient and event.attempt <= 1:
        raise TransientError("demo: the receipt mailer timed out", retry_after=0.2)


def stripe_event(event: Event, conn: Connection) -> None:
    obj: dict[str, Any] = event.payload["data"]["object"]
    if obj.get("object") != "invoice" or event.event_type not in STEP:
        _planted(event)  # charges and customers: nothing to keep, but they can fail
        return
    version = int(event.payload["created"]) * 10 + STEP[event.event_type]
    with _business().begin() as biz:
        upsert_if_newer(
            biz,
            invoices,
            {
                "stripe_invoice_id": obj["id"],
                "status": obj["status"],
                "amount_paid": obj["amount_paid"],
                "currency": obj["currency"],
                "version": version,
            },
            key=["stripe_invoice_id"],
            version="version",
        )
    if event.event_type == "invoice.paid":
        # The non-idempotent path: the credit is appended and committed, then the receipt step
        # may fail; the retry appends it again. (Fix: insert-if-new keyed by the invoice.)
        with _business().begin() as biz:
            biz.execute(
                insert(ledger).values(
                    stripe_invoice_id=obj["id"], amount=obj["amount_paid"], event_id=event.event_id
                )
            )
    _planted(event)


def shopify_order(event: Event, conn: Connection) -> None:
    _planted(event)
    order: dict[str, Any] = event.payload
    # the order's updated_at is its version (ISO-8601 UTC strings compare in time order)
    with _business().begin() as biz:
        upsert_if_newer(
            biz,
            orders,
            {
                "order_id": str(order["id"]),
                "financial_status": order.get("financial_status"),
                "fulfillment_status": order.get("fulfillment_status"),
                "total_price": str(order.get("total_price")),
                "updated_at": str(order["updated_at"]),
            },
            key=["order_id"],
            version="updated_at",
        )


def github_activity(event: Event, conn: Connection) -> None:
    _planted(event)
    kind = (event.event_type or "").split(".")[0]
    item = event.payload.get(kind) if kind in ("issues", "pull_request") else None
    if not isinstance(item, dict):
        return  # pushes and comments: nothing to keep
    with _business().begin() as biz:
        upsert_if_newer(
            biz,
            github_items,
            {
                "item_id": str(item["id"]),
                "kind": kind,
                "number": int(item["number"]),
                "last_action": event.payload.get("action"),
                "updated_at": str(item["updated_at"]),
            },
            key=["item_id"],
            version="updated_at",
        )


def register(registry: HandlerRegistry) -> HandlerRegistry:
    """The demo's handlers on ``registry`` (every type of each demo source)."""
    registry.register("stripe", "*", stripe_event)
    registry.register("shopify", "*", shopify_order)
    registry.register("github", "*", github_activity)
    return registry


def registry() -> HandlerRegistry:
    """A registry with only the demo's handlers: the in-process demo uses it, so handlers another
    module registered on the process-wide registry can never take the demo's events."""
    return register(HandlerRegistry())
