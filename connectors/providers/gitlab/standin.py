"""GitLab's webhook event log as the sandbox stands in for it (under ``/gitlab/api/v4/``).

As GitLab answers (docs/providers/gitlab.md "Reconciliation"; gitlabhq ``lib/api/hooks/events.rb``,
``lib/api/hooks/resend_hook.rb``, ``app/models/hooks/web_hook_log.rb``):

- ``GET /api/v4/projects/:id/hooks/:hook_id/events`` and the ``/groups/…`` variant; ``:id`` a numeric
  id or the URL-encoded full path. A ``PRIVATE-TOKEN`` (or ``Authorization: Bearer``) token; none
  or a wrong one is ``401 {"message": "401 Unauthorized"}``, a token without the role on the
  project ``403 {"message": "403 Forbidden"}``; an unknown project ``404 Project Not Found``.
- ``status`` (codes or ``successful``, ``client_failure``, ``server_failure``, comma-separated),
  ``page`` and ``per_page`` (1 to 20): anything else refused with Grape's 400 ``{"error": …}``.
  Real GitLab ignores parameters it does not declare; the stand-in refuses them, so a misspelt one
  fails a test instead of being silently dropped.
- Newest first (``created_at DESC``), the last 7 days from the start of that day; offset pages with
  ``X-Page``, ``X-Per-Page``, ``X-Next-Page`` (empty on the last), ``X-Prev-Page``, ``X-Total``,
  ``X-Total-Pages`` and ``Link``; a page past the end is an empty array, as GitLab answers it.
- Beyond the rate limit, Rack::Attack's answer: ``429`` ``Retry later`` as plain text with
  ``Retry-After`` and ``RateLimit-*``.
- ``POST …/events/:hook_event_id/resend``: ``201 {"response_status": 200}``, 5 a minute per hook
  and token (beyond, 429 ``This endpoint has been requested too many times``); the resent log ids
  are kept in ``resent`` (the stand-in delivers nothing).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute

from connectors.providers.gitlab import history as made
from connectors.sandbox.common import SandboxState
from connectors.sandbox.standin import Refused, Sent, StandIn

TOKEN = "glpat-Hk7sandboxStandIn2x"  # the Maintainer's personal access token
GUEST_TOKEN = "glpat-Rp3reporterOnly9qZ"  # a Reporter's: authenticated, refused the hook (403)
PROJECT_ID, PROJECT_PATH, HOOK_ID = made.PROJECT["id"], "acme/shop", 4211
GROUP_ID, GROUP_PATH, GROUP_HOOK_ID = 90817263, "acme", 877
RETENTION_DAYS = 7
MAX_PER_PAGE = 20
RESENDS_A_MINUTE = 5
STATUSES = {str(s.value) for s in HTTPStatus} | {"successful", "client_failure", "server_failure"}
COUNT_LIMIT = 10_000  # Kaminari's: past it GitLab leaves out X-Total, X-Total-Pages and rel="last"
EVENTS = "/api/v4/{scope}/{owner:path}/hooks/{hook_id}/events"


def _integer(raw: str) -> int | None:
    text = raw.strip()
    digits = text.removeprefix("-")
    return int(text) if digits.isdigit() and digits.isascii() and len(digits) <= 18 else None


def _matches(status: str, wanted: set[str]) -> bool:
    code = int(status) if status.isdigit() else None
    return (
        status in wanted
        or ("successful" in wanted and code is not None and 200 <= code < 300)
        or ("client_failure" in wanted and code is not None and 400 <= code < 500)
        or (
            "server_failure" in wanted
            and (status == "internal error" or (code is not None and 500 <= code < 600))
        )
    )


class GitLabStandIn(StandIn):
    kind = "gitlab"
    list_path = f"/api/v4/projects/{PROJECT_ID}/hooks/{HOOK_ID}/events"
    source_keys = {"project": PROJECT_PATH, "hook_id": HOOK_ID}
    credentials = {"api_key_env": TOKEN}
    object_type = "merge_request"
    status_path = "state"  # in the record's object: the payload's object_attributes

    def __init__(self, box: SandboxState) -> None:
        super().__init__(box)
        self.resent: list[int] = []
        self._resends: dict[tuple[str, int, str], list[datetime]] = {}

    def routes(self) -> list[BaseRoute]:
        resend = EVENTS + "/{log_id}/resend"
        return [
            self.route(EVENTS.replace("{scope}", "projects"), self.events),
            self.route(EVENTS.replace("{scope}", "groups"), self.events),
            self.route(resend.replace("{scope}", "projects"), self.resend, ("POST",)),
            self.route(resend.replace("{scope}", "groups"), self.resend, ("POST",)),
        ]

    def error(self, status: int, message: str) -> Response:
        if status == 400:  # Grape's parameter errors
            return JSONResponse({"error": message}, status_code=400)
        default = {401: "401 Unauthorized", 403: "403 Forbidden", 404: "404 Not found"}
        text = message if message.startswith(str(status)) else default.get(status, message)
        return JSONResponse({"message": text}, status_code=status)

    def throttled(self, wait: float) -> Response:
        seconds = max(1, math.ceil(wait))
        reset = self.box.clock() + timedelta(seconds=seconds)
        return PlainTextResponse(
            "Retry later\n",
            status_code=429,
            headers={
                "Retry-After": str(seconds),
                "RateLimit-Name": "throttle_authenticated_api",
                "RateLimit-Limit": "2000",
                "RateLimit-Observed": "2001",
                "RateLimit-Remaining": "0",
                "RateLimit-Reset": str(int(reset.timestamp())),
                "RateLimit-ResetTime": format_datetime(reset.astimezone(UTC), usegmt=True),
            },
        )

    def _token(self, request: Request) -> str | None:
        given = request.headers.get("private-token")
        bearer = request.headers.get("authorization", "")
        return given or (bearer[7:] if bearer.startswith("Bearer ") else None)

    def authorised(self, request: Request) -> bool:
        return self._token(request) in (TOKEN, GUEST_TOKEN)

    def _hook(self, request: Request) -> int:
        """The hook the path names, as GitLab finds it: its owner, then its id, then the role."""
        scope = request.url.path.split("/api/v4/")[1].split("/")[0]
        owner = request.path_params["owner"]
        if scope == "projects" and owner not in (str(PROJECT_ID), PROJECT_PATH):
            raise Refused(self.error(404, "404 Project Not Found"))
        if scope == "groups" and owner not in (str(GROUP_ID), GROUP_PATH):
            raise Refused(self.error(404, "404 Group Not Found"))
        hook_id = _integer(request.path_params["hook_id"])
        if hook_id is None:
            raise Refused(self.error(400, "hook_id is invalid"))
        if hook_id != (HOOK_ID if scope == "projects" else GROUP_HOOK_ID):
            raise Refused(self.error(404, "404 Not found"))
        if self._token(request) != TOKEN:
            raise Refused(self.error(403, "403 Forbidden"))
        return hook_id

    def _logs(self) -> list[dict[str, Any]]:
        """The hook's log GitLab still lists, newest first: ``recent(7)`` reaches back to the start
        of the day 7 days ago."""
        now = self.box.clock()
        horizon = made.api_time(
            (now - timedelta(days=RETENTION_DAYS)).replace(
                hour=0, minute=0, second=0, microsecond=0
            )
        )
        logs = [s.item for s in self.sent if s.item["created_at"] >= horizon]
        return sorted(logs, key=lambda log: (log["created_at"], log["id"]), reverse=True)

    async def events(self, request: Request) -> Response:
        self._hook(request)
        params = self.query(request, ("status", "page", "per_page"))
        size = _integer(params.get("per_page", "20"))
        if size is None:
            raise Refused(self.error(400, "per_page is invalid"))
        if not 1 <= size <= MAX_PER_PAGE:
            raise Refused(self.error(400, "per_page does not have a valid value"))
        page = _integer(params.get("page", "1"))
        if page is None:
            raise Refused(self.error(400, "page is invalid"))
        if page < 1:
            raise Refused(self.error(400, "page does not have a valid value"))
        logs = self._logs()
        if "status" in params:
            wanted = {s.strip() for s in params["status"].split(",")}
            if not wanted <= STATUSES:
                raise Refused(self.error(400, "status does not have a valid value"))
            logs = [log for log in logs if _matches(log["response_status"], wanted)]
        shown = logs[(page - 1) * size : page * size]
        pages = max(1, math.ceil(len(logs) / size))
        following = page + 1 if page * size < len(logs) else None
        previous = page - 1 if page > 1 else None
        headers = {
            "X-Per-Page": str(size),
            "X-Page": str(page),
            "X-Next-Page": str(following or ""),
            "X-Prev-Page": str(previous or ""),
            "Link": self._links(request, params, size, previous, following, pages, len(logs)),
        }
        if len(logs) <= COUNT_LIMIT:
            headers |= {"X-Total": str(len(logs)), "X-Total-Pages": str(pages)}
        return JSONResponse(shown, headers=headers)

    def _links(
        self,
        request: Request,
        params: Mapping[str, str],
        size: int,
        previous: int | None,
        following: int | None,
        pages: int,
        total: int,
    ) -> str:
        """``lib/gitlab/pagination/offset_header_builder.rb``: the request's own parameters with
        ``page`` and ``per_page``, sorted as Rails' ``to_query`` writes them."""

        def href(number: int) -> str:
            query = urlencode(
                sorted({**params, "page": str(number), "per_page": str(size)}.items())
            )
            return str(request.url.replace(query=query))

        links = [f'<{href(previous)}>; rel="prev"'] if previous else []
        links += [f'<{href(following)}>; rel="next"'] if following else []
        links.append(f'<{href(1)}>; rel="first"')
        if total <= COUNT_LIMIT:
            links.append(f'<{href(pages)}>; rel="last"')
        return ", ".join(links)

    async def resend(self, request: Request) -> Response:
        hook_id = self._hook(request)
        self.query(request, ())
        log_id = _integer(request.path_params["log_id"])
        if log_id is None:
            raise Refused(self.error(400, "hook_log_id is invalid"))
        now = self.box.clock()
        key = (request.url.path.split("/hooks/")[0], hook_id, str(self._token(request)))
        recent = [t for t in self._resends.get(key, []) if now - t < timedelta(minutes=1)]
        if len(recent) >= RESENDS_A_MINUTE:
            return JSONResponse(
                {"message": "This endpoint has been requested too many times. Try again later."},
                status_code=429,
                headers={"Retry-After": "60"},
            )
        # any log the hook still holds (its daily partitions are kept 14 days), not only 7 days'
        if not any(s.item["id"] == log_id for s in self.sent):
            raise Refused(self.error(404, "404 Not found"))
        self._resends[key] = [*recent, now]
        self.resent.append(log_id)
        return JSONResponse({"response_status": 200}, status_code=201)

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        return made.history(rng, count, start, span)


STAND_IN = GitLabStandIn
