"""What Shopify's two connectors (GraphQL, REST) share: state listings, not a delivery log; and a
delivery's identity, which the receiver, the sandbox and ``hookledger send`` name alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import timedelta

from connectors.base import Access, Capabilities, Listing, Record
from connectors.errors import AuthError, MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, redact_url
from connectors.parsing import ParsedEvent, required_id
from connectors.providers.shopify.signature import parse_shopify

ACCESS_SCOPES = "/admin/oauth/access_scopes.json"  # the token's scopes (not versioned)


def delivery_identity(headers: Mapping[str, str]) -> str | None:
    """The event a delivery is (lower-cased header names): its topic and ``X-Shopify-Event-Id``.

    "The same value across more than one webhook indicates a duplicate": each subscription to one
    topic gets its own delivery, with its own ``X-Shopify-Webhook-Id``
    (https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates). One merchant action that fires
    two topics shares the event id, so the topic keeps those two events apart. None without both
    headers: the delivery's webhook id names it, as before.
    """
    topic = (headers.get("x-shopify-topic") or "").strip()
    event = (headers.get("x-shopify-event-id") or "").strip()
    if not (topic and event):
        return None
    return required_id(f"{topic}:{event}", "headers X-Shopify-Topic and X-Shopify-Event-Id")


def parse_delivery(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    """A delivery read as ``signature.parse_shopify`` reads it, stored under
    :func:`delivery_identity`; the webhook id stays the delivery's own id."""
    parsed = parse_shopify(headers, body)
    event_id = delivery_identity(headers)
    return dataclasses.replace(parsed, event_id=event_id) if event_id else parsed


class ShopifyBase:
    # Shopify lists current resources, not the webhooks it sent
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(self, source: str, client: ProviderClient, resources: Sequence[str]) -> None:
        self.source = source
        self.client = client
        self.read_scopes = tuple(f"read_{r}" for r in resources)  # what a scan reads

    @property
    def retention(self) -> timedelta | None:
        return None  # state, not a log: nothing expires

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def fetch_event(self, event_id: str) -> Record:
        raise UnsupportedError(
            f"source '{self.source}': Shopify has no API that lists webhook deliveries"
        )

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Shopify cannot be asked to redeliver a webhook"
        )

    def check_access(self) -> Access:
        body, response = self.client.get_json(ACCESS_SCOPES, permission="a valid access token")
        listed = body.get("access_scopes") if isinstance(body, dict) else None
        if not isinstance(listed, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} did not list "
                "access_scopes"
            )
        handles = {
            str(s["handle"])
            for s in listed
            if isinstance(s, dict) and isinstance(s.get("handle"), str)
        }
        # a write scope includes its read scope (Shopify's access scopes)
        lacking = [
            r for r in self.read_scopes if r not in handles and f"write_{r[5:]}" not in handles
        ]
        if lacking:
            raise AuthError(
                f"source '{self.source}': the access token lacks the {', '.join(lacking)} scope "
                f"(it has {', '.join(sorted(handles)) or 'none'}); reconciliation reads with it"
            )
        writes = sorted(h for h in handles if h.startswith("write_"))
        detail = f"the token reads {', '.join(r[5:] for r in self.read_scopes)}"
        if not writes:
            return Access(detail)
        return Access(
            detail,
            (
                f"the token may also write ({', '.join(writes)}); reconciliation needs only "
                + ", ".join(self.read_scopes),
            ),
        )
