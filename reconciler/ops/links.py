"""Links into the dashboard: a page and its state as a URL, the same one the page keeps in the
address bar, so the CLI, notifications and other pages can point at an event or a discrepancy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

Param = str | int | float | bool | datetime | None | Sequence[str]


def param_text(value: Param) -> str | list[str] | None:
    """A value as the URL holds it; None for one left out (None, empty text, empty list)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, str | int | float):
        return str(value)
    items = [str(v) for v in value]
    return items or None


def page_url(page: str, base: str = "", **params: Param) -> str:
    """``/events?source=stripe&event_id=evt_1`` (``base`` in front for an absolute link)."""
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        text = param_text(value)
        if isinstance(text, list):
            pairs.extend((name, t) for t in text)
        elif text is not None:
            pairs.append((name, text))
    query = urlencode(pairs)
    return f"{base.rstrip('/')}/{page}" + (f"?{query}" if query else "")


def event_url(source: str, event_id: str, base: str = "") -> str:
    return page_url("events", base, source=source, event_id=event_id)


def discrepancy_url(discrepancy_id: int, base: str = "") -> str:
    return page_url("discrepancies", base, id=discrepancy_id)


@dataclass(frozen=True)
class PageLink:
    """A page and its state: rendered as an in-app link by the dashboard, as a URL elsewhere."""

    page: str
    params: tuple[tuple[str, Param], ...] = ()

    def query(self) -> dict[str, str | list[str]]:
        return {k: t for k, v in self.params if (t := param_text(v)) is not None}

    def url(self, base: str = "") -> str:
        return page_url(self.page, base, **dict(self.params))


def to(page: str, **params: Param) -> PageLink:
    return PageLink(page, tuple(params.items()))
