"""GitHub: a hook's delivery log (docs/providers.md §2).

Scopes: a repository hook (``repository`` + ``hook_id``), an organization hook (``organization`` +
``hook_id``), both with a token in ``api_key_env``; or a GitHub App's hook (``app_id`` +
``private_key_env``: a JWT signed RS256 with the app's private key, renewed before it expires).

The list is newest first, paged with an opaque ``cursor`` taken from the ``Link: rel="next"`` URL. A scan
reads back from the newest delivery to the stored position (the newest attempt id of the last
complete scan). The position only moves to the new top once the scan is through; until then the
cursor keeps the next page's URL, so an interrupted scan resumes where it stopped.

Record id = ``guid`` (= ``X-GitHub-Delivery``, the same across redeliveries); every attempt's id,
``status`` (``"OK"`` = delivered), ``status_code`` and ``redelivery`` are kept. GitHub never retries by
itself and keeps deliveries 3 days (7 on Enterprise Server): :attr:`retention` says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from connectors.base import (
    Access,
    Capabilities,
    Cursor,
    DeliveryAttempt,
    Listing,
    Page,
    Record,
    ScanOptions,
    beyond_retention,
)
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError
from connectors.http import ProviderClient, fetch_ahead, parse_link_header, redact_url
from connectors.options import ProviderKeys, SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.parsing import ParsedEvent
from connectors.provider import ClientFactory, Provider, headers_named, kept, scheme
from connectors.providers.github.samples import GITHUB as SAMPLES
from connectors.providers.github.signature import github_sign, parse_github, verify_github

DEFAULT_BASE_URL = "https://api.github.com"
PAGE_SIZE = 100
HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


def _iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)  # Python 3.11 reads the trailing "Z"
    except ValueError:
        return None


def delivery_record(item: Mapping[str, Any], delivered_at: datetime | None = None) -> Record:
    event, action = item.get("event"), item.get("action")
    if delivered_at is None:
        delivered_at = _iso(item.get("delivered_at"))
    return Record(
        event_id=str(item["guid"]),
        event_type=f"{event}.{action}" if event and action else event,
        object_type=event,
        object_id=str(item["repository_id"]) if item.get("repository_id") is not None else None,
        occurred_at=delivered_at,
        object_version=None,
        payload=item,
        attempts=(
            DeliveryAttempt(
                attempt_id=str(item["id"]),
                delivered_at=delivered_at,
                status=item.get("status"),
                status_code=item.get("status_code"),
                redelivery=bool(item.get("redelivery")),
            ),
        ),
    )


def app_jwt(app_id: int, private_key: str, now: float | None = None) -> str:
    """GitHub's app JWT: iat 60 s in the past (clock drift), exp 9 minutes later (10 at most)."""
    # Imported here: PyJWT and cryptography add memory and start-up time that only a GitHub App
    # source needs (the reconciler's memory goal counts every module it loads).
    import jwt

    now = time.time() if now is None else now
    return jwt.encode(
        {"iat": int(now) - 60, "exp": int(now) + 540, "iss": str(app_id)},
        private_key,
        algorithm="RS256",
    )


class GitHubConnector:
    # a GUID is looked up in the hook's delivery list, which records every attempt
    capabilities = Capabilities(delivery_log=True, confirms_event_ids=True)
    listing = Listing()

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        deliveries_path: str,
        retention: timedelta,
        app: tuple[int, str] | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.source = source
        self.client = client
        self.path = deliveries_path
        self._retention = retention
        self._app = app
        self._jwt_at = 0.0
        self.page_size = min(max(page_size, 1), 100)
        self.permission = (
            "a GitHub App JWT (installation tokens are refused)"
            if app
            else "admin access to the hook (repository or organization 'Webhooks: read' permission)"
        )

    @property
    def retention(self) -> timedelta:
        return self._retention

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _authorize(self) -> None:
        if self._app and time.time() - self._jwt_at > 300:
            app_id, key = self._app
            self.client.set_header("Authorization", f"Bearer {app_jwt(app_id, key)}")
            self._jwt_at = time.time()

    def _get_page(
        self, url: str, params: Any = None
    ) -> tuple[list[Mapping[str, Any]], str | None, str]:
        body, response = self._get_list(url, params)
        following = parse_link_header(response.headers.get("link")).get("next")
        return body, following, str(response.request.url)

    def _get_list(self, url: str, params: Any = None) -> tuple[list[Mapping[str, Any]], Any]:
        """One page of deliveries, checked item by item, and its response."""
        self._authorize()
        body, response = self.client.get_json(url, params=params, permission=self.permission)
        request_url = str(response.request.url)
        if not isinstance(body, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(request_url)} did not return a list of deliveries"
            )
        for i, item in enumerate(body):
            if (
                not isinstance(item, Mapping)
                or not item.get("guid")
                or not isinstance(item.get("id"), int)
            ):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(request_url)} item {i} has no guid or id"
                )
        return body, response

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        position = {} if options.full else dict(cursor or {})
        stop_at: int | None = position.get("stop_at")
        floor = (
            options.now - min(options.initial_lookback, self._retention)
            if stop_at is None
            else None
        )
        # a first look-back longer than GitHub keeps deliveries: what lies beyond is reported
        gap = (
            beyond_retention(
                options.now - options.initial_lookback, options.now, self._retention, "GitHub"
            )
            if stop_at is None and not position.get("next")
            else None
        )
        top: int | None = position.get("top")
        url: str = position.get("next") or self.path
        params = None if position.get("next") else {"per_page": self.page_size}

        def past_stop(item: Any) -> bool:
            if not isinstance(item, Mapping) or not isinstance(item.get("id"), int):
                return True  # malformed: reported below, not fetched past
            if stop_at is not None and item["id"] <= stop_at:
                return True
            delivered = _iso(item.get("delivered_at"))
            return floor is not None and delivered is not None and delivered < floor

        def older(fetched: tuple[list[Any], str | None, str]) -> Any:
            items, next_url, _ = fetched
            # Newest first: if even the oldest item on this page is new, the next page is needed.
            return (next_url, None) if next_url and items and not past_stop(items[-1]) else None

        def shape(request: Any, fetched: tuple[list[Any], str | None, str]) -> PageShape:
            items, next_url, request_url = fetched
            ids = [item["id"] for item in items]
            more = bool(next_url) and not (items and past_stop(items[-1]))
            return PageShape(ids, more, (next_url, None), redact_url(request_url))

        guard = PageGuard(self.source, shape, sleep=self.client.pause)

        def fetch(request: tuple[str, Any]) -> tuple[list[Any], str | None, str]:
            return guard.fetch(lambda r: self._get_page(*r), request)

        with closing(fetch_ahead(fetch, (url, params), older)) as fetched:
            for items, next_url, request_url in fetched:
                reached = False
                records = []
                for item in items:  # validated by _get_page
                    if past_stop(item):
                        reached = True
                        break
                    if top is None:
                        top = item["id"]
                    records.append(delivery_record(item))
                done = reached or not next_url  # items with a next link: checked by the guard
                if done:
                    new_top = top if top is not None else stop_at
                    page_cursor: dict[str, Any] = (
                        {"stop_at": new_top} if new_top is not None else {}
                    )
                else:
                    page_cursor = {"stop_at": stop_at, "top": top, "next": next_url}
                yield Page(
                    tuple(records), page_cursor, done=done, gap=gap, url=redact_url(request_url)
                )
                gap = None
                if done:
                    return

    def _attempt_id(self, event_id: str) -> int:
        """A delivery attempt id, given one or a GUID (then the newest attempt of that GUID)."""
        if event_id.isdigit():
            return int(event_id)
        url: str | None = self.path
        params: Any = {"per_page": self.page_size}
        while url:
            items, url, _ = self._get_page(url, params)
            params = None
            for item in items:
                if (
                    isinstance(item, Mapping)
                    and item.get("guid") == event_id
                    and isinstance(item.get("id"), int)
                ):
                    return int(item["id"])
        raise NotFoundError(
            f"source '{self.source}': no delivery with guid {event_id} within GitHub's retention"
        )

    def fetch_event(self, event_id: str) -> Record:
        attempt = self._attempt_id(event_id)
        self._authorize()
        body, response = self.client.get_json(f"{self.path}/{attempt}", permission=self.permission)
        if not isinstance(body, Mapping) or "guid" not in body or "id" not in body:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(str(response.request.url))} has no guid"
            )
        return delivery_record(body)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        """The delivered payload of a delivery attempt (``object_type`` ``delivery``)."""
        record = self.fetch_event(object_id)
        request = record.payload.get("request")
        return dict(request.get("payload") or {}) if isinstance(request, Mapping) else {}

    def check_access(self) -> Access:
        body, response = self._get_list(self.path, {"per_page": 1})
        detail = "lists the hook's deliveries" + ("" if body else " (none within retention)")
        # classic tokens say their scopes; fine-grained tokens and App JWTs do not
        scopes = response.headers.get("x-oauth-scopes")
        more = sorted({s.strip() for s in (scopes or "").split(",") if s.strip()} - HOOK_SCOPES)
        if not more:
            return Access(detail)
        return Access(
            detail,
            (
                f"the token also has the scopes {', '.join(more)}; reconciliation needs only "
                "admin:repo_hook (admin:org_hook for an organization's hook)",
            ),
        )

    def redeliver(self, event_id: str) -> None:
        attempt = self._attempt_id(event_id)
        self._authorize()
        self.client.request(
            "POST",
            f"{self.path}/{attempt}/attempts",
            permission=self.permission,
            expected=(200, 201, 202),
        )


# A classic token's scopes that read and redeliver a hook's deliveries (GitHub's OAuth scopes: the
# repo_hook ones cover public and private repositories' hooks)
HOOK_SCOPES = frozenset({"admin:repo_hook", "write:repo_hook", "read:repo_hook", "admin:org_hook"})


def deliveries_path(repository: str | None, organization: str | None, hook_id: int | None) -> str:
    if repository:
        return f"/repos/{repository}/hooks/{hook_id}/deliveries"
    if organization:
        return f"/orgs/{organization}/hooks/{hook_id}/deliveries"
    return "/app/hook/deliveries"


def default_retention(base_url: str) -> timedelta:
    """3 days on github.com, 7 on Enterprise Server (data/variables/webhooks.yml)."""
    return timedelta(days=3 if urlsplit(base_url).hostname == "api.github.com" else 7)


class GitHubKeys(ProviderKeys):
    repository: str | None = Field(default=None, pattern=r"^[\w.-]+/[\w.-]+$")  # owner/name
    organization: str | None = None
    hook_id: int | None = None
    app_id: int | None = None
    private_key_env: str | None = None  # the App's private key (PEM), for its JWT


def _build(options: SourceOptions, client: ClientFactory) -> GitHubConnector:
    keys = options.own(GitHubKeys)
    base = options.base_url or DEFAULT_BASE_URL
    hint = options.hint()
    if keys.app_id is not None:
        if not options.private_key:
            raise ConfigError(f"source '{options.name}': no private_key_env is configured")
        app: tuple[int, str] | None = (keys.app_id, options.private_key)
        headers = dict(HEADERS)
        hint = f"the app id and the private key in ${keys.private_key_env}"
    elif keys.repository or keys.organization:
        app = None
        headers = {**HEADERS, "Authorization": f"Bearer {options.require_api_key()}"}
    else:
        raise ConfigError(
            f"source '{options.name}': a GitHub connector needs 'repository' or 'organization' with 'hook_id', or 'app_id'"
        )
    retention = default_retention(base)
    if options.retention_days:
        retention = timedelta(days=options.retention_days)
    return GitHubConnector(
        options.name,
        client(base, headers, hint),
        deliveries_path=deliveries_path(keys.repository, keys.organization, keys.hook_id),
        retention=retention,
        app=app,
        page_size=options.page_size or PAGE_SIZE,
    )


def _as_delivery(record: Record) -> tuple[ParsedEvent, bytes]:
    """A delivery as GitHub recorded it: its request's payload and headers."""
    request = record.payload.get("request")
    request = request if isinstance(request, dict) else {}
    body = json.dumps(request.get("payload") or {}).encode()
    headers = {k.lower(): str(v) for k, v in (request.get("headers") or {}).items()}
    headers.setdefault("x-github-delivery", str(record.event_id))
    headers.setdefault("x-github-event", str(record.object_type or ""))
    return parse_github(headers, body), body


def _validate(values: Mapping[str, Any]) -> str | None:
    scopes = [
        bool(values.get("repository")),
        bool(values.get("organization")),
        values.get("app_id") is not None,
    ]
    if sum(scopes) > 1:
        return "set only one of 'repository', 'organization' or 'app_id'"
    if (values.get("repository") or values.get("organization")) and values.get("hook_id") is None:
        return "'repository' and 'organization' need key 'hook_id'"
    if values.get("app_id") is not None and not values.get("private_key_env"):
        return "'app_id' needs key 'private_key_env'"
    return None


def _sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return {
        "content-type": headers.get("content-type") or "application/json",
        **kept(headers, "x-github-event", "x-github-delivery", "x-github-hook-id"),
        "x-hub-signature-256": github_sign(body, secret),
    }


PROVIDER = Provider(
    "github",
    samples=SAMPLES,
    verify=scheme(verify_github, parse_github),
    build=_build,
    keys=GitHubKeys,
    validate=_validate,
    as_delivery=_as_delivery,
    sign=_sign,
    # 5,000 requests an hour (the x-ratelimit-* headers then cap the rate to what is left above a
    # reserve); at most a few in flight, as its secondary limits ask
    budget=BudgetSettings(rate=10.0, concurrency=4),
    sensitive_headers=headers_named("X-Hub-Signature", "X-Hub-Signature-256"),
)
