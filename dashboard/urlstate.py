"""A page's state in its URL (``st.query_params``), so a link copied from the address bar reopens
the same view.

The URL is the state: a page first calls ``arrive``, which drops the page's session state whenever
the URL is not the one this page last wrote (a link was followed, the address bar or back/forward
changed it, another page was open). It then seeds each widget's state from the URL (``seed``),
creates the widget with that key and no default of its own, and writes the current values back
(``publish``), so a widget changed in place keeps its value and any navigation reads the URL.
Values from the URL are hostile: one that does not parse or is not among the choices is dropped
and the widget starts from its default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import streamlit as st

from reconciler.ops.links import Param, param_text

# (the page's key prefix, the URL's parameters) as this session last wrote or read them
_LAST = "_url_last"
# an in-app link changes the server's query parameters but not always the browser's address bar:
# the first publish after a navigation writes the URL even when it looks unchanged
_SEND = "_url_send"


def _current() -> dict[str, list[str]]:
    return {k: st.query_params.get_all(k) for k in st.query_params}


def arrive(prefix: str) -> bool:
    """Start a page whose session keys all begin with ``prefix``. True, with those keys dropped,
    when this is a navigation: the URL differs from what this page last published."""
    here = (prefix, _current())
    if st.session_state.get(_LAST) == here:
        return False
    for key in [k for k in st.session_state if str(k).startswith(prefix)]:
        del st.session_state[key]
    st.session_state[_LAST] = here
    st.session_state[_SEND] = True
    return True


def _first(param: str) -> str | None:
    raw = st.query_params.get_all(param)
    return raw[0] if raw else None


def seed(
    key: str,
    param: str,
    default: Any,
    *,
    parse: Callable[[str], Any] = str,
    choices: Sequence[Any] | None = None,
) -> None:
    """Put the URL's ``param`` (or ``default``) into the widget state ``key`` once."""
    if key in st.session_state:
        return
    st.session_state[key] = decode(_first(param), default, parse=parse, choices=choices)


def decode(
    raw: str | None,
    default: Any,
    *,
    parse: Callable[[str], Any] = str,
    choices: Sequence[Any] | None = None,
) -> Any:
    """A URL value as the widget's value: ``default`` when missing, unparsable or not a choice."""
    if raw is None:
        return default
    try:
        parsed = parse(raw)
    except (ValueError, TypeError, KeyError, OverflowError):
        return default
    if parsed is None or (choices is not None and parsed not in choices):
        return default
    return parsed


def seed_many(key: str, param: str, default: Sequence[str], choices: Sequence[str]) -> None:
    """The same for a multiselect: ``?source=a&source=b``; unknown values are dropped."""
    if key in st.session_state:
        return
    raw = [v for v in st.query_params.get_all(param) if v in choices]
    st.session_state[key] = raw if raw else list(default)


def parse_bool(raw: str) -> bool:
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ValueError(raw)


def parse_id(raw: str) -> int:
    """A row id: a positive integer that fits a BIGINT."""
    value = int(raw.strip())
    if not 0 < value < 2**63:
        raise ValueError(raw)
    return value


def parse_run_id(raw: str) -> str:
    """A run id as runs store them (a UUID's 36 characters at most: letters, digits, dashes)."""
    value = raw.strip()
    if not value or len(value) > 36 or not all(c.isalnum() or c == "-" for c in value):
        raise ValueError(raw)
    return value


def parse_time(raw: str) -> datetime:
    """An ISO 8601 time; without a zone it is UTC."""
    at = datetime.fromisoformat(raw)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def publish(values: Mapping[str, Param]) -> None:
    """Make the URL hold exactly these values (empty ones left out); unchanged URLs are not sent."""
    wanted = {k: t for k, v in values.items() if (t := param_text(v)) is not None}
    normal = {k: v if isinstance(v, list) else [v] for k, v in wanted.items()}
    if _current() != normal or st.session_state.pop(_SEND, False):
        st.query_params.from_dict(wanted)
    last = st.session_state.get(_LAST)
    if last is not None:
        st.session_state[_LAST] = (last[0], normal)
