"""Mollie's payments API as the receiver uses it: one payment read by id with the source's API key
(``Authorization: Bearer live_…``/``test_…``). A reconciliation lists them: ``api.MolliePayments``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from connectors.base import Access, Capabilities, Listing, Record
from connectors.errors import MalformedResponseError, NotFoundError, UnsupportedError
from connectors.http import ProviderClient, redact_url
from connectors.webhooks import iso_time

DEFAULT_BASE_URL = "https://api.mollie.com"
PAYMENT_ID = re.compile(r"tr_[A-Za-z0-9]{1,64}")  # a payment's id: ASCII letters and digits
PAYMENT_PATH = "/v2/payments/{id}"
# the time of each status, where the payment carries one
STATUS_TIME = {
    "open": "createdAt",
    "pending": "createdAt",
    "authorized": "authorizedAt",
    "paid": "paidAt",
    "canceled": "canceledAt",
    "expired": "expiredAt",
    "failed": "failedAt",
}


def _amount(payment: Mapping[str, Any], key: str) -> str | None:
    """A money field's value when it is above zero (Mollie writes ``{"value": "0.00", …}``)."""
    field = payment.get(key)
    value = field.get("value") if isinstance(field, Mapping) else None
    try:
        return str(value) if isinstance(value, str) and Decimal(value) > 0 else None
    except InvalidOperation:
        return None


def version_of(payment: Mapping[str, Any]) -> str:
    """What a notification of this payment reports: its status, and the amounts refunded and
    charged back (Mollie calls the payment's webhook for a refund or a chargeback too, the
    status unchanged)."""
    version = str(payment["status"])
    refunded = _amount(payment, "amountRefunded")
    charged = _amount(payment, "amountChargedBack")
    if refunded:
        version += f"+refunded:{refunded}"
    if charged:
        version += f"+chargedback:{charged}"
    return version


def payment_record(payment: Mapping[str, Any]) -> Record:
    """A payment as read, as the notification of its current state."""
    pid, status = str(payment["id"]), str(payment["status"])
    if _amount(payment, "amountChargedBack"):
        event_type, when = "payment.charged_back", None
    elif _amount(payment, "amountRefunded"):
        event_type, when = "payment.refunded", None
    else:
        event_type, when = f"payment.{status}", iso_time(payment.get(STATUS_TIME.get(status, "")))
    version = version_of(payment)
    return Record(
        event_id=f"{pid}:{version}",
        event_type=event_type,
        object_type="payment",
        object_id=pid,
        occurred_at=when,
        object_version=version,
        payload=payment,
    )


class MollieConnector:
    # reads payments one by one (the receiver's confirmations); api.MolliePayments lists them
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(self, source: str, client: ProviderClient) -> None:
        self.source = source
        self.client = client

    @property
    def retention(self) -> timedelta | None:
        return None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def payment(self, payment_id: str) -> Mapping[str, Any]:
        body, response = self.client.get_json(
            PAYMENT_PATH.format(id=payment_id), permission="payments.read"
        )
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("id"), str)
            or not isinstance(body.get("status"), str)
        ):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} is not a payment "
                "(no id and status)"
            )
        return body

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        if object_type != "payment":
            raise UnsupportedError(
                f"source '{self.source}': Mollie objects here are payments, not '{object_type}'"
            )
        return self.payment(object_id)

    def fetch_event(self, event_id: str) -> Record:
        payment_id, _, version = event_id.partition(":")
        record = payment_record(self.payment(payment_id))
        if version and record.object_version != version:
            raise NotFoundError(
                f"source '{self.source}': payment {payment_id} is now {record.object_version}, "
                f"not {version}: Mollie shows only the current state"
            )
        return record

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Mollie cannot be asked to call a webhook again"
        )

    def check_access(self) -> Access:
        self.client.get_json("/v2/payments", params={"limit": 1}, permission="payments.read")
        return Access("the API key reads payments")
