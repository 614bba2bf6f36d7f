"""A webhook signature scheme as one value: what is signed, where the signature is, how it is
computed and where the event's identity is. Most providers' schemes are such a value
(``connectors.providers.<kind>``), and ``generic`` builds one from ``config.toml``; verifying and
re-signing a delivery is :mod:`connectors.scheme_check`.

Places are written ``"<where>:<name>"``, the same in code and in configuration:

- ``header:X-Name`` — a request header;
- ``body:a.b.0`` — a path into the body's JSON (or form fields); in a batch, into each event;
- ``query:name`` — a query parameter of the URL as called;
- ``list:t`` — a key of the signature header's ``k=v`` list (Stripe's ``t=…,v1=…``);
- ``hash`` — for an event id only: a digest of the event's bytes (a provider that sends no id).

The signed message is a template over those places and ``{body}`` (the raw bytes), ``{timestamp}``
(the timestamp as sent), ``{url}`` (the URL as the provider called it), ``{method}``, ``{id}`` and
``{form}`` (the form's parameters sorted by name, each name then its value); other text is literal.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

# token: the header holds the shared secret itself (GitLab's X-Gitlab-Token); basic: HTTP Basic
# credentials, the secret written "user:password" (Postmark, Chargebee)
Algorithm = Literal[
    "hmac-sha1", "hmac-sha256", "hmac-sha512", "ed25519", "ecdsa-p256", "token", "basic"
]
Encoding = Literal["hex", "base64", "base64url"]
# how a shared secret is written: as is, in base64, or Svix's "whsec_<base64>" (prefix optional)
SecretForm = Literal["raw", "base64", "whsec"]
TimeFormat = Literal["unix", "unix_ms", "iso"]

ALGORITHMS: tuple[Algorithm, ...] = (
    "hmac-sha1",
    "hmac-sha256",
    "hmac-sha512",
    "ed25519",
    "ecdsa-p256",
    "token",
    "basic",
)
PLACE_KINDS = ("header", "body", "query", "list")
_PLACE = re.compile(r"^(header|body|query|list):([A-Za-z0-9_.\-]{1,128})$")
_FIELD = re.compile(r"\{([a-z]+)(?::([A-Za-z0-9_.\-]{1,128}))?\}")
_PLAIN_FIELDS = ("body", "timestamp", "url", "method", "id", "form")


class SchemeError(ValueError):
    """A scheme that cannot work, named (a configuration error for ``generic``)."""


@dataclass(frozen=True)
class Place:
    where: Literal["header", "body", "query", "list", "hash"]
    name: str = ""

    def __str__(self) -> str:
        return self.where if self.where == "hash" else f"{self.where}:{self.name}"

    def describe(self) -> str:
        """The place as an error message names it ("header X-Id", "JSON path data.id")."""
        return {
            "header": f"header {self.name}",
            "body": f"JSON path {self.name}",
            "query": f"query parameter {self.name}",
            "list": f"signature list key {self.name}",
        }.get(self.where, "the body's digest")


@functools.lru_cache(maxsize=1024)  # a scheme's places are read on every request: parsed once
def place(text: str, *, what: str, hash_allowed: bool = False) -> Place:
    """``"header:X-Name"`` → a :class:`Place`, or a SchemeError naming ``what``."""
    if hash_allowed and text == "hash":
        return Place("hash")
    match = _PLACE.match(text)
    if not match:
        kinds = ", ".join(f"'{k}:…'" for k in PLACE_KINDS) + (", 'hash'" if hash_allowed else "")
        raise SchemeError(f"{what} {text!r} is not a place ({kinds})")
    where, name = match.groups()
    return Place(where, name)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Part:
    """One piece of the signed message: literal text, or a field read from the request."""

    literal: str = ""
    field: str | None = None  # one of _PLAIN_FIELDS, or "place"
    place: Place | None = None


@functools.lru_cache(maxsize=256)
def template(text: str) -> tuple[Part, ...]:
    """The signed-message template, parsed (a SchemeError names an unknown field)."""
    parts: list[Part] = []
    at = 0
    for match in _FIELD.finditer(text):
        if match.start() > at:
            parts.append(Part(literal=text[at : match.start()]))
        name, argument = match.groups()
        if argument is None and name in _PLAIN_FIELDS:
            parts.append(Part(field=name))
        elif argument is not None and name in ("header", "body", "query", "list"):
            parts.append(Part(field="place", place=place(f"{name}:{argument}", what="field")))
        else:
            raise SchemeError(
                f"signed template field {match.group(0)!r} is not one of "
                + ", ".join("{" + f + "}" for f in _PLAIN_FIELDS)
                + ", {header:…}, {body:…}, {query:…}, {list:…}"
            )
        at = match.end()
    if at < len(text):
        parts.append(Part(literal=text[at:]))
    if not parts:
        raise SchemeError("the signed template is empty")
    return tuple(parts)


@dataclass(frozen=True)
class SignatureList:
    """A signature header holding ``k=v`` items (Stripe ``t=1,v1=ab``; Paddle ``ts=1;h1=ab``;
    Standard Webhooks ``v1,ab v1,cd``): every item under ``key`` is a candidate (rotation)."""

    key: str = "v1"
    separator: str = ","
    pair: str = "="


@dataclass(frozen=True)
class Challenge:
    """A request that is no event but a question the endpoint must answer (a subscription's
    handshake). ``when``: the place and the value that mark it (``"query:hub.mode=subscribe"``,
    ``"header:Twitch-Eventsub-Message-Type=webhook_callback_verification"``, ``"body:type=
    url_verification"``); ``echo``: the place whose value is answered; ``json_key``: answer
    ``{json_key: value}`` as JSON instead of the bare value as text. ``signed``: the signature is
    checked first; ``token``: a place whose value must equal the source's verify token."""

    when: str
    echo: str
    json_key: str | None = None
    signed: bool = True
    token: str | None = None
    method: str | None = None  # only on this HTTP method (Meta's and Dropbox's GET)

    @property
    def marker(self) -> tuple[Place, str]:
        where, _, value = self.when.partition("=")
        return place(where, what="challenge"), value


@dataclass(frozen=True)
class Scheme:
    """One provider's signature and identity, as data (see the module's docstring for places)."""

    signatures: tuple[str, ...]  # where the signature is; several: any may match (rotation)
    signed: str = "{body}"
    algorithm: Algorithm = "hmac-sha256"
    encoding: Encoding = "hex"
    prefix: str = ""  # before the signature in its place ("sha256=")
    listed: SignatureList | None = None  # the place holds a k=v list
    secret: SecretForm = "raw"
    timestamp: str | None = None  # where the signed time is
    time_format: TimeFormat = "unix"
    tolerance: int = 300  # this provider's default, in seconds (``tolerance_seconds`` overrides)
    reject_future: bool = True
    event_id: str = "body:id"
    event_type: str | None = "body:type"
    occurred_at: str | None = None
    object_id: str | None = None
    object_type: str | None = None
    delivery_id: str | None = None
    # a JSON path to the events a delivery carries several of (GoCardless' ``events``; ``$``: the
    # body is the list, as SendGrid's and HubSpot's are): each is stored on its own identity, read
    # relative to the event
    events: str | None = None
    id_prefix: str = ""  # before a hashed id, so ids of two kinds never meet
    challenges: tuple[Challenge, ...] = field(default=())
    # headers the stored delivery keeps when it is signed again (its id and type, for example)
    carried: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.signatures:
            raise SchemeError("a scheme needs at least one signature place")
        for text in self.signatures:
            found = place(text, what="signature place")
            if found.where not in ("header", "body"):
                raise SchemeError(f"signature place {text!r} must be a header or a body path")
            if self.listed and found.where != "header":
                raise SchemeError("a k=v signature list is read from a header")
        parts = template(self.signed)
        if self.algorithm not in ("token", "basic") and not any(p.field == "body" for p in parts):
            uses_body = any(p.place and p.place.where == "body" for p in parts)
            if not uses_body and not any(p.field == "form" for p in parts):
                raise SchemeError("the signed template must include the body ({body})")
        for what, given in (
            ("timestamp", self.timestamp),
            ("event_type", self.event_type),
            ("occurred_at", self.occurred_at),
            ("object_id", self.object_id),
            ("object_type", self.object_type),
            ("delivery_id", self.delivery_id),
        ):
            if given is not None:
                found = place(given, what=what)
                if found.where == "list" and not self.listed:
                    raise SchemeError(f"{what} reads the signature list, which this scheme has not")
        place(self.event_id, what="event_id", hash_allowed=True)
        if any(p.field == "timestamp" for p in parts) and not self.timestamp:
            raise SchemeError("the signed template uses {timestamp}: say where it is (timestamp)")
        for challenge in self.challenges:
            challenge.marker  # noqa: B018 (parsed: a bad place fails here, not at the first request)
            place(challenge.echo, what="challenge echo")
            if challenge.token:
                place(challenge.token, what="challenge token")

    @property
    def parts(self) -> tuple[Part, ...]:
        return template(self.signed)

    @property
    def asymmetric(self) -> bool:
        """Checked with the provider's public key (no shared secret)."""
        return self.algorithm in ("ed25519", "ecdsa-p256")

    def header_names(self) -> frozenset[str]:
        """The lower-cased headers that carry the signature: masked wherever headers are shown."""
        return frozenset(
            p.name.lower()
            for p in map(lambda t: place(t, what="signature"), self.signatures)
            if p.where == "header"
        )
