"""What makes two requests with one Idempotency-Key the same request, pure (no I/O): the key as the
IETF draft (draft-ietf-httpapi-idempotency-key-header) writes it, the request's fingerprint, and the
policy a route asks for. The middleware (``middleware``) applies them."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

_KEY = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?")


def _sf_string(text: str) -> str | None:
    """An RFC 8941 sf-string's value (``"a\\"b"`` → ``a"b``), or None when it is not one."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return None
    out, escaped = [], False
    for ch in text[1:-1]:
        if escaped:
            if ch not in '"\\':
                return None
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"' or not " " <= ch <= "~":
            return None
        else:
            out.append(ch)
    return None if escaped else "".join(out)


def parse_key(values: list[bytes]) -> str | None:
    """The key from the header's values, or None when it is not usable: given more than once, or
    not 1-255 visible ASCII characters (inner spaces allowed; surrounding ones are trimmed).

    The IETF draft (draft-ietf-httpapi-idempotency-key-header) makes the header a structured-field
    string, ``Idempotency-Key: "8e03978e-…"``: its value is the key. A bare token, as many clients
    send, is accepted as the same key: ``"abc"`` and ``abc`` are one key."""
    if len(values) != 1:
        return None
    text = values[0].decode("latin-1").strip(" \t")
    key = _sf_string(text) if text.startswith('"') else text
    return key if key is not None and _KEY.fullmatch(key) else None


class DuplicateKeyError(ValueError):
    """A JSON body names one key twice: parsers disagree on which value counts, so it is refused
    rather than fingerprinted by one of them."""


def media_type(content_type: str | None) -> str:
    """The header's value as compared: the media type lower-cased, its parameters as sent (a
    charset may change what the bytes say)."""
    media, *params = (content_type or "").split(";")
    return ";".join([media.strip().lower(), *(p.strip() for p in params if p.strip())])


def fingerprint(method: str, path: str, query: bytes, content_type: str | None, body: bytes) -> str:
    """SHA-256 of what makes two requests the same request: method, path, query string, content
    type and body (the same bytes sent as another type are another request)."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query, media_type(content_type).encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise DuplicateKeyError(f"the JSON body names the key {key[:64]!r} more than once")
        document[key] = value
    return document


def canonical_body(body: bytes, content_type: str | None) -> bytes:
    """A JSON body as canonical JSON (sorted keys, no whitespace), so that a client that
    re-serialises the same document sends the same request; any other body as its bytes.
    :class:`DuplicateKeyError` for a JSON body that names a key twice."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if not (media == "application/json" or media.endswith("+json")):
        return body
    try:
        document = json.loads(body, object_pairs_hook=_unique_keys)
    except DuplicateKeyError:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError):
        return body
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class RoutePolicy:
    """What one route asks of its keys (``IdempotencyMiddleware(policies=…)``): ``required``, a
    guarded request without the header is refused with 400 naming it (the draft's answer);
    ``retention``, how long its keys are remembered (None: the middleware's; by business risk, as
    a payment's outlives a like's); ``fingerprint``, ``"json"`` (a JSON body compared as canonical
    JSON) or ``"bytes"`` (compared as sent)."""

    required: bool = False
    retention: timedelta | None = None
    fingerprint: Literal["json", "bytes"] = "json"


def policy_for(
    policies: Sequence[tuple[str, RoutePolicy]], default: RoutePolicy, method: str, path: str
) -> RoutePolicy:
    """The first policy whose pattern (``"POST /payments"``, ``"* /orders/*"``: a method or ``*``,
    then a path with ``*`` wildcards) matches the request; else ``default``."""
    for pattern, policy in policies:
        want_method, _, want_path = pattern.partition(" ")
        if want_method not in ("*", method):
            continue
        if fnmatch.fnmatchcase(path, want_path.strip() or "*"):
            return policy
    return default


NO_POLICY = RoutePolicy()  # what a route without a pattern of its own gets
