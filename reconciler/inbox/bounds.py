"""What a delivery may store, checked before it joins a group-commit batch (pure).

A value the database would refuse (a NUL byte, more characters than the column holds) must be
refused for that request alone, with a 400 naming the value, before it can make PostgreSQL abort
the transaction that also holds other requests' events. The limits are the columns' own lengths.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from sqlalchemy import String

from connectors.parsing import ParsedEvent
from reconciler.logs import escape_control
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS


def _length(column: str, table: object = INBOX_EVENTS) -> int:
    type_ = table.c[column].type  # type: ignore[attr-defined]
    assert isinstance(type_, String) and type_.length is not None
    return int(type_.length)


# (what the reason calls it, the ParsedEvent attribute, the column's length)
_PARSED_FIELDS = (
    ("event id", "event_id", _length("event_id")),
    ("delivery id", "delivery_id", _length("delivery_id", DELIVERIES)),
    ("event type", "event_type", _length("event_type")),
    ("object type", "object_type", _length("object_type")),
    ("object id", "object_id", _length("object_id")),
    ("API version", "api_version", _length("api_version")),
    ("account", "account", _length("account")),
)
CONTENT_TYPE_LENGTH = _length("content_type")
SOURCE_LENGTH = _length("source", DELIVERIES)
ID_LENGTH = _length("event_id", DELIVERIES)
REASON_LENGTH = _length("reason", DELIVERIES)
REMOTE_LENGTH = _length("remote_addr", DELIVERIES)
# Shown in a reason: enough to recognise the value, never the whole of a long one.
SHOWN = 40


def _shown(value: str) -> str:
    return escape_control(value, SHOWN)


_ID_CONTROL = re.compile("[\x00-\x1f\x7f]")
# A lone surrogate (a JSON "\\ud800" escape) is text no database driver can encode.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Identifiers an operator reads and types: no format characters (category Cf: bidirectional
# overrides, zero-width spaces), which make an id display as another id.
_NO_FORMAT = ("event_id", "delivery_id", "event_type", "object_type", "object_id")


def _control(value: str) -> str | None:
    """The first control character of an identifier, escaped; None when there is none."""
    found = _ID_CONTROL.search(value)
    return escape_control(found.group()) if found else None


def _format_char(value: str) -> str | None:
    """The first Unicode format character (category Cf) of a value, as U+XXXX; None if none."""
    if value.isascii():
        return None
    for char in value:
        if unicodedata.category(char) == "Cf":
            return f"U+{ord(char):04X}"
    return None


def event_problem(
    parsed: ParsedEvent, headers: Mapping[str, str], content_type: str | None
) -> str | None:
    """Why this verified delivery cannot be stored as it is, or None when it can."""
    for label, attribute, limit in _PARSED_FIELDS:
        value = getattr(parsed, attribute)
        if value is None:
            continue
        if "\x00" in value:
            return f"{label} '{_shown(value)}' contains a NUL byte"
        if found := _SURROGATE.search(value):
            return f"{label} '{_shown(value)}' contains a lone surrogate ({_shown(found.group())})"
        if attribute in ("event_id", "delivery_id") and (char := _control(value)):
            return f"{label} '{_shown(value)}' contains a control character ({char})"
        if attribute in _NO_FORMAT and (char := _format_char(value)):
            return f"{label} '{_shown(value)}' contains a Unicode format character ({char})"
        if len(value) > limit:
            return f"{label} '{_shown(value)}' is longer than {limit} characters"
    if content_type is not None:
        if "\x00" in content_type:
            return "header Content-Type contains a NUL byte"
        if len(content_type) > CONTENT_TYPE_LENGTH:
            return f"header Content-Type is longer than {CONTENT_TYPE_LENGTH} characters"
    for name, value in headers.items():
        if "\x00" in name or "\x00" in value:
            return f"header {_shown(name)} contains a NUL byte"
    return None


def rejected_row_values(
    source: str, reason: str, event_id: str | None, delivery_id: str | None, remote: str | None
) -> dict[str, str | None]:
    """A rejection's stranger-chosen values as they are stored: escaped and cut to their columns."""
    return {
        "source": escape_control(source, SOURCE_LENGTH),
        "reason": escape_control(reason, REASON_LENGTH),
        "event_id": None if event_id is None else escape_control(event_id, ID_LENGTH),
        "delivery_id": None if delivery_id is None else escape_control(delivery_id, ID_LENGTH),
        "remote_addr": None if remote is None else escape_control(remote, REMOTE_LENGTH),
    }
