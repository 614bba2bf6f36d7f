"""The sandbox's Stripe's API: events (newest first, cursors, created filters, types), objects by id."""

from __future__ import annotations

import base64
import bisect
import fnmatch
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.sandbox.common import SandboxState

STRIPE_RETENTION = timedelta(days=30)

# GET /v1/events' parameters (https://docs.stripe.com/api/events/list): an array in any encoding
# the official libraries send (types[]=…, types[0]=…, types=… repeated), created as a value or a
# range, and expand (every list takes it)
_LIST_PARAM = re.compile(
    r"limit|starting_after|ending_before|type|types(\[\d*\])?|created(\[(gt|gte|lt|lte)\])?"
    r"|delivery_success|expand(\[\d*\])?"
)


STRIPE_OBJECT_PATHS = {
    "invoices": "invoice",
    "charges": "charge",
    "customers": "customer",
    "payment_intents": "payment_intent",
    "subscriptions": "subscription",
    "refunds": "refund",
}


def array_values(params: Iterable[tuple[str, str]], name: str) -> list[str]:
    """The values of array parameter ``name`` in any encoding Stripe reads: ``name[]`` repeated,
    indexed ``name[0]``, ``name[1]`` (stripe-python's, in index order) or ``name`` repeated."""
    indexed: list[tuple[int, str]] = []
    plain: list[str] = []
    for key, value in params:
        if key in (name, f"{name}[]"):
            plain.append(value)
        elif key.startswith(f"{name}[") and key.endswith("]") and key[len(name) + 1 : -1].isdigit():
            indexed.append((int(key[len(name) + 1 : -1]), value))
    return plain + [value for _, value in sorted(indexed)]


def _stripe_error(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    error: dict[str, Any] = {"type": "invalid_request_error", "message": message}
    if code:
        error["code"] = code
    if param:
        error["param"] = param
    return JSONResponse({"error": error}, status_code=status)


class StripeApi(SandboxState):
    def _stripe_auth(self, request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        key = None
        if header.lower().startswith("bearer "):
            key = header[7:].strip()
        elif header.lower().startswith("basic "):
            try:
                key = base64.b64decode(header[6:]).decode().split(":", 1)[0]
            except ValueError:
                key = None
        if key != self.keys.stripe:
            shown = f"{key[:8]}***" if key else "none"
            return _stripe_error(401, f"Invalid API Key provided: {shown}")
        return None

    def _stripe_index(self) -> tuple[list[dict[str, Any]], dict[str, int], list[int]]:
        """Events newest first, id -> position, and negated creation times (for bisect); rebuilt only
        when events are added, so a page costs O(page) even with a million events."""
        events = self.world.stripe_events
        if self._stripe_cache is None or self._stripe_cache[0] != len(events):
            newest_first = list(reversed(events))
            self._stripe_cache = (
                len(events),
                newest_first,
                {e["id"]: i for i, e in enumerate(newest_first)},
                [-e["created"] for e in newest_first],
            )
        _, newest_first, positions, neg_created = self._stripe_cache
        return newest_first, positions, neg_created

    def _stripe_listable(self) -> tuple[list[dict[str, Any]], int]:
        """Newest first, and how many of them are within the retention window (a bound, not a
        slice: copying a million-event list per page made every page O(N))."""
        newest_first, _, neg_created = self._stripe_index()
        oldest = int((self.clock() - STRIPE_RETENTION).timestamp())
        return newest_first, bisect.bisect_right(neg_created, -oldest)

    async def stripe_list(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            limit = int(q.get("limit", "10"))
        except ValueError:
            return _stripe_error(400, "Invalid integer: limit", param="limit")
        if not 1 <= limit <= 100:
            return _stripe_error(400, "This value must be between 1 and 100.", param="limit")
        after, before = q.get("starting_after"), q.get("ending_before")
        if after and before:
            return _stripe_error(
                400, "You may only specify one of these parameters: ending_before, starting_after."
            )
        unknown = next(
            (name for name, _ in q.multi_items() if not _LIST_PARAM.fullmatch(name)), None
        )
        if unknown is not None:  # Stripe refuses what it does not know; so does its stand-in
            return _stripe_error(400, f"Received unknown parameter: {unknown}", param=unknown)
        if q.get("delivery_success") is not None:
            return _stripe_error(
                400,
                "The sandbox does not record webhook delivery results: delivery_success is refused "
                "rather than ignored",
                param="delivery_success",
            )
        types = array_values(q.multi_items(), "types")
        if types and q.get("type"):
            return _stripe_error(
                400, "You may pass either `type` or `types`, but not both.", param="types"
            )
        if len(types) > 20:
            return _stripe_error(400, "types may contain at most 20 values", param="types")
        bounds: dict[str, int] = {}
        for op in ("gt", "gte", "lt", "lte"):
            if (value := q.get(f"created[{op}]")) is not None:
                if not value.isdigit():
                    return _stripe_error(
                        400, f"Invalid integer: created[{op}]", param=f"created[{op}]"
                    )
                bounds[op] = int(value)
        if (exact := q.get("created")) is not None and exact.isdigit():
            bounds["gte"] = bounds["lte"] = int(exact)
        patterns = types or ([q["type"]] if q.get("type") else [])
        floor = max(bounds.get("gte", -(2**62)), bounds.get("gt", -(2**62) - 1) + 1)

        def keep(e: dict[str, Any]) -> bool:
            c = e["created"]
            if (
                c < floor
                or ("lt" in bounds and c >= bounds["lt"])
                or ("lte" in bounds and c > bounds["lte"])
            ):
                return False
            return not patterns or any(fnmatch.fnmatchcase(e["type"], p) for p in patterns)

        items, listable = self._stripe_listable()
        _, positions, _ = self._stripe_index()
        start, step = 0, 1
        if after or before:
            anchor = after or before
            position = positions.get(anchor or "")
            if position is None or position >= listable:
                param = "starting_after" if after else "ending_before"
                return _stripe_error(
                    400, f"No such event: '{anchor}'", code="resource_missing", param=param
                )
            start, step = (position + 1, 1) if after else (position - 1, -1)
        if step == 1 and "lt" in bounds:  # newest first: skip what is newer than the bound
            start = max(start, bisect.bisect_right(self._stripe_index()[2], -bounds["lt"]))
        picked: list[dict[str, Any]] = []
        i = start
        while 0 <= i < listable and len(picked) <= limit:
            e = items[i]
            if step == 1 and e["created"] < floor:
                break  # newest first: everything further is older still
            if keep(e):
                picked.append(e)
            i += step
        has_more = len(picked) > limit
        page = picked[:limit]
        if step == -1:
            page.reverse()  # ending_before: the `limit` closest newer events, still newest first
        return JSONResponse(
            {"object": "list", "data": page, "has_more": has_more, "url": "/v1/events"}
        )

    async def stripe_event(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        event_id = request.path_params["id"]
        items, listable = self._stripe_listable()
        _, positions, _ = self._stripe_index()
        position = positions.get(event_id)
        event = items[position] if position is not None and position < listable else None
        if event is None:
            return _stripe_error(
                404, f"No such event: '{event_id}'", code="resource_missing", param="id"
            )
        return JSONResponse(event)

    async def stripe_object(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        kind = STRIPE_OBJECT_PATHS.get(request.path_params["objects"])
        obj = self.world.stripe_objects.get((kind or "", request.path_params["id"]))
        if obj is None:
            return _stripe_error(
                404,
                f"No such {kind or 'object'}: '{request.path_params['id']}'",
                code="resource_missing",
                param="id",
            )
        return JSONResponse(obj)

    async def stripe_checkout_session(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        obj = self.world.stripe_objects.get(("checkout.session", request.path_params["id"]))
        if obj is None:
            return _stripe_error(
                404,
                f"No such checkout.session: '{request.path_params['id']}'",
                code="resource_missing",
            )
        return JSONResponse(obj)
