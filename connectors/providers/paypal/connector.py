"""PayPal's REST API as the receiver and the reconciler use it: an OAuth2 client-credentials token,
the verify-webhook-signature call, and an event read back or sent again by id."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.errors import MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, decode_json, redact_url
from connectors.oauth import ClientCredentials
from connectors.webhooks import SignatureError, iso_time, text_or_none

DEFAULT_BASE_URL = "https://api-m.paypal.com"  # the sandbox: https://api-m.sandbox.paypal.com
TOKEN_PATH = "/v1/oauth2/token"
VERIFY_PATH = "/v1/notifications/verify-webhook-signature"
EVENT_PATH = "/v1/notifications/webhooks-events/{id}"
RESEND_PATH = "/v1/notifications/webhooks-events/{id}/resend"
SCOPE = "https://uri.paypal.com/services/applications/verify-webhook-signature"


def event_record(event: Mapping[str, Any]) -> Record:
    """A PayPal event (as delivered or as read back) as a record."""
    resource = event.get("resource")
    resource_id = text_or_none(resource.get("id")) if isinstance(resource, Mapping) else None
    return Record(
        event_id=str(event["id"]),
        event_type=text_or_none(event.get("event_type")),
        object_type=text_or_none(event.get("resource_type")) if resource_id else None,
        object_id=resource_id,
        occurred_at=iso_time(event.get("create_time")),
        object_version=None,
        payload=event,
    )


class PayPalConnector:
    # the receiver's verification, events read back and resent by id; no listing is built
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        client_id: str,
        client_secret: str,
        webhook_id: str,
        clock: Any = time.monotonic,
    ) -> None:
        self.source = source
        self.client = client
        self.webhook_id = webhook_id
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

    @property
    def retention(self) -> timedelta | None:
        return None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _authorise(self) -> None:
        self.token.authorise()

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

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        """Nothing listed: events are verified as they arrive and read back by id."""
        yield Page((), {}, done=True, url=None)

    def fetch_event(self, event_id: str) -> Record:
        self._authorise()
        body, response = self.client.get_json(
            EVENT_PATH.format(id=event_id), permission="the app's webhook events"
        )
        if not isinstance(body, dict) or "id" not in body:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} is not an event"
            )
        return event_record(body)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        raise UnsupportedError(
            f"source '{self.source}': PayPal's resources are not read here ({object_type})"
        )

    def redeliver(self, event_id: str) -> None:
        self._authorise()
        self.client.request(
            "POST",
            RESEND_PATH.format(id=event_id),
            json={"webhook_ids": [self.webhook_id]},
            expected=(200, 202),
            permission="the app's webhook events",
        )

    def check_access(self) -> Access:
        self._authorise()
        return Access("the OAuth client gets a token (verifies the webhook's deliveries)")
