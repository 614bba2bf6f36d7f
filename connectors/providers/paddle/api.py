"""Paddle's event stream, read to reconcile its notifications (``kind = "paddle"``).

``GET /events`` lists the events of the last 90 days ("Events older than 90 days aren't retained"),
``order_by=id[DESC]`` by default (newest first), ``per_page`` up to 200 (default 50; more is
answered with 200), the next page's URL in ``meta.pagination.next`` with ``has_more``; it takes no
time filter, so a scan reads newest first and stops at its window's start. Bearer API key with the
``notification.read`` permission. 240 requests a minute an IP address, beyond it 429
``too_many_requests`` with ``Retry-After``. Sources: docs/providers.md "Paddle".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from connectors.base import Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError
from connectors.event_list import Call, EventList, event_time, text
from connectors.options import SourceOptions
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://api.paddle.com"  # its sandbox: https://sandbox-api.paddle.com
# 240 requests a minute (4 a second) an IP address: a scan leaves a quarter for the application
BUDGET = BudgetSettings(rate=3.0, concurrency=1)


def object_type(event_type: str | None) -> str | None:
    """``transaction.completed`` is about a transaction."""
    return event_type.partition(".")[0] if event_type else None


class PaddleEvents(EventList):
    provider_name = "Paddle"
    id_path = "event_id"
    filters_time = False
    retention_days = 90
    permission = "the notification.read permission"
    max_page_size = 200

    def first(self, since: datetime, size: int) -> Call:
        return Call("/events", (("order_by", "id[DESC]"), ("per_page", size)))

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        pagination = (body.get("meta") or {}).get("pagination") or {}
        following = pagination.get("next")
        if not pagination.get("has_more") or not isinstance(following, str) or not following:
            return None
        return Call(following)

    def record(self, item: Mapping[str, Any]) -> Record:
        event_type = text(item, "event_type")
        return Record(
            event_id=str(item["event_id"]),
            event_type=event_type,
            object_type=object_type(event_type),
            object_id=text(item, "data.id"),
            occurred_at=event_time(item.get("occurred_at")),
            object_version=text(item, "data.updated_at"),
            payload=item,
        )


def build(options: SourceOptions, client: ClientFactory) -> PaddleEvents:
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling Paddle needs 'api_key_env' (an API key with "
            "the notification.read permission)"
        )
    return PaddleEvents(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Bearer {options.api_key}"},
            options.hint(),
        ),
        page_size=options.page_size,
    )
