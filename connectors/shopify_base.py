"""What Shopify's two connectors (GraphQL, REST) share: state listings, not a delivery log."""

from __future__ import annotations

from datetime import timedelta

from connectors.base import Capabilities, Listing, Record
from connectors.errors import UnsupportedError
from connectors.http import ProviderClient


class ShopifyBase:
    # Shopify lists current resources, not the webhooks it sent
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(self, source: str, client: ProviderClient) -> None:
        self.source = source
        self.client = client

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
