"""The shared readers of a verified delivery: :class:`ParsedEvent` (an event's identity),
:class:`BadPayload`, the JSON and form readers, and the id and time helpers every provider's parser
uses (each provider's own parser lives in its package, ``connectors/providers/<kind>/``).

What each provider uses as its idempotency key is ``docs/providers.md`` §5.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from connectors.errors import RejectedDelivery

# Credentials any request may carry, masked for every source; the headers holding a provider's
# signature are its own to declare (``Provider.sensitive_headers``): one place for each provider.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
MASK = "<masked>"
MAX_ID_LENGTH = 255
# Deeper than any provider's payload (tens of levels); every later reader of the body (fingerprint,
# masking, handlers) walks it recursively, so it must fit well within Python's recursion limit.
MAX_JSON_DEPTH = 128


@dataclass(frozen=True)
class ParsedEvent:
    event_id: str
    delivery_id: str | None = None
    event_type: str | None = None
    object_type: str | None = None
    object_id: str | None = None
    occurred_at: datetime | None = None
    api_version: str | None = None
    account: str | None = None  # Stripe Connect: the connected account the event belongs to
    # the provider's id of the API request that caused the event, where its payload carries one
    # (Stripe's request.id): a correlation id that also appears in the provider's own logs
    request_id: str | None = None


class BadPayload(RejectedDelivery):
    """The payload cannot be read (HTTP 400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(400, reason)


def mask_headers(headers: Mapping[str, str], extra: frozenset[str] = frozenset()) -> dict[str, str]:
    """Headers as stored: lower-cased names, credential values masked and those ``extra`` names
    (the source's provider's signature headers)."""
    hidden = CREDENTIAL_HEADERS | extra
    return {k.lower(): (MASK if k.lower() in hidden else v) for k, v in headers.items()}


def json_path_get(document: Any, path: str) -> Any:
    """``a.b.0.c`` → document["a"]["b"][0]["c"]; None when any step is absent."""
    node = document
    for part in path.split("."):
        # decoded JSON is plain dicts: that check first, as the Mapping ABC's costs more (per field)
        if isinstance(node, (dict, Mapping)):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
        if node is None:
            return None
    return node


class _NotJsonConstant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    # NaN and Infinity are Python's extension, not JSON (RFC 8259): no provider sends them
    raise _NotJsonConstant(name)


def load_json(body: bytes, *, required: bool) -> Any:
    """The body's JSON. One that is nested deeper than :data:`MAX_JSON_DEPTH`, holds an integer
    longer than Python reads (4300 digits) or NaN/Infinity is refused as unreadable, like invalid
    JSON: a 400, never a 500 the provider would retry for days."""
    try:
        document = json.loads(body, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"body is not valid JSON ({exc.__class__.__name__})"
    except _NotJsonConstant as exc:
        problem = f"body holds {exc}, which JSON does not have"
    except RecursionError:
        problem = f"body is JSON nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:  # an integer past sys.get_int_max_str_digits()
        problem = "body holds a number too long to read"
    else:
        if not _deeper_than(document, MAX_JSON_DEPTH):
            return document
        problem = f"body is JSON nested deeper than {MAX_JSON_DEPTH} levels"
    if required:
        raise BadPayload(problem) from None
    return None


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or :class:`BadPayload` naming why not (every JSON provider's
    events are objects: an empty body, an array or a bare value is no event)."""
    document = load_json(body, required=True)
    if not isinstance(document, dict):
        raise BadPayload(f"body is not a JSON object (a JSON {type(document).__name__})")
    return document


FORM = "application/x-www-form-urlencoded"
MAX_FORM_FIELDS = 10_000  # a 1 MiB body of empty fields must not become a million-key dict


def is_form(content_type: str | None) -> bool:
    """Whether the body is ``application/x-www-form-urlencoded`` (parameters after ``;`` aside)."""
    return bool(content_type) and str(content_type).split(";", 1)[0].strip().lower() == FORM


def form_fields(body: bytes) -> dict[str, Any]:
    """A form body as field → value, a list of the values where a field repeats (in order). Raises
    ValueError for a body that is not UTF-8 or holds more than :data:`MAX_FORM_FIELDS` fields."""
    pairs = parse_qsl(
        body.decode("utf-8"),
        keep_blank_values=True,
        errors="strict",
        max_num_fields=MAX_FORM_FIELDS,
    )
    fields: dict[str, Any] = {}
    for name, value in pairs:
        if name not in fields:
            fields[name] = value
        elif isinstance(fields[name], list):
            fields[name].append(value)
        else:
            fields[name] = [fields[name], value]
    return fields


def decode_payload(body: bytes, content_type: str | None = None) -> Any:
    """The document a stored body holds: a form's fields for a form body (a form whose one field is
    ``payload`` holding JSON is that JSON: GitHub's form content type, Slack's interactivity), else
    its JSON. Raises ValueError (UnicodeDecodeError and json's errors are ValueErrors) when it holds
    neither."""
    if is_form(content_type):
        fields = form_fields(body)
        wrapped = _form_json(fields)
        return fields if wrapped is None else wrapped
    return json.loads(body)


def _form_json(fields: Mapping[str, Any]) -> Any:
    """The JSON document a ``payload=`` form carries, or None when it is a plain form."""
    if set(fields) != {"payload"} or not isinstance(fields["payload"], str):
        return None
    try:
        document = load_json(fields["payload"].encode(), required=False)
    except RecursionError:
        return None
    return document if isinstance(document, dict | list) else None


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether the document nests more than ``limit`` arrays and objects (iterative: a deep one
    must not exhaust the stack while it is measured)."""
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def text_or_none(value: Any) -> str | None:
    """Ids as strings end to end (Shopify ids exceed 2^53; never pass them through a float)."""
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def required_id(value: Any, what: str) -> str:
    text = text_or_none(value)
    if not text or not text.strip():
        raise BadPayload(f"missing event id ({what})")
    if len(text) > MAX_ID_LENGTH:
        raise BadPayload(f"event id ({what}) is longer than {MAX_ID_LENGTH} characters")
    return text.strip()


def epoch_time(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        if value.isdigit():
            return epoch_time(int(value))
        return iso_time(value)
    return None


def iso_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
