"""The link kept across sign-in is hostile input: only a same-origin path to one of the app's pages,
with its query, is followed; anything else lands on the Overview (``dashboard.signin.return_link``)."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode, urlsplit

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dashboard.signin import HOME, MAX_LINK_CHARS, Link, return_link

PAGES = ("", "events", "discrepancies", "dead_letters", "outbox", "runs", "issues")
SAFE = re.compile(
    r"/(|events|discrepancies|dead_letters|outbox|runs|issues)(\?[A-Za-z0-9_.~+%=&-]*)?"
)

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
pairs = st.lists(st.tuples(texts, texts), max_size=6)


def stored(link: str) -> str:
    """The cookie as the page writes it: ``encodeURIComponent(location.pathname + location.search)``."""
    return quote(link, safe="-_.!~*'()")


@given(page=st.sampled_from(PAGES), query=pairs)
@example(page="events", query=[("source", "stripe"), ("event_id", "evt_2")])
@example(page="discrepancies", query=[("id", "94")])
@example(page="", query=[])
def test_a_link_to_one_of_the_pages_comes_back_with_its_query(
    page: str, query: list[tuple[str, str]]
) -> None:
    tail = f"?{urlencode(query)}" if query else ""
    assert return_link(stored(f"/{page}{tail}"), PAGES) == Link(page, tuple(query))


@given(raw=st.text(max_size=300))
@example(raw="/events?source=stripe&event_id=evt_2")
@example(raw="/%2F%2Fevil.example/events")
@example(raw="%2F%2Fevil.example%2Fevents")
def test_whatever_is_stored_the_result_is_a_relative_link_to_a_page(raw: str) -> None:
    for value in (raw, stored(raw)):
        link = return_link(value, PAGES)
        text = str(link)
        assert SAFE.fullmatch(text), text
        parts = urlsplit(text)
        assert not parts.scheme and not parts.netloc
        assert return_link(stored(text), PAGES) == link  # what is followed is what was checked


HOSTILE_PREFIXES = [
    "http://evil.example",
    "https://evil.example/events",
    "HTTPS://evil.example",
    "//evil.example",
    "///evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "javascript:alert(1)//",
    "JavaScript:alert(1)//",
    "data:text/html,",
    " /events",
    "\t/events",
    "events",
    "?id=1",
    "#/events",
    "/events#",
    "/events/",
    "/Events",
    "/events/../outbox",
    "/./events",
    "/%65vents",
    "/oauth2callback",
    "/auth/login",
    "/_stcore/health",
]


@given(prefix=st.sampled_from(HOSTILE_PREFIXES), rest=st.text(max_size=40))
def test_anything_else_lands_on_the_overview(prefix: str, rest: str) -> None:
    assert return_link(stored(prefix + rest), PAGES) == HOME
    if "%" not in prefix:  # the cookie is decoded once: "/%65vents" there is "/events"
        assert return_link(prefix + rest, PAGES) == HOME


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "%",
        "%ff%fe",  # not UTF-8
        "/events?" + "a=1&" * 101,  # more fields than a page has
        "/events?id=" + "9" * MAX_LINK_CHARS,
        "/events?id=1\n",
        "/events?id=<script>",
        "/events?id=1 2",
    ],
)
def test_odd_values_land_on_the_overview(raw: str | None) -> None:
    assert return_link(raw, PAGES) == HOME


def test_only_the_pages_given_are_followed() -> None:
    assert return_link("/events?x=1", ("", "runs")) == HOME
    assert return_link("/runs?x=1", ("", "runs")) == Link("runs", (("x", "1"),))
