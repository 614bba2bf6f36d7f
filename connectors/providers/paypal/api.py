"""PayPal's REST API as the receiver and the reconciler use it: an OAuth2 client-credentials token,
the verify-webhook-signature call, the list of the app's webhook events, one event read back or
sent again by id, and a capture's current state.

Facts, each with its source:

- **List.** ``GET /v1/notifications/webhooks-events`` with ``page_size`` (default 10; no maximum
  is documented), ``start_time`` / ``end_time`` (RFC 3339: events "created on or after the
  ``start_time`` and on or before" the ``end_time``), ``transaction_id`` and ``event_type``; the
  answer ``{"events": [...], "count", "links"}``. PayPal's OpenAPI description,
  paypal/paypal-rest-api-specifications ``openapi/notifications_webhooks_v1.json``
  (``webhooks-events.list``, ``EventList``); https://developer.paypal.com/api/webhooks/v1/.
- **Paging.** The next page is the ``links`` entry with ``rel: next``; its query is PayPal's own
  (``move_to=next&index_time=…&index_id=…`` in PayPal's SDK samples: paypal/PayPal-NET-SDK
  ``WebhookEventListTest.cs``, paypal/PayPal-PHP-SDK's webhook tests, where the ampersands
  appear HTML-escaped as ``&amp;``, undone here). It is followed only on the API's own host and
  path: it carries the bearer token. No ``next`` link: the last page. The order is not documented.
- **Retention.** The API states none; the Webhooks Events dashboard filters "in the last 30
  days" (https://developer.paypal.com/api/rest/webhooks/events-dashboard), taken here as the
  list's horizon.
- **Auth.** ``POST /v1/oauth2/token`` with HTTP Basic ``client_id:secret`` and
  ``grant_type=client_credentials``, then ``Authorization: Bearer``; a token lasts ``expires_in``
  (about 9 hours). https://developer.paypal.com/api/rest/authentication/. The list needs the
  scope ``https://uri.paypal.com/services/applications/webhooks`` (the OpenAPI description).
- **Rate limit.** Not published ("PayPal doesn't publish exact rate limits"); beyond it ``429``
  ``RATE_LIMIT_REACHED``, ``Retry-After`` "if available". https://developer.paypal.com/api/rate-limiting,
  https://developer.paypal.com/api/rest/reference/rate-limiting.
- **A capture's current state.** ``GET /v2/payments/captures/{id}`` answers the capture as a
  ``PAYMENT.CAPTURE.*`` event's ``resource`` shows it (paypal-server-sdk 2.4.0
  ``PaymentsController.get_captured_payment``).
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from connectors.base import Capabilities, Record
from connectors.errors import MalformedResponseError
from connectors.event_list import Call, EventList
from connectors.http import ProviderClient, decode_json, redact_url
from connectors.oauth import ClientCredentials
from connectors.webhooks import SignatureError, iso_time, text_or_none

DEFAULT_BASE_URL = "https://api-m.paypal.com"  # the sandbox: https://api-m.sandbox.paypal.com
TOKEN_PATH = "/v1/oauth2/token"
VERIFY_PATH = "/v1/notifications/verify-webhook-signature"
LIST_PATH = "/v1/notifications/webhooks-events"
EVENT_PATH = "/v1/notifications/webhooks-events/{id}"
RESEND_PATH = "/v1/notifications/webhooks-events/{id}/resend"
CAPTURE_PATH = "/v2/payments/captures/{id}"
SCOPE = "https://uri.paypal.com/services/applications/webhooks"


def event_record(event: Mapping[str, Any]) -> Record:
    """A PayPal event (as delivered, listed or read back) as a record."""
    resource = event.get("resource")
    resource_id = text_or_none(resource.get("id")) if isinstance(resource, Mapping) else None
    return Record(
        event_id=str(event["id"]),
        event_type=text_or_none(event.get("event_type")),
        object_type=text_or_none(event.get("resource_type")) if resource_id else None,
        object_id=resource_id,
        occurred_at=iso_time(event.get("create_time")),
        object_version=(
            text_or_none(resource.get("update_time")) if isinstance(resource, Mapping) else None
        ),
        payload=event,
    )


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class PayPalConnector(EventList):
    # a business check reads the event's resource: what GET /v2/payments/captures/{id} answers
    capabilities = Capabilities(object_path=("resource",))
    provider_name = "PayPal"
    items_path = "events"
    id_path = "id"
    filters_time = True
    retention_days = 30
    permission = f"the app's webhooks scope ({SCOPE})"
    max_page_size = 100  # PayPal documents no maximum: a hundred is asked at most

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        client_id: str,
        client_secret: str,
        webhook_id: str,
        base_url: str = DEFAULT_BASE_URL,
        page_size: int | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        super().__init__(source, client, page_size=page_size)
        self.webhook_id = webhook_id
        self.base_url = base_url
        self.token = ClientCredentials(
            source,
            client,
            token_path=TOKEN_PATH,
            credentials=(client_id, client_secret),
            form={"grant_type": "client_credentials"},
            permission="an OAuth client of a REST app",
            default_ttl=32400,
            clock=clock,
        )

    def _authorise(self) -> None:
        self.token.authorise()

    # the list ----------------------------------------------------------------------------------

    def first(self, since: datetime, size: int) -> Call:
        # both ends: PayPal describes start_time and end_time as one range
        until = datetime.now(UTC)
        return Call(
            LIST_PATH,
            (("page_size", size), ("start_time", iso(since)), ("end_time", iso(until))),
        )

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        links = body.get("links") if isinstance(body, Mapping) else None
        hrefs = [
            link.get("href")
            for link in (links if isinstance(links, list) else ())
            if isinstance(link, Mapping) and link.get("rel") == "next"
        ]
        if not hrefs or not isinstance(hrefs[0], str) or not hrefs[0]:
            return None
        href = html.unescape(hrefs[0])  # PayPal's samples show its links' "&" as "&amp;"
        return Call(self.own(href, url))

    def own(self, href: str, url: str) -> str:
        """A next link on the API's own host and list path (it is sent the bearer token)."""
        base = urlsplit(self.base_url)
        try:
            target = urlsplit(href)
        except ValueError:
            target = urlsplit("")
        here = (base.scheme, base.netloc)
        path = base.path.rstrip("/") + LIST_PATH
        if (target.scheme, target.netloc) == here and target.path.rstrip("/") == path:
            return href
        if not target.scheme and not target.netloc and target.path.rstrip("/") == LIST_PATH:
            return href
        raise MalformedResponseError(
            f"source '{self.source}': {redact_url(url)} links its next page elsewhere "
            f"({redact_url(href)[:120]})"
        )

    def fetch(self, call: Call) -> tuple[Any, str]:
        self._authorise()
        return super().fetch(call)

    def record(self, item: Mapping[str, Any]) -> Record:
        return event_record(item)

    # the receiver's verification, one event, one capture -----------------------------------------

    def verify_signature(self, transmission: Mapping[str, str], event: Any) -> None:
        """PayPal's verdict on a delivery: returns on SUCCESS, else a SignatureError. PayPal's
        400 (a header it cannot read) is a refusal too, not an outage."""
        self._authorise()
        payload = {**transmission, "webhook_id": self.webhook_id, "webhook_event": event}
        response = self.client.request(
            "POST",
            VERIFY_PATH,
            json=payload,
            expected=(200, 400),
            permission="the app's webhooks (verify-webhook-signature)",
        )
        try:
            body = decode_json(response.content)
        except (UnicodeDecodeError, ValueError):
            body = None
        if response.status_code == 400:
            name = body.get("name") if isinstance(body, dict) else None
            raise SignatureError(f"PayPal refused to verify it ({str(name)[:60]})")
        status = body.get("verification_status") if isinstance(body, dict) else None
        if status == "SUCCESS":
            return
        if status == "FAILURE":
            raise SignatureError("PayPal's verify-webhook-signature answered FAILURE")
        raise MalformedResponseError(
            f"source '{self.source}': {VERIFY_PATH} gave no verification_status"
        )

    def event_url(self, event_id: str) -> str:
        return EVENT_PATH.format(id=quote(event_id, safe=""))

    def fetch_event(self, event_id: str) -> Record:
        self._authorise()
        return super().fetch_event(event_id)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        if object_type != "capture":
            return super().fetch_object(object_type, object_id)
        self._authorise()
        body, response = self.client.get_json(
            CAPTURE_PATH.format(id=quote(object_id, safe="")), permission="the app's payments"
        )
        if not isinstance(body, Mapping) or "id" not in body:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} is not a capture"
            )
        return body

    def redeliver(self, event_id: str) -> None:
        self._authorise()
        self.client.request(
            "POST",
            RESEND_PATH.format(id=quote(event_id, safe="")),
            json={"webhook_ids": [self.webhook_id]},
            expected=(200, 202),
            permission="the app's webhook events",
        )
