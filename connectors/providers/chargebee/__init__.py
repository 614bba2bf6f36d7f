"""Chargebee webhooks, received (``kind = "chargebee"``): HTTP Basic credentials, no signature.

Facts, with their sources:

- **Authentication.** Chargebee signs nothing. A webhook's URL is "protected using basic
  authentication": in Settings > Configure Chargebee > API Keys and Webhooks, toggle "Protect
  webhook URL with basic authentication" and fill in a Username and Password; every delivery then
  carries ``Authorization: Basic base64(username:password)`` (RFC 7617). The source's signing
  secret is written ``username:password`` and compared, constant-time, with the decoded header
  (scheme algorithm ``basic``). Source: "Webhook Settings"
  (https://www.chargebee.com/docs/2.0/webhook_settings.html). Nothing is timed: no window.
- **Retries and duplicates.** "It is very much possible and even likely that webhooks reach your
  application out-of-order and that they get duplicated"; a failed webhook is retried "up to 7
  times at exponential intervals" and succeeds only on a 2XX (same page, and
  https://www.chargebee.com/docs/billing/2.0/kb/platform/i-received-a-webhook-failure-email-from-chargebee-how-to-fix-this).
  A retry carries the same event, so the event's ``id`` deduplicates it.
- **Identity.** The body is an event resource (https://apidocs.chargebee.com/docs/api/events; the
  official ``chargebee`` library's ``EventResponse``: ``id``, ``occurred_at``, ``source``,
  ``event_type``, ``api_version``, ``content``, ``webhook_status``): id ``id`` (``ev_…``), type
  ``event_type`` (``subscription_created``), time ``occurred_at`` (Unix seconds).
- **Library.** ``chargebee`` (3.29.0) has no webhook verification (there is no signature); its
  ``Event.deserialize`` reads a webhook body, which the tests use on the samples.
"""

from __future__ import annotations

import time
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.providers.chargebee.api import BUDGET, build, rule
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:Authorization",),
    algorithm="basic",
    prefix="Basic ",
    event_id="body:id",
    event_type="body:event_type",
    occurred_at="body:occurred_at",
)


def _content(event_type: str, now: int) -> dict[str, Any]:
    customer_id = f"__test__{token(16)}"
    customer = {
        "id": customer_id,
        "first_name": "Ada",
        "last_name": "Lovelace",
        "email": "ada@example.com",
        "auto_collection": "on",
        "created_at": now,
        "updated_at": now,
        "resource_version": now * 1000,
        "deleted": False,
        "object": "customer",
        "preferred_currency_code": "USD",
    }
    if event_type == "customer_changed":
        return {"customer": customer}
    subscription = {
        "id": f"__test__{token(16)}",
        "customer_id": customer_id,
        "billing_period": 1,
        "billing_period_unit": "month",
        "currency_code": "USD",
        "status": "active",
        "created_at": now,
        "started_at": now,
        "activated_at": now,
        "current_term_start": now,
        "current_term_end": now + 30 * 86400,
        "next_billing_at": now + 30 * 86400,
        "updated_at": now,
        "resource_version": now * 1000,
        "deleted": False,
        "object": "subscription",
        "subscription_items": [
            {
                "item_price_id": "basic-USD-monthly",
                "item_type": "plan",
                "quantity": 1,
                "unit_price": 1000,
                "amount": 1000,
                "object": "subscription_item",
            }
        ],
    }
    if event_type == "subscription_created":
        return {"subscription": subscription, "customer": customer}
    transaction = {
        "id": f"txn___test__{token(16)}",
        "customer_id": customer_id,
        "subscription_id": subscription["id"],
        "payment_method": "card",
        "gateway": "chargebee",
        "type": "payment",
        "date": now,
        "amount": 1000,
        "currency_code": "USD",
        "status": "success",
        "object": "transaction",
    }
    return {"transaction": transaction, "subscription": subscription, "customer": customer}


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = int(time.time())
    event_id = f"ev___test__{token(16)}"
    event = {
        "id": event_id,
        "occurred_at": now,
        "source": "admin_console",
        "user": "full_access_key_v1",
        "object": "event",
        "api_version": "v2",
        "content": _content(event_type, now),
        "event_type": event_type,
        "webhook_status": "scheduled",
    }
    return Sample(event_id, compact_json(event), {"content-type": "application/json"})


SAMPLES = Catalogue(("subscription_created", "payment_succeeded", "customer_changed"), _sample)

PROVIDER = declared("chargebee", SCHEME, samples=SAMPLES, build=build, budget=BUDGET, validate=rule)
