"""The sandbox's Stripe API v2 events: ``GET /v2/core/events`` (``created[gte|gt|lte|lt]`` as ISO
times, ``types[i]``, ``object_id``, ``limit``; newest first; the next page's URL in the body as
``next_page_url``) and ``GET /v2/core/events/{id}``. Each v1 event of the world is also a thin event
(``v1.<type>``, its object by reference), as an event destination with thin payloads sends it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.providers.stripe.records import object_path
from connectors.providers.stripe.sandbox import STRIPE_RETENTION, StripeApi, _stripe_error
from connectors.sandbox.common import b64, unb64

MAX_LIMIT = 100


def thin_of(event: dict[str, Any]) -> dict[str, Any]:
    """The thin event a v1 event is for an event destination with thin payloads."""
    obj = event["data"]["object"]
    created = datetime.fromtimestamp(event["created"], UTC)
    return {
        "id": "evt_v2" + event["id"][4:],
        "object": "v2.core.event",
        "type": f"v1.{event['type']}",
        "livemode": False,
        "created": created.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "context": None,
        "related_object": {
            "id": obj["id"],
            "type": obj["object"],
            "url": object_path(obj["object"], obj["id"]),
        },
    }


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class StripeV2Api(StripeApi):
    async def stripe_v2_list(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        if page := q.get("page"):
            state = unb64(page)
            if state is None:
                return _stripe_error(400, "Invalid page token", param="page")
            filters, after = state["f"], tuple(state["after"])
        else:
            filters = {k: v for k, v in q.multi_items() if k != "page"}
            after = ()
        try:
            limit = int(filters.get("limit", "10"))
            bounds = {
                op: _iso(filters[f"created[{op}]"])
                for op in ("gte", "gt", "lte", "lt")
                if filters.get(f"created[{op}]")
            }
        except ValueError:
            return _stripe_error(400, "Invalid limit or created filter", param="created")
        if not 1 <= limit <= MAX_LIMIT:
            return _stripe_error(400, f"limit must be between 1 and {MAX_LIMIT}", param="limit")
        types = {v for k, v in filters.items() if k.startswith("types[")}
        horizon = self.clock() - STRIPE_RETENTION
        checks = {
            "gte": lambda at, b: at >= b,
            "gt": lambda at, b: at > b,
            "lte": lambda at, b: at <= b,
            "lt": lambda at, b: at < b,
        }
        listed = []
        for event in reversed(self.world.stripe_events):  # newest first
            at = datetime.fromtimestamp(event["created"], UTC)
            if at < horizon or not all(checks[op](at, b) for op, b in bounds.items()):
                continue
            thin = thin_of(event)
            if types and thin["type"] not in types:
                continue
            if filters.get("object_id") and thin["related_object"]["id"] != filters["object_id"]:
                continue
            listed.append(((-event["created"], thin["id"]), thin))
        listed.sort(key=lambda pair: pair[0])
        if after:
            listed = [p for p in listed if p[0] > (after[0], after[1])]
        chosen = listed[:limit]
        next_url = None
        if len(listed) > limit:
            token = b64({"f": filters, "after": list(chosen[-1][0])})
            next_url = f"/v2/core/events?{urlencode({'page': token})}"
        return JSONResponse(
            {"data": [t for _, t in chosen], "next_page_url": next_url, "previous_page_url": None}
        )

    async def stripe_v2_event(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        wanted = request.path_params["id"]
        for event in self.world.stripe_events:
            if "evt_v2" + event["id"][4:] == wanted:
                return JSONResponse(thin_of(event))
        return _stripe_error(404, f"No such event: '{wanted}'", code="resource_missing")
