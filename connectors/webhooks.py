"""What a webhook provider is given and may answer, and the building blocks its signature check uses.

A provider's ``verify`` (``connectors.provider.Provider``) receives one :class:`WebhookRequest`: the
method, the URL as the provider called it, the headers, the query, the raw body and the time of
arrival, as an httpx transport receives one ``Request``. So a provider that signs the URL (Twilio)
or answers a handshake (Slack's ``url_verification``) is a module of its own, not a change to the
receiver. It returns one of:

- a ``ParsedEvent``: the event's identity, acknowledged with the receiver's usual JSON answer;
- :class:`Received`: the event and the answer the provider expects on success (:class:`Reply`);
- :class:`Handshake`: a verified request that is no event; its reply is sent, the delivery is logged
  with outcome ``handshake`` and nothing is stored as an event;
- :class:`Batch`: several events in one delivery, stored together or not at all.

It raises :class:`RejectedDelivery` (or :class:`SignatureError`, a 401) for anything it refuses.

The helpers below are what every built-in scheme is made of: an HMAC digest, a constant-time
comparison that never raises on hostile text, a required header, a timestamp window; and for reading
the event: the body's JSON within safe limits (:func:`load_json`), a required id, text and times.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from connectors.errors import RejectedDelivery
from connectors.parsing import (
    BadPayload,
    ParsedEvent,
    decode_payload,
    epoch_time,
    form_fields,
    is_form,
    iso_time,
    load_json,
    required_id,
    text_or_none,
)

__all__ = [
    "ALGORITHMS",
    "BadPayload",
    "Batch",
    "BatchItem",
    "Handshake",
    "ParsedEvent",
    "Received",
    "RejectedDelivery",
    "Reply",
    "SignatureError",
    "Verdict",
    "WebhookRequest",
    "check_timestamp",
    "decode_payload",
    "epoch_time",
    "form_fields",
    "hmac_digest",
    "is_form",
    "iso_time",
    "load_json",
    "query_pairs",
    "require_header",
    "required_id",
    "same_digest",
    "text_or_none",
]

ALGORITHMS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}


@dataclass(frozen=True)
class WebhookRequest:
    """One delivery as it arrived. ``headers`` have lower-cased names; ``url`` is the URL the provider
    called: ``[receiver] public_url`` with the request's path and query when it is set (behind a proxy
    the receiver sees another host and scheme), else the request's own."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    now: float  # Unix time of arrival
    query: tuple[tuple[str, str], ...] = field(default=())

    def query_value(self, name: str) -> str | None:
        """The first value of a query parameter (None when absent)."""
        return next((value for key, value in self.query if key == name), None)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def path(self) -> str:
        return urlsplit(self.url).path


@dataclass(frozen=True)
class Reply:
    """An HTTP answer a provider asks for."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Received:
    """An event, and the answer its provider expects once it is stored (Adyen: ``[accepted]``)."""

    event: ParsedEvent
    ack: Reply


@dataclass(frozen=True)
class Handshake:
    """A verified request that is no event (Slack's ``url_verification``, Discord's PING): answered
    with ``reply``, logged as a delivery with outcome ``handshake`` and ``what``, never stored as an
    event."""

    reply: Reply
    what: str


@dataclass(frozen=True)
class BatchItem:
    """One event of a delivery that holds several: its identity and its own document, stored as its
    event's body."""

    event: ParsedEvent
    body: bytes
    content_type: str | None = "application/json"


@dataclass(frozen=True)
class Batch:
    """A delivery holding several events (Adyen's ``notificationItems``): each stored and
    deduplicated on its own identity, all in one transaction with the delivery log; one item the
    store cannot take refuses the whole delivery with a 4xx naming it (the provider sends it again,
    nothing is half-stored). ``ack``: the answer the provider expects once they are stored."""

    items: tuple[BatchItem, ...]
    ack: Reply | None = None


Verdict = ParsedEvent | Received | Handshake | Batch


class SignatureError(RejectedDelivery):
    """The signature is missing or does not match (HTTP 401)."""

    def __init__(self, reason: str) -> None:
        super().__init__(401, reason)


def hmac_digest(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    """HMAC of ``message`` with ``key`` (``algorithm``: a key of :data:`ALGORITHMS`)."""
    return hmac.new(key, message, ALGORITHMS[algorithm]).digest()


def same_digest(expected: str, given: str) -> bool:
    """Constant-time equality of an ASCII digest and a header value of any characters.

    ``hmac.compare_digest`` raises TypeError on non-ASCII text; a value that is not ASCII cannot be a
    hex or base64 digest, so it simply does not match.
    """
    return given.isascii() and hmac.compare_digest(expected, given)


def require_header(headers: Mapping[str, str], name: str) -> str:
    """The header's value, stripped, or a :class:`SignatureError` naming it."""
    value = headers.get(name.lower())
    if value is None or not value.strip():
        raise SignatureError(f"missing header {name}")
    return value.strip()


def check_timestamp(ts: int, now: float, tolerance: int, *, reject_future: bool) -> None:
    """A signed time within ``tolerance`` seconds of ``now`` (0: any time), or a SignatureError."""
    if tolerance <= 0:
        return
    if ts < now - tolerance:
        raise SignatureError(f"timestamp outside the tolerance of {tolerance} s (too old)")
    if reject_future and ts > now + tolerance:
        raise SignatureError(f"timestamp outside the tolerance of {tolerance} s (too new)")


def query_pairs(url: str) -> tuple[tuple[str, str], ...]:
    """A URL's query as (name, value) pairs, in order, blanks kept."""
    return tuple(parse_qsl(urlsplit(url).query, keep_blank_values=True))
