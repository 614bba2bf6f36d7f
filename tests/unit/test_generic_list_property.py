"""The generic list cannot stop early (issue 48): over generated list APIs (five ways to the next
page, with or without a has_more/done flag, page sizes the server caps below what is asked,
empty and short pages, exact multiples) and a source configured right or wrong, no run reads less
than the whole list and says it succeeded: it reads every item, or fails naming cursor_style.
The APIs answer through httpx.MockTransport: paging is logic, no socket is needed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.base import ScanOptions
from connectors.budget import BudgetSettings
from connectors.errors import ConnectorError
from connectors.options import SourceOptions
from connectors.providers.generic import GenericSenderKeys
from connectors.registry import build_connector

STYLES = ("link", "next_url", "body", "last_item", "offset")
BASE = "https://api.example.com"
# the query parameter each API reads its position from
PARAM = {
    "link": "page",
    "next_url": "page",
    "body": "iterator",
    "last_item": "after",
    "offset": "offset",
}


@dataclass(frozen=True)
class Api:
    items: int  # how many events it lists
    cap: int  # the most it returns a page, whatever is asked
    style: str
    flag: str  # "none", "more" (has_more), "done"

    def answer(self, request: httpx.Request) -> httpx.Response:
        query = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        size = min(int(query.get("limit", "10")), self.cap)
        ids = [f"ev_{i:03d}" for i in range(self.items)]
        start = 0
        given = query.get(PARAM[self.style])
        if given is not None:
            start = ids.index(given) + 1 if self.style == "last_item" and given in ids else 0
            if self.style != "last_item":
                start = int(given) if given.isdigit() else 0
        page = ids[start : start + size]
        more = start + size < len(ids)
        body: dict[str, Any] = {"data": [{"id": i, "type": "t"} for i in page]}
        headers = {"content-type": "application/json"}
        onward = urlencode({"limit": size, "page": start + size})
        if self.style == "link" and more:
            headers["link"] = f'<{BASE}/events?{onward}>; rel="next"'
        if self.style == "next_url":
            body["meta"] = {"next": f"{BASE}/events?{onward}" if more else None}
        if self.style == "body":
            body["iterator"] = str(start + size) if more else None
        if self.flag == "more":
            body["has_more"] = more
        if self.flag == "done":
            body["done"] = not more
        return httpx.Response(200, content=json.dumps(body).encode(), headers=headers)


def _keys(style: str, flag: str, api: Api) -> GenericSenderKeys:
    keys: dict[str, Any] = {
        "signature_header": "X-S",
        "id_json_path": "id",
        "list_url": "/events",
        "items_path": "data",
        "cursor_style": style,
        "cursor_param": PARAM[style],
    }
    if style == "next_url":
        keys["next_url_path"] = "meta.next"
    if style == "body":
        keys["cursor_path"] = "iterator"
    if flag == "more":
        keys["more_path"] = "has_more"
    if flag == "done":
        keys["done_path"] = "done"
    return GenericSenderKeys.model_validate(keys)


def _read(api: Api, style: str, flag: str, page_size: int) -> list[str]:
    options = SourceOptions(
        name="g",
        kind="generic",
        keys=_keys(style, flag, api),
        base_url=BASE,
        page_size=page_size,
        budget=BudgetSettings(rate=None, concurrency=1),  # no client-side pacing: no waits
    )
    connector = build_connector(
        options, transport=httpx.MockTransport(api.answer), sleep=lambda s: None
    )
    read: list[str] = []
    for n, page in enumerate(connector.pages(None, ScanOptions(now=datetime.now(UTC)))):
        assert n < 300, "a run that never ends"
        read += [str(r.event_id) for r in page.records]
    return read


@settings(max_examples=1000, deadline=None, database=None)
@given(
    items=st.integers(0, 45),
    cap=st.integers(1, 12),
    page_size=st.integers(1, 12),
    api_style=st.sampled_from(STYLES),
    api_flag=st.sampled_from(("none", "more", "done")),
    configured_style=st.sampled_from(STYLES),
    configured_flag=st.sampled_from(("none", "more", "done")),
)
def test_no_run_succeeds_over_an_unread_page(
    items: int,
    cap: int,
    page_size: int,
    api_style: str,
    api_flag: str,
    configured_style: str,
    configured_flag: str,
) -> None:
    if configured_style != api_style:
        # a server that returns fewer than asked and shows no way on cannot be told from the
        # list's end: a source's page_size stays within its API's maximum (docs/providers/generic.md)
        cap = max(cap, page_size)
    api = Api(items, cap, api_style, api_flag)
    everything = [f"ev_{i:03d}" for i in range(items)]
    right = configured_style == api_style and configured_flag == api_flag
    try:
        read = _read(api, configured_style, configured_flag, page_size)
    except ConnectorError as exc:
        assert "\n" not in str(exc)
        # a source configured as its API is never refused when the API says where the list ends
        assert not (right and api_flag != "none"), str(exc)
        return
    assert set(read) == set(everything), (api, configured_style, configured_flag, read)


@pytest.mark.parametrize("style", STYLES)
def test_a_right_configuration_reads_a_list_the_server_pages_shorter_than_asked(
    style: str,
) -> None:
    api = Api(items=37, cap=5, style=style, flag="more")
    assert _read(api, style, "more", page_size=10) == [f"ev_{i:03d}" for i in range(37)]


def test_paddle_configured_as_link_fails_naming_cursor_style_not_succeeds() -> None:
    """The run issue 48 found: Paddle's next page is a URL in the body, the source said 'link'."""
    api = Api(items=30, cap=10, style="next_url", flag="more")
    with pytest.raises(ConnectorError, match=r"says more pages follow .*cursor_style 'link'"):
        _read(api, "link", "more", page_size=10)
    with pytest.raises(ConnectorError, match=r"full page .*cursor_style 'link'"):
        _read(api, "link", "none", page_size=10)
