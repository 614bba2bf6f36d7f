"""The sandbox's Twilio REST API (2010-04-01): the account, its Messages and Calls, each listed newest
first with ``DateSent>``/``StartTime>`` (and ``<``, and the exact date), ``PageSize`` ≤ 1000 and the
next page's URI in the body; HTTP Basic auth with the account SID and auth token (or an API key's
SID and secret); Twilio's error bodies (``code``, ``message``, ``more_info``, ``status``)."""

from __future__ import annotations

import base64
import binascii
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.sandbox.common import SandboxState, b64, unb64

MAX_PAGE_SIZE = 1000
# (the resources' dict on the world, the date field the filter reads, the page's key)
LISTS = {
    "Messages": ("twilio_messages", "date_sent", "DateSent", "messages"),
    "Calls": ("twilio_calls", "start_time", "StartTime", "calls"),
}


def twilio_error(status: int, code: int, message: str) -> Response:
    return JSONResponse(
        {
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
        status_code=status,
    )


def _bound(value: str) -> datetime | date:
    """A filter's value: a date (YYYY-MM-DD) or the time twilio-python sends for a datetime."""
    if len(value) == 10:
        return date.fromisoformat(value)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _passes(at: datetime, op: str, bound: datetime | date) -> bool:
    if isinstance(bound, datetime):
        value: datetime | date = at
    else:
        value = at.date()
    if op == ">":
        return value >= bound
    if op == "<":
        return value <= bound
    return value == bound


class TwilioApi(SandboxState):
    def _twilio_auth(self, request: Request) -> Response | None:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user = password = ""
        account = request.path_params.get("account")
        allowed = {self.keys.twilio_account: self.keys.twilio_token, **self.keys.twilio_api_keys}
        if scheme.lower() != "basic" or allowed.get(user) != password or not password:
            return twilio_error(401, 20003, "Authenticate")
        if account != self.keys.twilio_account:
            return twilio_error(
                404, 20404, f"The requested resource /2010-04-01/Accounts/{account} was not found"
            )
        return None

    async def _twilio_admit(self, request: Request) -> Response | None:
        """Twilio's refusal of a call (its credentials, the sandbox's faults, a resource it does
        not have), or None."""
        if (denied := self._twilio_auth(request)) or (denied := await self._fault(request)):
            return denied
        if request.path_params.get("resource", "Messages") not in LISTS:
            return twilio_error(
                404, 20404, f"The requested resource {request.url.path} was not found"
            )
        return None

    async def twilio_account(self, request: Request) -> Response:
        if (denied := await self._twilio_admit(request)) is not None:
            return denied
        return JSONResponse(
            {
                "sid": self.keys.twilio_account,
                "friendly_name": "hookledger sandbox",
                "status": "active",
                "type": "Full",
            }
        )

    async def twilio_list(self, request: Request) -> Response:
        if (denied := await self._twilio_admit(request)) is not None:
            return denied
        resource = request.path_params["resource"]
        held, dated_by, name, key = LISTS[resource]
        q = request.query_params
        try:
            size = int(q.get("PageSize", "50"))
            page = int(q.get("Page", "0"))
            filters = [
                (op, _bound(q[f"{name}{op}"])) for op in (">", "<", "") if q.get(f"{name}{op}")
            ]
        except ValueError as exc:
            return twilio_error(400, 20001, f"Invalid parameter: {exc}")
        if not 1 <= size <= MAX_PAGE_SIZE:
            return twilio_error(400, 20001, f"PageSize must be between 1 and {MAX_PAGE_SIZE}")
        after: tuple[Any, ...] = ()
        if token := q.get("PageToken"):
            state = unb64(token)
            if state is None or not isinstance(state.get("after"), list):
                return twilio_error(400, 20001, "Invalid PageToken")
            after = tuple(state["after"])

        def when(item: dict[str, Any]) -> datetime:
            return parsedate_to_datetime(item[dated_by])

        # newest first; ties by SID, so a page token is a position
        items = sorted(
            getattr(self.world, held).values(),
            key=lambda i: (when(i).timestamp(), i["sid"]),
            reverse=True,
        )
        items = [i for i in items if all(_passes(when(i), op, b) for op, b in filters)]
        if after:
            items = [i for i in items if (when(i).timestamp(), i["sid"]) < (after[0], after[1])]
        chosen = items[:size]
        base = f"/2010-04-01/Accounts/{self.keys.twilio_account}/{resource}.json"
        kept = {k: v for k, v in q.items() if k not in ("Page", "PageToken", "PageSize")}
        next_uri = None
        if len(items) > size:
            last = chosen[-1]
            token = b64({"after": [when(last).timestamp(), last["sid"]]})
            query = {**kept, "PageSize": size, "Page": page + 1, "PageToken": token}
            next_uri = f"{base}?{urlencode(query)}"
        return JSONResponse(
            {
                key: chosen,
                "page": page,
                "page_size": size,
                "start": page * size,
                "end": page * size + max(len(chosen) - 1, 0),
                "first_page_uri": f"{base}?{urlencode({**kept, 'PageSize': size, 'Page': 0})}",
                "next_page_uri": next_uri,
                "previous_page_uri": None,
                "uri": f"{base}?{urlencode({**kept, 'PageSize': size, 'Page': page})}",
            }
        )

    async def twilio_resource(self, request: Request) -> Response:
        if (denied := await self._twilio_admit(request)) is not None:
            return denied
        resource = request.path_params["resource"]
        item = getattr(self.world, LISTS[resource][0]).get(request.path_params["sid"])
        if item is None:
            return twilio_error(
                404, 20404, f"The requested resource {request.url.path} was not found"
            )
        return JSONResponse(item)
