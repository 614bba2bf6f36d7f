"""What Shopify's two connectors (GraphQL, REST) share: state listings, not a delivery log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from connectors.base import Access, Capabilities, Listing, Record
from connectors.errors import AuthError, MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, redact_url

ACCESS_SCOPES = "/admin/oauth/access_scopes.json"  # the token's scopes (not versioned)


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
