"""The fingerprint of an event's content, and how two contents of one event differ (pure).

Canonical JSON (sorted keys, no whitespace, UTF-8) of the payload minus the paths a provider changes
between deliveries of one event (Stripe's ``pending_webhooks`` count): two deliveries with one
fingerprint are the same event, two with different fingerprints are a conflict. A body that is not
JSON is fingerprinted as its bytes.

A path is dotted keys from the payload's root (``data.object.status``, an optional leading ``$.``),
``[N]`` for a list item and ``*`` (or ``[*]``) for every key or item at that level.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from connectors.parsing import decode_payload

MAX_PATH_LENGTH = 256
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+|\*)\]")
_ABSENT = object()


class PathError(ValueError):
    """A ``fingerprint_ignore`` path that cannot be read."""


Segment = str | int  # a key, a list index, or "*"


def parse_path(path: str) -> tuple[Segment, ...]:
    """``data.items[0].price`` -> ``("data", "items", 0, "price")``; raises :class:`PathError`."""
    text = path.strip()
    if text.startswith("$."):
        text = text[2:]
    if not text or len(text) > MAX_PATH_LENGTH:
        raise PathError(f"'{path}' is not a JSON path (e.g. data.object.status)")
    segments: list[Segment] = []
    pos = 0
    while pos < len(text):
        if text[pos] == "." and segments and pos + 1 < len(text) and text[pos + 1] != "[":
            pos += 1
        match = _SEGMENT.match(text, pos)
        if match is None:
            raise PathError(f"'{path}' is not a JSON path (e.g. data.object.status)")
        key, index = match.groups()
        if key is not None:
            segments.append(key)
        else:
            segments.append("*" if index == "*" else int(index))
        pos = match.end()
    return tuple(segments)


def _strip(value: Any, path: Sequence[Segment]) -> Any:
    """``value`` without what ``path`` names (a copy where it changes, else the same object)."""
    if not path:
        return _ABSENT
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        if head == "*":
            keys = list(value)
        elif isinstance(head, str) and head in value:
            keys = [head]
        else:
            return value
        out = dict(value)
        for k in keys:
            kept = _strip(out[k], rest)
            if kept is _ABSENT:
                del out[k]
            else:
                out[k] = kept
        return out
    if isinstance(value, list):
        if head == "*":
            indexes = list(range(len(value)))
        elif isinstance(head, int) and head < len(value):
            indexes = [head]
        else:
            return value
        items = list(value)
        for i in reversed(indexes):
            kept = _strip(items[i], rest)
            if kept is _ABSENT:
                del items[i]
            else:
                items[i] = kept
        return items
    return value


def without(payload: Any, ignore: Sequence[tuple[Segment, ...]]) -> Any:
    for path in ignore:
        payload = _strip(payload, path)
        if payload is _ABSENT:
            return None
    return payload


def canonical(payload: Any) -> bytes:
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def _load(body: bytes, content_type: str | None) -> Any:
    try:
        return decode_payload(body, content_type)
    except (ValueError, RecursionError):
        return _ABSENT


def fingerprint(
    body: bytes, ignore: Sequence[tuple[Segment, ...]] = (), content_type: str | None = None
) -> str:
    """A SHA-256 hex digest of the body's content as far as the event's identity goes (a form body:
    its fields, so the same fields in another order are the same content)."""
    payload = _load(body, content_type)
    if payload is _ABSENT:
        return hashlib.sha256(body).hexdigest()
    try:
        data = canonical(without(payload, ignore))
    except (ValueError, RecursionError):  # NaN/Infinity, nesting too deep to re-encode
        data = body
    return hashlib.sha256(data).hexdigest()


def _leaves(value: Any, prefix: str | None) -> Iterator[tuple[str, Any]]:
    """(path, value) of each leaf; ``prefix`` None at the root."""
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from _leaves(value[key], str(key) if prefix is None else f"{prefix}.{key}")
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _leaves(item, f"{prefix or ''}[{i}]")
    else:
        yield prefix or "", value


def differences(
    stored: bytes,
    later: bytes,
    ignore: Sequence[tuple[Segment, ...]] = (),
    content_type: str | None = None,
) -> list[tuple[str, Any, Any]]:
    """(path, stored value, later value) for each leaf that differs, in path order; ``None`` for a
    side that lacks the path. A body that is neither JSON nor a form differs as a whole (path ``""``,
    its text)."""
    a, b = _load(stored, content_type), _load(later, content_type)
    if a is _ABSENT or b is _ABSENT:
        return [("", stored.decode("utf-8", "replace"), later.decode("utf-8", "replace"))]
    left = dict(_leaves(without(a, ignore), None))
    right = dict(_leaves(without(b, ignore), None))
    out = []
    for path in sorted(left.keys() | right.keys()):
        x, y = left.get(path, _ABSENT), right.get(path, _ABSENT)
        if x is _ABSENT or y is _ABSENT or x != y or type(x) is not type(y):
            out.append((path, None if x is _ABSENT else x, None if y is _ABSENT else y))
    return out
