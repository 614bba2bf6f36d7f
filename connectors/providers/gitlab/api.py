"""GitLab's webhook event log, read to reconcile a project's (or group's) webhook
(``kind = "gitlab"``).

Facts, each with its source:

- **Endpoint.** ``GET /api/v4/projects/:id/hooks/:hook_id/events`` (GitLab 17.3+, MR 151048), and
  ``GET /api/v4/groups/:id/hooks/:hook_id/events`` for a group hook (Premium and Ultimate):
  "a list of events for a specific project webhook in the past 7 days from start date".
  https://docs.gitlab.com/api/project_webhooks/#list-project-webhook-events;
  https://docs.gitlab.com/api/group_webhooks/#list-all-group-hook-events.
- **One item is one delivery attempt** (a ``WebHookLog``: ``id``, ``url``, ``trigger``,
  ``request_headers``, ``request_data``, ``response_headers``, ``response_body``,
  ``execution_duration``, ``response_status`` as text, ``created_at``): gitlabhq
  ``lib/api/entities/web_hook_log.rb``. The logged ``request_headers`` carry the ``Idempotency-Key``
  (17.4+) and ``X-Gitlab-Event-UUID`` the receiver names the event by, so a record's id is the id
  the receiver stored (``connectors.providers.gitlab``); a resent event keeps its
  ``Idempotency-Key`` (gitlabhq ``app/models/hooks/web_hook_log.rb`` ``idempotency_key``).
- **Paging.** Offset pages: ``page`` (default 1) and ``per_page`` (default 20, **at most 20**:
  ``values: 1..20`` in gitlabhq ``lib/api/hooks/events.rb``; GitLab's spec "returns invalid value if
  per_page exceed 20" expects 400 ``per_page does not have a valid value``; the docs state only the
  default). The next page is in ``X-Next-Page`` (empty on the last) and ``Link``
  (https://docs.gitlab.com/api/rest/#pagination, ``lib/gitlab/pagination/offset_header_builder.rb``).
  The optional ``status`` filter is not used: every attempt is read.
- **Order, window.** Newest first: ``WebHookLog.created_between`` orders ``created_at DESC``, over
  ``recent(7)``, i.e. since the start of the day 7 days ago (gitlabhq
  ``app/models/hooks/web_hook_log.rb``, ``app/finders/web_hooks/web_hook_logs_finder.rb``). No time
  filter is accepted, so a scan reads newest first and stops at its window's start; retention 7 days.
- **Auth.** ``PRIVATE-TOKEN`` (or ``Authorization: Bearer``) with a token of scope ``read_api``
  (``api`` to resend); the Maintainer role on the project, Owner on the group
  (https://docs.gitlab.com/api/rest/authentication/, the webhook API pages' prerequisites).
- **Rate limits.** GitLab.com: 2,000 authenticated API requests a minute per user (the 2020
  announcement; the docs page announces per-plan hourly limits, not yet in effect), beyond it 429
  with ``Retry-After`` (https://docs.gitlab.com/user/gitlab_com/rate_limits/,
  https://about.gitlab.com/blog/2020/12/17/automation-check-in-and-rate-limit-changes-on-gitlab-dot-com/);
  self-managed instances set their own. Resend: 5 requests a minute per hook and user.
- **Resend.** ``POST …/hooks/:hook_id/events/:hook_event_id/resend`` (17.4+, MR 151130) sends a
  logged delivery again, with its ``Idempotency-Key``: :meth:`GitLabHookEvents.redeliver`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from pydantic import field_validator

from connectors.base import Access, Capabilities, DeliveryAttempt, Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError
from connectors.event_list import Call, EventList
from connectors.http import ProviderClient, redact_url
from connectors.options import ProviderKeys, SourceOptions
from connectors.parsing import ParsedEvent, iso_time
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://gitlab.com"
MAX_PAGE_SIZE = 20  # lib/api/hooks/events.rb: per_page values 1..20
# 2,000 API requests a minute per user on GitLab.com (33 a second): a scan takes a sixth of it, and
# a self-managed instance with a lower limit answers 429 with Retry-After, which is waited out
BUDGET = BudgetSettings(rate=5.0, concurrency=1)
# the logged request headers that name the event, in the receiver's order of preference
EVENT_ID_HEADERS = ("idempotency-key", "x-gitlab-event-uuid")


class GitLabKeys(ProviderKeys):
    # the project (numeric id or full path, "group/sub/project") or the group whose hook is read
    project: int | str | None = None
    group: int | str | None = None
    # the webhook's id (Settings > Webhooks, or GET /projects/:id/hooks)
    hook_id: int | None = None

    @field_validator("project", "group")
    @classmethod
    def _id_or_path(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be a positive id or a full path such as 'group/project'")
        if isinstance(value, str) and (not value.strip("/") or value != value.strip()):
            raise ValueError("must be a positive id or a full path such as 'group/project'")
        return value


def rule(values: Mapping[str, Any]) -> str | None:
    """A gitlab source names one hook (a project's or a group's) when it reconciles."""
    scoped = [k for k in ("project", "group") if values.get(k) is not None]
    if len(scoped) > 1:
        return "set only one of 'project' or 'group' (the hook's owner)"
    if scoped and values.get("hook_id") is None:
        return f"'{scoped[0]}' needs key 'hook_id' (the webhook whose events are read)"
    if values.get("hook_id") is not None and not scoped:
        return "'hook_id' needs key 'project' or 'group' (the hook's owner)"
    if values.get("api_key_env") and not scoped:
        return (
            "a reconciled gitlab source needs 'project' (or 'group') and 'hook_id': hookledger "
            "reads that webhook's event log (without api_key_env it only receives)"
        )
    return None


def events_path(project: int | str | None, group: int | str | None, hook_id: int) -> str:
    """The hook's event log; a path is URL-encoded whole ("a/b" -> "a%2Fb"), as GitLab asks."""
    owner, scope = (project, "projects") if project is not None else (group, "groups")
    return f"/api/v4/{scope}/{quote(str(owner), safe='')}/hooks/{hook_id}/events"


def headers_of(item: Mapping[str, Any]) -> dict[str, str]:
    """A log item's request headers, lower-cased (the receiver reads them case-insensitively)."""
    raw = item.get("request_headers")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k).lower(): v for k, v in raw.items() if isinstance(v, str)}


def event_id_of(headers: Mapping[str, str]) -> str | None:
    """The id the receiver stored: ``Idempotency-Key``, else (before 17.4) ``X-Gitlab-Event-UUID``."""
    return next((headers[h] for h in EVENT_ID_HEADERS if headers.get(h)), None)


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, dict | list) else str(value)


def attempt_of(item: Mapping[str, Any], at: datetime | None) -> DeliveryAttempt:
    """The delivery attempt a log item records: ``response_status`` is the receiver's HTTP status
    as text, or ``internal error`` when GitLab could not deliver."""
    status = _text(item.get("response_status"))
    code = (
        int(status)
        if status and len(status) == 3 and status.isascii() and status.isdigit()
        else None
    )
    ok = code is not None and 200 <= code < 300
    return DeliveryAttempt(str(item["id"]), at, "OK" if ok else status, code)


def log_record(item: Mapping[str, Any]) -> Record:
    """One logged delivery as the event it carried (``checked`` made sure it names one)."""
    headers = headers_of(item)
    data = item.get("request_data")
    data = data if isinstance(data, Mapping) else {}
    attributes = data.get("object_attributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}
    at = iso_time(item.get("created_at"))
    return Record(
        event_id=event_id_of(headers),
        event_type=headers.get("x-gitlab-event"),
        object_type=_text(data.get("object_kind")),
        object_id=_text(attributes.get("id")),
        occurred_at=at,
        object_version=_text(attributes.get("updated_at")),
        payload=item,
        attempts=(attempt_of(item, at),),
    )


def as_delivery(record: Record) -> tuple[ParsedEvent, bytes]:
    """A logged delivery stored as the receiver would have stored it (backfill): the body GitLab
    sent (``request_data``) and the identity its headers gave."""
    data = record.payload.get("request_data")
    headers = headers_of(record.payload)
    event = ParsedEvent(
        event_id=str(record.event_id),
        delivery_id=headers.get("x-gitlab-webhook-uuid"),
        event_type=record.event_type,
        object_type=record.object_type,
    )
    return event, json.dumps(data if isinstance(data, Mapping) else {}).encode()


class GitLabHookEvents(EventList):
    # every listed item is one attempt with the receiver's answer: a missing event's cause is told
    # from it; the object is the payload's object_attributes (a merge request, an issue, …)
    capabilities = Capabilities(
        delivery_log=True, object_path=("request_data", "object_attributes")
    )
    provider_name = "GitLab"
    items_path = "items"  # ``fetch`` keeps the JSON array here, beside the next page's number
    id_path = "id"
    filters_time = False
    retention_days = 7
    max_page_size = MAX_PAGE_SIZE

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        path: str,
        permission: str,
        page_size: int | None = None,
    ) -> None:
        super().__init__(source, client, page_size=page_size)
        self.path = path
        self.permission = permission

    def first(self, since: datetime, size: int) -> Call:
        return Call(self.path, (("per_page", size),))

    def fetch(self, call: Call) -> tuple[Any, str]:
        # the next page is a header (X-Next-Page): kept with the body, which is a bare JSON array
        body, response = self.client.get_json(
            call.url, params=list(call.params) or None, permission=self.permission
        )
        following = response.headers.get("x-next-page", "")
        return {"items": body, "next_page": following}, str(response.request.url)

    def items(self, body: Any, url: str) -> list[Any]:
        listed = body.get("items") if isinstance(body, Mapping) else None
        if not isinstance(listed, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} did not return a JSON array of hook events"
            )
        return listed

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        following = str(body.get("next_page") or "").strip()
        if not following:
            return None
        if len(following) > 12 or not following.isascii() or not following.isdigit():
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} X-Next-Page {following[:20]!r} is not a page"
            )
        params = [(k, v) for k, v in call.params if k != "page"]
        return Call(call.url, (*params, ("page", int(following))))

    def checked(self, item: Any, url: str, index: int) -> Record:
        if not isinstance(item, Mapping) or _text(item.get("id")) in (None, ""):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} item {index} has no 'id'"
            )
        if event_id_of(headers_of(item)) is None:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} item {index} has no Idempotency-Key "
                "or X-Gitlab-Event-UUID in its request_headers"
            )
        return log_record(item)

    def record(self, item: Mapping[str, Any]) -> Record:
        return log_record(item)

    def _logged(self, event_id: str) -> Record:
        """The newest logged delivery of an event (or the log item of that id), read back from the
        newest: GitLab reads no log item by id, and keeps 7 days."""
        call: Call | None = self.first(datetime.min, self.page_size)
        while call is not None:
            body, url = self.fetch(call)
            listed = self.items(body, url)
            for i, item in enumerate(listed):
                record = self.checked(item, url, i)
                if event_id in (record.event_id, record.attempts[0].attempt_id):
                    return record
            call = self.onward(body, url, call, listed) if listed else None
        raise NotFoundError(
            f"source '{self.source}': GitLab logged no delivery of {event_id} in the last "
            f"{self.retention_days} days"
        )

    def fetch_event(self, event_id: str) -> Record:
        return self._logged(event_id)

    def redeliver(self, event_id: str) -> None:
        """GitLab sends the logged delivery again, with the same ``Idempotency-Key`` (the receiver
        stores it once); 5 resends a minute per hook and user, beyond it a 429 that is waited out."""
        log_id = self._logged(event_id).attempts[0].attempt_id
        self.client.request(
            "POST", f"{self.path}/{log_id}/resend", permission=self.permission, expected=(200, 201)
        )

    def check_access(self) -> Access:
        """One page of one logged delivery: the request a scan makes."""
        body, url = self.fetch(self.first(datetime.min, 1))
        listed = self.items(body, url)
        for i, item in enumerate(listed):  # what it lists is read as a scan reads it
            self.checked(item, url, i)
        found = "" if listed else " (none in the last 7 days)"
        return Access(f"lists the GitLab webhook's events ({redact_url(url)}){found}")


def build(options: SourceOptions, client: ClientFactory) -> GitLabHookEvents:
    keys = options.own(GitLabKeys)
    if keys.hook_id is None or (keys.project is None and keys.group is None):
        raise ConfigError(
            f"source '{options.name}': reconciling GitLab needs 'project' (or 'group') and "
            "'hook_id': the webhook whose event log is read"
        )
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling GitLab needs 'api_key_env' (a token with the "
            "read_api scope)"
        )
    role = (
        "Maintainer role on the project" if keys.project is not None else "Owner role on the group"
    )
    return GitLabHookEvents(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"PRIVATE-TOKEN": options.api_key},
            options.hint(),
        ),
        path=events_path(keys.project, keys.group, keys.hook_id),
        permission=f"a token with the read_api scope (api to resend) and the {role}",
        page_size=options.page_size,
    )
