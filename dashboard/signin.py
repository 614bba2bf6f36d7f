"""Signing in or out comes back to the link that was open.

Streamlit keeps no return address across the provider's round trip: its ``/oauth2callback`` and
``/auth/logout`` always redirect to the app's root (streamlit/web/server/starlette/
starlette_auth_routes.py, ``_redirect_to_base``), which opens the Overview. So the browser keeps
the link: clicking "Sign in" or "Sign out" stores the page's path and query in a short-lived cookie
(:func:`remember_on_click`), and the session that starts on the bare root after the round trip
reads it, goes to it and clears it (:func:`come_back`). Anyone can set a cookie, so the stored
link is hostile: :func:`return_link` (pure) follows only one of the app's own pages, rebuilt from
its parts; anything else lands on the Overview.
"""

from __future__ import annotations

import json
import string
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import streamlit as st
from streamlit.navigation.page import StreamlitPage

COOKIE = "hookledger_return"
# a round trip to the provider longer than this lands on the Overview
MAX_AGE_SECONDS = 600
# the sign-in and sign-out buttons' widget keys: Streamlit gives each the CSS class st-key-<key>
SIGN_IN_KEY = "hookledger_sign_in"
SIGN_OUT_KEY = "hookledger_sign_out"
# a link longer than this is not one the app wrote (browsers cap a cookie at 4 KiB)
MAX_LINK_CHARS = 2000
# what a path and query the browser sent may hold (it percent-encodes everything else)
_URL_CHARS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/?%[]")
# this session's state: "done", or "clear" while the cookie still has to be removed
_STATE = "_signin_return"


@dataclass(frozen=True)
class Link:
    """A link to one of the app's pages: its URL path without the slash ("" is the root)."""

    page: str
    query: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        tail = f"?{urlencode(self.query)}" if self.query else ""
        return f"/{self.page}{tail}"


HOME = Link("")


def return_link(stored: str | None, pages: Collection[str]) -> Link:
    """Where to go after signing in or out: the ``stored`` link (percent-encoded, as the cookie
    holds it) when it is a same-origin path to one of ``pages`` (URL paths, "" for the root) with
    an optional query, else :data:`HOME`. The query is re-encoded from its parsed pairs."""
    if not stored:
        return HOME
    try:
        link = unquote(stored, errors="strict")
    except UnicodeDecodeError:
        return HOME
    if (
        len(link) > MAX_LINK_CHARS
        or not link.startswith("/")
        or link.startswith("//")
        or not set(link) <= _URL_CHARS
    ):
        return HOME
    try:
        parts = urlsplit(link)
        query = tuple(parse_qsl(parts.query, keep_blank_values=True, max_num_fields=100))
    except ValueError:
        return HOME
    page = parts.path[1:]
    if parts.scheme or parts.netloc or parts.fragment or page not in pages:
        return HOME
    return Link(page, query)


def _script(js: str) -> None:
    # st.html is not iframed: its script runs in the app's own document (its cookies, its URL)
    st.sidebar.html(f"<script>{js}</script>", unsafe_allow_javascript=True)


def remember_on_click() -> None:
    """Store the address bar's path and query when the sign-in or sign-out button is clicked (a
    capture listener, so it runs before Streamlit's own handler starts the round trip)."""
    selector = json.dumps(f".st-key-{SIGN_IN_KEY}, .st-key-{SIGN_OUT_KEY}")
    _script(
        "if (!window.hookledgerReturn) {"
        " window.hookledgerReturn = true;"
        " document.addEventListener('click', (e) => {"
        f"  if (e.target instanceof Element && e.target.closest({selector})) {{"
        f"   document.cookie = '{COOKIE}=' + encodeURIComponent(location.pathname + location.search)"
        f"    + '; Path=/; Max-Age={MAX_AGE_SECONDS}; SameSite=Lax';"
        "  }"
        " }, true);"
        "}"
    )


def _forget() -> None:
    _script(f"document.cookie = '{COOKIE}=; Path=/; Max-Age=0; SameSite=Lax';")


def come_back(pages: Sequence[StreamlitPage], current: StreamlitPage) -> None:
    """On a session's first run: after a round trip (the cookie is there and the session opened the
    bare root, where Streamlit lands) go to the stored link, then clear the cookie. A session that
    opened a link of its own keeps it and clears the cookie too."""
    state = st.session_state.get(_STATE)
    if state == "clear":
        # the run after the switch: an element of the run that switched may never reach the browser
        st.session_state[_STATE] = "done"
        _forget()
    if state is not None:
        return
    st.session_state[_STATE] = "done"
    stored = st.context.cookies.get(COOKIE)
    if stored is None:
        return
    by_path = {p.url_path: p for p in pages}
    link = return_link(stored, by_path)
    if current.url_path or len(st.query_params) or link == HOME:
        _forget()
        return
    st.session_state[_STATE] = "clear"
    st.switch_page(by_path[link.page], query_params=list(link.query))
