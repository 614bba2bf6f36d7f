"""Stripe's records and objects: a listed event as a :class:`Record`, an object at its own URL."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.base import Record
from connectors.http import ProviderClient, require


def from_epoch(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    # decoded JSON is plain dicts: that check first, as the Mapping ABC's costs more (per event)
    return value if isinstance(value, (dict, Mapping)) else {}


def event_record(event: Mapping[str, Any]) -> Record:
    """The record of one listed event: its object is ``data.object``, and the event's creation
    time orders the object's states (Stripe objects carry no version)."""
    obj = _mapping(_mapping(event.get("data")).get("object"))
    created, object_id = event.get("created"), obj.get("id")
    return Record(
        str(event["id"]),
        event.get("type"),
        obj.get("object"),
        None if object_id is None else str(object_id),
        from_epoch(created),
        None if created is None else str(created),
        event,
    )


def object_path(object_type: str, object_id: str) -> str:
    """``invoice`` → ``/v1/invoices/{id}``, ``checkout.session`` → ``/v1/checkout/sessions/{id}``."""
    parts = object_type.split(".")
    parts[-1] = parts[-1] + ("es" if parts[-1].endswith("s") else "s")
    return "/v1/" + "/".join(parts) + f"/{object_id}"


def fetch_stripe_object(
    client: ProviderClient, source: str, object_type: str, object_id: str
) -> Mapping[str, Any]:
    """An object's current state, at its own URL."""
    body, response = client.get_json(
        object_path(object_type, object_id), permission=f"read access to {object_type} objects"
    )
    require(body, "id", source=source, url=str(response.request.url))
    return dict(body)
