"""Which correlation id an incoming event carries (pure).

The id follows an event from the request to the business rows and outgoing calls. It is taken
from the request when a provider or a proxy sends one: the source's ``correlation_header``, else
``X-Correlation-Id`` then ``X-Request-Id``; then the provider's own request id where the payload
carries one (Stripe's ``request.id``, also in Stripe's dashboard logs); else a new one is minted.
A value that is not a plain token of at most 64 characters is not taken (the delivery is still
stored, with a minted id): a header is hostile input.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from connectors.parsing import ParsedEvent

DEFAULT_HEADERS = ("x-correlation-id", "x-request-id")
MAX_LENGTH = 64  # inbox_events.correlation_id
_TOKEN = re.compile(r"[A-Za-z0-9._:/+=@-]{1,64}")


def usable(value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip()
    return text if _TOKEN.fullmatch(text) else None


def mint() -> str:
    return uuid.uuid4().hex


def correlation_id(
    headers: Mapping[str, str], parsed: ParsedEvent, header: str | None = None
) -> str:
    """``headers`` with lower-cased names (as Starlette gives them)."""
    for name in (header.lower(),) if header else DEFAULT_HEADERS:
        found = usable(headers.get(name))
        if found:
            return found
    return usable(parsed.request_id) or mint()
