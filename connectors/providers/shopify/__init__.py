"""Shopify: no API lists webhook deliveries, so reconcile resource state (docs/providers.md §3).

This module reads through the REST Admin API (``api = "rest"``); the default, GraphQL, is
``connectors.providers.shopify.graphql``.

``GET /admin/api/{version}/{resource}.json?status=any&updated_at_min=..&limit=250``, then the ``Link``
``rel="next"`` URL exactly as given (``page_info`` can't be combined with other filters), header
``X-Shopify-Access-Token``. Object version = ``updated_at``. Ids exceed 2^53: they are parsed as
Python ints and kept as strings from then on.

Cursor, per resource: ``since`` (the newest ``updated_at`` of the last complete scan) and, during a
scan, the next page's URL and the newest ``updated_at`` seen so far.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any, Literal

from connectors.base import Cursor, Page, Record, ScanOptions
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError
from connectors.http import ProviderClient, fetch_ahead, parse_link_header, redact_url, require
from connectors.options import ProviderKeys, SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.provider import ClientFactory, Provider, headers_named, kept, scheme
from connectors.providers.shopify.base import ShopifyBase, parse_delivery
from connectors.providers.shopify.graphql import ShopifyGraphQLConnector
from connectors.providers.shopify.samples import SHOPIFY as SAMPLES
from connectors.providers.shopify.signature import shopify_sign, verify_shopify

PAGE_SIZE = 250


def singular(resource: str) -> str:
    return resource[:-1] if resource.endswith("s") else resource


def _iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def resource_record(resource: str, item: Mapping[str, Any]) -> Record:
    updated = item.get("updated_at")
    return Record(
        event_id=None,
        event_type=None,
        object_type=singular(resource),
        object_id=str(item["id"]),
        occurred_at=_iso(updated),
        object_version=str(updated) if updated is not None else None,
        payload=item,
    )


class ShopifyConnector(ShopifyBase):
    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        api_version: str,
        resources: tuple[str, ...] = ("orders",),
        page_size: int = PAGE_SIZE,
    ) -> None:
        super().__init__(source, client, resources)
        self.api_version = api_version
        self.resources = resources
        self.page_size = min(max(page_size, 1), 250)

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        state: dict[str, Any] = (
            {} if options.full else {k: dict(v) for k, v in (cursor or {}).items()}
        )
        default_since = (options.now - options.initial_lookback).isoformat()
        for index, resource in enumerate(self.resources):
            last_resource = index == len(self.resources) - 1
            yield from self._resource_pages(
                resource, state, default_since, last_resource, options.overlap
            )

    def _get(self, resource: str, url: str, params: Any) -> tuple[Any, Any, str | None]:
        body, response = self.client.get_json(
            url, params=params, permission=f"the read_{resource} access scope"
        )
        return body, response, parse_link_header(response.headers.get("link")).get("next")

    def _resource_pages(
        self,
        resource: str,
        state: dict[str, Any],
        default_since: str,
        last_resource: bool,
        overlap: timedelta = timedelta(0),
    ) -> Iterator[Page]:
        pos = state.setdefault(resource, {})
        since = pos.get("since") or default_since
        stored = _iso(pos.get("since"))
        if stored is not None and not pos.get("next") and overlap:
            since = (stored - overlap).isoformat()  # re-read the boundary: updates may land late
        # the position never moves back: the overlap only widens what is read
        newest = pos.get("newest") or pos.get("since") or since
        if pos.get("next"):
            first: tuple[str, Any] = (pos["next"], None)
        else:
            params = {"status": "any", "updated_at_min": since, "limit": self.page_size}
            first = (f"/admin/api/{self.api_version}/{resource}.json", params)

        # the next URL is used exactly as given, fetched while this page is handed out
        def shape(request: Any, got: tuple[Any, Any, str | None]) -> PageShape:
            body, response, next_url = got
            url = str(response.request.url)
            items = require(body, resource, source=self.source, url=url, kind=list)
            ids = [item.get("id") if isinstance(item, Mapping) else None for item in items]
            return PageShape(ids, bool(next_url), (next_url, None), redact_url(url))

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        fetched = fetch_ahead(
            lambda a: guard.fetch(lambda r: self._get(resource, *r), a),
            first,
            lambda got: (got[2], None) if got[2] else None,
        )
        with closing(fetched):
            for body, response, next_url in fetched:
                request_url = str(response.request.url)
                items = require(body, resource, source=self.source, url=request_url, kind=list)
                records = []
                for i, item in enumerate(items):
                    require(item, "id", source=self.source, url=f"{request_url} (item {i})")
                    record = resource_record(resource, item)
                    records.append(record)
                    if record.object_version and (_iso(record.object_version) or datetime.min) > (
                        _iso(newest) or datetime.min
                    ):
                        newest = record.object_version
                state[resource] = (
                    {"since": since, "next": next_url, "newest": newest}
                    if next_url
                    else {"since": newest}
                )
                done = not next_url and last_resource
                yield Page(
                    tuple(records),
                    {k: dict(v) for k, v in state.items()},
                    done=done,
                    url=redact_url(request_url),
                )
                if not next_url:
                    return

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        resource = object_type + "s"
        body, response = self.client.get_json(
            f"/admin/api/{self.api_version}/{resource}/{object_id}.json",
            permission=f"the read_{resource} access scope",
        )
        return dict(
            require(body, object_type, source=self.source, url=str(response.request.url), kind=dict)
        )


class ShopifyKeys(ProviderKeys):
    api_version: str = "2025-01"
    resources: tuple[str, ...] = ("orders",)
    # GraphQL by default: Shopify calls REST legacy and requires GraphQL of new public apps
    api: Literal["graphql", "rest"] = "graphql"


def _build(
    options: SourceOptions, client: ClientFactory
) -> ShopifyConnector | ShopifyGraphQLConnector:
    if not options.base_url:
        raise ConfigError(
            f"source '{options.name}': a Shopify connector needs 'base_url' (https://{{shop}}.myshopify.com)"
        )
    keys = options.own(ShopifyKeys)
    connector = ShopifyGraphQLConnector if keys.api == "graphql" else ShopifyConnector
    return connector(
        options.name,
        client(
            options.base_url, {"X-Shopify-Access-Token": options.require_api_key()}, options.hint()
        ),
        api_version=keys.api_version,
        resources=keys.resources,
        page_size=options.page_size or PAGE_SIZE,
    )


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
        **kept(
            headers,
            "x-shopify-topic",
            "x-shopify-webhook-id",
            "x-shopify-event-id",
            "x-shopify-triggered-at",
            "x-shopify-shop-domain",
            "x-shopify-api-version",
        ),
        "x-shopify-hmac-sha256": shopify_sign(body, secret),
    }


PROVIDER = Provider(
    "shopify",
    samples=SAMPLES,
    verify=scheme(verify_shopify, parse_delivery),
    build=_build,
    keys=ShopifyKeys,
    sign=_sign,
    # the standard plan's bucket: 40 calls, leaking 2 a second; half of it may be spent at once
    budget=BudgetSettings(rate=2.0, concurrency=2, burst=20.0),
    sensitive_headers=headers_named("X-Shopify-Hmac-Sha256"),
)
