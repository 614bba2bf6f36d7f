"""Any JSON list API, configured in ``config.toml`` (Svix's ``/api/v1/app/{app}/msg``, Paddle's
``/events`` and the like): the list connector of the ``generic`` kind and of Standard Webhooks
senders (``standard``) that have one.

Keys: ``list_url`` (relative to ``base_url``), ``items_path``, ``id_path``, ``type_path``,
``time_path``, ``object_id_path`` (dotted paths), ``page_size`` with ``limit_param``, and one
``cursor_style``, the way to the next page:

- ``link``: follow the ``Link: rel="next"`` URL;
- ``next_url``: follow the URL at ``next_url_path`` in the body (Paddle's ``meta.pagination.next``);
- ``body``: the next cursor is at ``cursor_path`` in the body, sent back as ``cursor_param``. The
  last cursor is kept, so the next run asks only for what came after it;
- ``last_item``: ``cursor_param`` = the last item's ``cursor_item_path`` (its id unless set): Stripe's
  ``starting_after``, Paddle's ``after``;
- ``since``: ``since_param`` = the newest ``time_path`` value seen; the page's boundary items are
  not judged again next time (``Page.relisted``: still seen, inside the scan's orphan window);
- ``offset``: ``cursor_param`` = how many items were read.

A flag may say whether more pages follow: ``more_path`` (true while there are: ``has_more``) or
``done_path`` (true on the last page). Without one, the list ends at a page that gives no way on
(or an empty one: a server may cap the page size, so a short page is no end). A page as full as the
page size that gives no way on, with no flag saying it is the last, fails the run rather than call
an unread list read (``last_page_may_be_full = true`` where the API ends lists that way).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urljoin

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.errors import ConfigError, MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, parse_link_header, redact_url
from connectors.options import ProviderKeys, SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.parsing import json_path_get
from connectors.provider import ClientFactory


def _time(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


class GenericConnector:
    capabilities = Capabilities()  # an arbitrary API's GET by id may not exist
    listing = Listing()

    def __init__(self, source: SourceOptions, client: ProviderClient) -> None:
        cfg = source.own(ListKeys)
        if not cfg.list_url:
            raise MalformedResponseError(
                f"source '{source.name}': a generic connector needs key 'list_url'"
            )
        self.source = source.name
        self.cfg = cfg
        self.retention_days = source.retention_days
        self.client = client
        self.list_url = cfg.list_url
        self.page_size = source.page_size or 100

    @property
    def retention(self) -> timedelta | None:
        return timedelta(days=self.retention_days) if self.retention_days else None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _record(self, item: Any, url: str, index: int) -> Record:
        event_id = json_path_get(item, self.cfg.id_path)
        if event_id is None or isinstance(event_id, dict | list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} item {index} has no '{self.cfg.id_path}'"
            )
        occurred = _time(json_path_get(item, self.cfg.time_path)) if self.cfg.time_path else None
        event_type = json_path_get(item, self.cfg.type_path) if self.cfg.type_path else None
        object_id = (
            json_path_get(item, self.cfg.object_id_path) if self.cfg.object_id_path else None
        )
        return Record(
            event_id=str(event_id),
            event_type=str(event_type) if event_type is not None else None,
            object_type=None,
            object_id=str(object_id) if object_id is not None else None,
            occurred_at=occurred,
            object_version=None,
            payload=item if isinstance(item, Mapping) else {"value": item},
        )

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        cfg = self.cfg
        position: dict[str, Any] = {} if options.full else dict(cursor or {})
        url: str = (
            position.get("next") if cfg.cursor_style in ("link", "next_url") else None
        ) or self.list_url
        params: dict[str, Any] = {cfg.limit_param: self.page_size}
        seen_at_boundary = set(position.get("boundary_ids", []))
        if cfg.cursor_style == "body" and position.get("cursor"):
            params[cfg.cursor_param] = position["cursor"]
        elif cfg.cursor_style == "last_item" and position.get("after"):
            params[cfg.cursor_param] = position["after"]
        elif cfg.cursor_style == "since":
            stored = _time(position.get("since"))
            start = stored - options.overlap if stored else options.now - options.initial_lookback
            params[cfg.since_param] = start.isoformat()
        elif cfg.cursor_style == "offset":
            params[cfg.cursor_param] = int(position.get("offset", 0))
        if position.get("next") and cfg.cursor_style in ("link", "next_url"):
            params = {}

        def read(response_pair: tuple[Any, Any]) -> tuple[list[Record], bool, dict[str, Any]]:
            body, response = response_pair
            request_url = str(response.request.url)
            items = json_path_get(body, cfg.items_path) if cfg.items_path else body
            if not isinstance(items, list):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(request_url)} has no list at '{cfg.items_path}'"
                )
            records = [self._record(item, request_url, i) for i, item in enumerate(items)]
            done, new_position = self._advance(
                body, response, records, position, params, seen_at_boundary
            )
            return records, done, new_position

        last: list[Any] = [None, None]  # the page the guard judged, and what it read of it

        def shape(request: tuple[str, dict[str, Any]], response_pair: tuple[Any, Any]) -> PageShape:
            last[:] = [response_pair, read(response_pair)]
            records, done, new_position = last[1]
            following = None if done else self._next_request(request[0], new_position)
            url = redact_url(str(response_pair[1].request.url))
            return PageShape([r.event_id for r in records], not done, following, url)

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        request = (url, params)
        while True:
            response_pair = guard.fetch(
                lambda r: self.client.get_json(r[0], params=r[1] or None), request
            )
            records, done, new_position = (
                last[1] if last[0] is response_pair else read(response_pair)
            )
            request_url = str(response_pair[1].request.url)
            relisted: list[Record] = []
            if cfg.cursor_style == "since":  # the boundary's items were judged the page before
                relisted = [r for r in records if r.event_id in seen_at_boundary]
                records = [r for r in records if r.event_id not in seen_at_boundary]
                seen_at_boundary = set(new_position.get("boundary_ids", []))
            yield Page(
                tuple(records),
                new_position,
                done=done,
                url=redact_url(request_url),
                relisted=tuple(relisted),
            )
            if done:
                return
            position = new_position
            request = self._next_request(request[0], position)
            params = request[1]

    def check_access(self) -> Access:
        body, response = self.client.get_json(self.list_url, params={self.cfg.limit_param: 1})
        url = str(response.request.url)
        items = json_path_get(body, self.cfg.items_path) if self.cfg.items_path else body
        if not isinstance(items, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} has no list at '{self.cfg.items_path}'"
            )
        for i, item in enumerate(items):  # the configured paths read what it lists
            self._record(item, url, i)
        return Access(f"lists {len(items)} item(s) at {redact_url(url)}")

    def _next_request(self, url: str, position: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The request for the page after ``position``."""
        cfg = self.cfg
        if cfg.cursor_style in ("link", "next_url"):
            return position["next"], {}
        if cfg.cursor_style == "last_item":
            return url, {cfg.limit_param: self.page_size, cfg.cursor_param: position["after"]}
        if cfg.cursor_style == "body":
            return url, {cfg.limit_param: self.page_size, cfg.cursor_param: position["cursor"]}
        if cfg.cursor_style == "since":
            return url, {cfg.limit_param: self.page_size, cfg.since_param: position["since"]}
        return url, {cfg.limit_param: self.page_size, cfg.cursor_param: position["offset"]}

    def _advance(
        self,
        body: Any,
        response: Any,
        records: list[Record],
        position: dict[str, Any],
        params: dict[str, Any],
        boundary: set[str],
    ) -> tuple[bool, dict[str, Any]]:
        """Whether the list is through after this page, and the position to keep: the way on the
        style gives, read against what the page says of itself (``more_path``/``done_path``)."""
        cfg = self.cfg
        if cfg.cursor_style == "since":
            return self._since(records, position, boundary)
        onward, keep = self._onward(body, response, records, position)
        flag = self._more(body)
        if flag is True and onward is None:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(str(response.request.url))} says more pages "
                f"follow ({cfg.more_path or cfg.done_path}) but gives no way to them "
                f"(cursor_style '{cfg.cursor_style}'{self._expects()})"
            )
        # an empty page ends a cursor list (Svix's last iterator); a Link or URL onward from an
        # empty page is the page guard's to judge (connectors.paging)
        ended = flag is None and not records and cfg.cursor_style == "body"
        if flag is False or onward is None or ended:
            full = len(records) >= self.page_size
            if flag is None and onward is None and full and not cfg.last_page_may_be_full:
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(str(response.request.url))} is a full "
                    f"page ({len(records)} items) that gives no way to the next (cursor_style "
                    f"'{cfg.cursor_style}'{self._expects()}) and does not say it is the last: "
                    "check cursor_style and its keys (docs/providers/generic.md), or set "
                    "last_page_may_be_full = true if the API ends its lists so"
                )
            return True, keep
        return False, onward

    def _expects(self) -> str:
        cfg = self.cfg
        return {
            "link": ": a Link rel=next header",
            "next_url": f": a URL at '{cfg.next_url_path}'",
            "body": f": a cursor at '{cfg.cursor_path}'",
        }.get(cfg.cursor_style, "")

    def _more(self, body: Any) -> bool | None:
        """What the page says: True, more pages follow; False, it is the last; None: not said."""
        cfg = self.cfg
        path, more = (cfg.more_path, True) if cfg.more_path else (cfg.done_path, False)
        value = json_path_get(body, path) if path else None
        if not isinstance(value, bool):
            return None
        return value if more else not value

    def _onward(
        self, body: Any, response: Any, records: list[Record], position: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The position of the next page (None: this page gives no way on), and the position
        kept when the list is through."""
        cfg = self.cfg
        if cfg.cursor_style == "link":
            link = parse_link_header(response.headers.get("link")).get("next")
            return ({"next": link} if link else None), {}
        if cfg.cursor_style == "next_url":
            assert cfg.next_url_path is not None  # the rule requires it
            found = self._marker(body, cfg.next_url_path, response)
            if not isinstance(found, str) or not found:
                return None, {}
            return {"next": urljoin(str(response.request.url), found)}, {}
        if cfg.cursor_style == "body":
            assert cfg.cursor_path is not None
            token = self._marker(body, cfg.cursor_path, response)
            keep = token if token not in (None, "") else position.get("cursor")
            return (
                {"cursor": token} if token not in (None, "") else None,
                {"cursor": keep} if keep is not None else {},
            )
        if cfg.cursor_style == "last_item":
            if not records:
                return None, dict(position)
            path = cfg.cursor_item_path or cfg.id_path
            last = json_path_get(records[-1].payload, path)
            if last is None or isinstance(last, dict | list):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(str(response.request.url))} last item "
                    f"has no '{path}' to continue after"
                )
            return {"after": str(last)}, {"after": str(last)}
        offset = int(position.get("offset", 0)) + len(records)
        return ({"offset": offset} if records else None), {"offset": offset}

    def _marker(self, body: Any, path: str, response: Any) -> Any:
        """The way on at ``path``: its value (null on the last page), or a refusal when the page
        has no such key at all, which is a source configured for another API, not the end."""
        parent, _, leaf = path.rpartition(".")
        holder = json_path_get(body, parent) if parent else body
        if not isinstance(holder, Mapping) or leaf not in holder:
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(str(response.request.url))} has no "
                f"'{path}' (cursor_style '{self.cfg.cursor_style}'): check cursor_style and its "
                "keys (docs/providers/generic.md)"
            )
        return holder[leaf]

    def _since(
        self, records: list[Record], position: dict[str, Any], boundary: set[str]
    ) -> tuple[bool, dict[str, Any]]:
        times = [r.occurred_at for r in records if r.occurred_at is not None]
        if not times:
            return True, dict(position)
        newest = max(times)
        ids = [str(r.event_id) for r in records if r.occurred_at == newest]
        since = newest.isoformat()
        carried = list(boundary | set(ids)) if since == position.get("since") else ids
        fresh = [r for r in records if r.event_id not in boundary]
        return len(records) < self.page_size or not fresh, {"since": since, "boundary_ids": carried}

    def fetch_event(self, event_id: str) -> Record:
        body, response = self.client.get_json(f"{self.list_url.rstrip('/')}/{event_id}")
        return self._record(body, str(response.request.url), 0)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        raise UnsupportedError(
            f"source '{self.source}': the generic connector cannot fetch objects"
        )

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': the generic connector cannot ask for a redelivery"
        )


class ListKeys(ProviderKeys):
    """A JSON list API (the generic provider, and Standard Webhooks senders that have one)."""

    list_url: str | None = None
    items_path: str = "data"
    id_path: str = "id"
    type_path: str | None = None
    time_path: str | None = None
    object_id_path: str | None = None
    cursor_style: Literal["link", "next_url", "body", "last_item", "since", "offset"] = "link"
    cursor_param: str = "cursor"
    cursor_path: str | None = None
    next_url_path: str | None = None
    cursor_item_path: str | None = None
    done_path: str | None = None
    more_path: str | None = None
    last_page_may_be_full: bool = False
    since_param: str = "since"
    limit_param: str = "limit"


def _build(options: SourceOptions, client: ClientFactory) -> GenericConnector:
    if not options.base_url:
        raise ConfigError(f"source '{options.name}': a {options.kind} connector needs 'base_url'")
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    return GenericConnector(options, client(options.base_url, headers, options.hint()))


def _list_rule(values: Mapping[str, Any]) -> str | None:
    style = values.get("cursor_style")
    if style == "body" and not values.get("cursor_path"):
        return "cursor_style 'body' needs key 'cursor_path'"
    if style == "next_url" and not values.get("next_url_path"):
        return "cursor_style 'next_url' needs key 'next_url_path'"
    if values.get("done_path") and values.get("more_path"):
        return "keys 'done_path' and 'more_path' are two flags for one thing: keep one"
    return None
