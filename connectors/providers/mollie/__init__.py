"""Mollie's payment webhooks (``kind = "mollie"``): an unsigned form POST carrying only the payment
id, confirmed by reading the payment from Mollie's API before anything is stored.

Facts (with sources):

- Mollie calls the payment's ``webhookUrl`` with a POST, ``Content-Type:
  application/x-www-form-urlencoded``, body ``id=tr_…``: no signature, no status. The payment is
  read with ``GET https://api.mollie.com/v2/payments/{id}`` (``Authorization: Bearer`` the API key)
  and what Mollie answers is stored: a forged call can only make hookledger read a payment.
  https://docs.mollie.com/reference/webhooks, https://docs.mollie.com/reference/get-payment
- The webhook is called on each status change (open → paid, failed, canceled, expired, authorized)
  and, integrators report, again for a refund or a chargeback, the status staying ``paid``
  (https://www.drupal.org/i/3634145). A call Mollie repeats for the same state is a duplicate:
  the identity is the payment id and what it reports (``tr_…:paid``, ``tr_…:paid+refunded:5.00``);
  the type ``payment.<status>`` (``payment.refunded``, ``payment.charged_back`` when those
  amounts are above zero); the time the status's own (``paidAt``, ``canceledAt``, …).
  https://docs.mollie.com/reference/get-payment
- Only payment ids (``tr_``) are taken: others (``ord_`` of the deprecated Orders API, payment
  links' ``pl_``) are refused with 400 naming them.
- Mollie's "next-gen" webhooks (beta: subscriptions by event type such as ``payment.paid`` and
  ``refund.refunded``, the entity's snapshot as payload, signed with HMAC-SHA256 of the raw body,
  hex, in ``X-Mollie-Signature``) are a different delivery and not this kind.
  https://docs.mollie.com/reference/webhooks-new,
  https://docs.mollie.com/reference/webhooks-best-practices

There is nothing to verify, so no official library can cross-check a signature; the tests read the
stand-in API's answer with ``mollie-api-python`` as well, to agree on the payment's id and status.
A reconciliation lists the payments (``api.MolliePayments``, facts and sources there).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from connectors.errors import NotFoundError, RejectedDelivery, UnsupportedError
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.providers.mollie.api import BUDGET, MolliePayments, build
from connectors.providers.mollie.connector import PAYMENT_ID, MollieConnector, payment_record
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    ParsedEvent,
    SignatureError,
    WebhookRequest,
    form_fields,
    required_id,
)

SCHEME: Scheme | None = None  # nothing is signed: each notification is confirmed by Mollie's API
SAMPLES = None  # a notification is only as good as the payment Mollie's API shows
FORM = "application/x-www-form-urlencoded"


def rule(values: Mapping[str, Any]) -> str | None:
    if values.get("kind") == "mollie" and not values.get("api_key_env"):
        return (
            "a mollie source needs 'api_key_env' (a live_ or test_ API key): its webhooks are "
            "unsigned and confirmed by reading the payment from Mollie's API"
        )
    return None


def payment_id_of(request: WebhookRequest) -> str:
    """The payment a notification names, refused before any call unless it is a Mollie payment
    id (ASCII letters and digits after ``tr_``)."""
    try:
        fields = form_fields(request.body)
    except ValueError:
        raise BadPayload("body is not a form (id=tr_…)") from None
    value = fields.get("id")
    if isinstance(value, list):
        raise BadPayload("the form names more than one id")
    payment_id = required_id(value, "the form's id")
    if not PAYMENT_ID.fullmatch(payment_id):
        raise BadPayload(f"the form's id {payment_id[:40]!r} is not a Mollie payment id (tr_…)")
    return payment_id


def confirm(connector: Any, request: WebhookRequest) -> Batch:
    """A notification confirmed by the payment Mollie shows now: stored as that payment, identity
    its id and what it reports. A payment Mollie does not know is refused."""
    payment_id = payment_id_of(request)
    try:
        payment = connector.payment(payment_id)
    except NotFoundError:
        raise RejectedDelivery(
            400, f"Mollie does not know payment {payment_id}: not stored"
        ) from None
    if payment["id"] != payment_id:
        raise RejectedDelivery(
            400, f"Mollie answered payment {payment['id']} for {payment_id}: not stored"
        )
    record = payment_record(payment)
    event = ParsedEvent(
        event_id=str(record.event_id),
        event_type=record.event_type,
        object_type="payment",
        object_id=payment_id,
        occurred_at=record.occurred_at,
    )
    body = json.dumps(payment, separators=(",", ":")).encode()
    return Batch((BatchItem(event, body, "application/json"),))


def _unsigned(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Any:
    """Never called by the receiver: ``confirm`` is (a notification carries nothing to verify)."""
    raise SignatureError("a Mollie webhook is confirmed through Mollie's API")


def _notification_of(body: bytes) -> bytes:
    """A stored event (the payment Mollie showed) as the notification Mollie sent for it:
    ``id=tr_…``, all a drill can send again (the receiver reads the payment afresh)."""
    try:
        payment = json.loads(body)
    except ValueError:
        return body
    pid = payment.get("id") if isinstance(payment, dict) else None
    return f"id={pid}".encode() if isinstance(pid, str) and PAYMENT_ID.fullmatch(pid) else body


def _sent_again(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    """A notification sent again (the sandbox, a drill: ``_notification_of``) is signed by nothing:
    it goes as ``id=tr_…`` and the receiver confirms it through Mollie's API. A stored event's body
    as it is (the payment's JSON) is no notification: refused."""
    try:
        fields = form_fields(body)
    except ValueError:
        fields = {}
    if not isinstance(fields.get("id"), str) or not PAYMENT_ID.fullmatch(str(fields["id"])):
        raise UnsupportedError(
            "a stored Mollie event is the payment Mollie's API showed, not its notification "
            "(id=tr_…): it cannot be sent again"
        )
    return {"content-type": FORM}


PROVIDER = Provider(
    "mollie",
    verify=_unsigned,
    build=build,
    budget=BUDGET,
    sign=_sent_again,
    as_sent=_notification_of,
    validate=rule,
    signed_with_secret=False,
    methods=("POST",),
    confirm=confirm,
    confirm_key=payment_id_of,
    samples=SAMPLES,
    tolerance=0,
    # what the API adds to a payment without changing what it reports: not a conflict
    fingerprint_ignore=("_links", "details", "isCancelable", "settlementId", "settlementAmount"),
)

__all__ = [
    "PROVIDER",
    "SCHEME",
    "MollieConnector",
    "MolliePayments",
    "confirm",
    "payment_id_of",
    "payment_record",
]
