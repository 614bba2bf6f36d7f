"""What hookledger knows of one provider, in one value: registered once in ``connectors.registry``.

The inbox, the reconciler and the dashboard ask a provider (and its connector's capabilities); none
of them compares a source's kind with a provider's name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.base import Connector, Record
from connectors.budget import BudgetSettings
from connectors.catalogue import Catalogue
from connectors.http import ProviderClient
from connectors.options import ProviderKeys, SourceOptions
from connectors.parsing import ParsedEvent
from connectors.scheme import Scheme
from connectors.scheme_check import batch_of_one
from connectors.webhooks import Verdict, WebhookRequest

# (base URL, headers, where the credentials come from) -> an HTTP client with the retry policy
ClientFactory = Callable[[str, dict[str, str], str], ProviderClient]
# (options, the request as it arrived, signing secrets) -> the event (or the answer the provider
# expects, or a handshake: connectors.webhooks), or RejectedDelivery
Verify = Callable[[SourceOptions, WebhookRequest, tuple[str, ...]], Verdict]
# (options, the stored delivery's lower-cased headers, body, signing secret, now, the URL it will be
# sent to) -> the headers of the same delivery signed afresh (hookledger drill --target sends stored
# events again; a provider that signs the URL signs that one)
Sign = Callable[[SourceOptions, Mapping[str, str], bytes, str, float, str], dict[str, str]]


DEFAULT_BUDGET = BudgetSettings(rate=10.0, concurrency=4)


def headers_named(*names: str) -> Callable[[SourceOptions], frozenset[str]]:
    """``Provider.sensitive_headers`` for a provider whose signature headers are fixed names."""
    fixed = frozenset(name.lower() for name in names)
    return lambda options: fixed


def kept(headers: Mapping[str, str], *names: str) -> dict[str, str]:
    """The stored headers a re-signed delivery carries again (those present)."""
    return {name: headers[name] for name in names if headers.get(name)}


def scheme(
    check: Callable[[Mapping[str, str], bytes, tuple[str, ...]], None],
    parse: Callable[[Mapping[str, str], bytes], ParsedEvent],
) -> Verify:
    """A signature over the headers and body alone (GitHub, Shopify), then the event read."""

    def verify(
        options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]
    ) -> ParsedEvent:
        check(request.headers, request.body, secrets)
        return parse(request.headers, request.body)

    return verify


def timed_scheme(
    check: Callable[..., None], parse: Callable[[Mapping[str, str], bytes], ParsedEvent]
) -> Verify:
    """A signature that also carries its time, refused outside ``tolerance_seconds`` (Stripe,
    Standard Webhooks), then the event read."""

    def verify(
        options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]
    ) -> ParsedEvent:
        check(
            request.headers,
            request.body,
            secrets,
            now=request.now,
            tolerance=options.tolerance_seconds,
        )
        return parse(request.headers, request.body)

    return verify


def identity_of(record: Record) -> ParsedEvent:
    """A fetched record's identity, as the receiver would have read it from its delivery."""
    return ParsedEvent(
        event_id=str(record.event_id),
        event_type=record.event_type,
        object_type=record.object_type,
        object_id=record.object_id,
        occurred_at=record.occurred_at,
    )


def record_as_delivery(record: Record) -> tuple[ParsedEvent, bytes]:
    """A fetched record stored as if it had been delivered: its payload as the body."""
    return identity_of(record), json.dumps(dict(record.payload)).encode()


def no_rule(values: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class Provider:
    kind: str
    verify: Verify  # check a delivery's signature, then read its identity (connectors.webhooks)
    # its list API; None where hookledger cannot read one
    build: Callable[[SourceOptions, ClientFactory], Connector] | None = None
    # its own [[sources]] keys (the class declares their types, defaults and limits)
    keys: type[ProviderKeys] = ProviderKeys
    # the rule across its keys (the source's configured values in, a problem or None out)
    validate: Callable[[Mapping[str, Any]], str | None] = no_rule
    # a fetched record stored as the receiver would have stored its delivery (backfill)
    as_delivery: Callable[[Record], tuple[ParsedEvent, bytes]] = record_as_delivery
    # the request headers (lower-case) that carry its signature or a secret, masked wherever headers
    # are stored or shown (credentials every request may carry are masked for all:
    # parsing.CREDENTIAL_HEADERS)
    sensitive_headers: Callable[[SourceOptions], frozenset[str]] = field(
        default=lambda options: frozenset()
    )
    # payload paths the provider changes between deliveries of one event (its docs say which):
    # left out of the content fingerprint, so only a real change is a conflict
    fingerprint_ignore: tuple[str, ...] = ()
    # payload keys holding other people's personal data (Twilio's phone numbers and message text):
    # masked wherever payloads are shown unless ``[dashboard] show_personal_fields``
    personal_fields: tuple[str, ...] = ()
    # how a stored delivery is signed again; None where hookledger cannot
    sign: Sign | None = None
    # a provider that signs inside the body (Mailgun's ``signature`` object): (a stored delivery's
    # body, signing secret, now) -> the same delivery signed afresh, its body changed, no header
    resign_body: Callable[[bytes, str, float], bytes] | None = None
    # (a stored event's body) -> the delivery the provider would send for that event alone, where
    # it is not the stored body and the scheme does not say (``delivery_of``): HubSpot's batch of
    # one, Mollie's notification naming the payment it stored
    as_sent: Callable[[bytes], bytes] | None = None
    # the request budget a source of this kind gets unless configured (docs/connectors.md "Request budget"):
    # below the provider's limit, leaving room for the application's own requests
    budget: BudgetSettings = DEFAULT_BUDGET
    # False: its deliveries are checked with a value of its own keys (Discord's public key), so a
    # source of this kind needs no signing_secret_env
    signed_with_secret: bool = True
    # (the source's connector, built only when called; a stored delivery's payload) -> for a thin
    # notification (a reference, no snapshot: Stripe's v2 events) the object's current state, read
    # before the handler runs (event.current); None for a delivery that is its own snapshot, without
    # building the connector. Absent: the provider's deliveries are all snapshots.
    current: Callable[[Callable[[], Connector], Any], Mapping[str, Any] | None] | None = None
    # the HTTP methods its deliveries use (GoPay notifies with a GET); others are answered 405
    methods: tuple[str, ...] = ("POST",)
    # (the source's connector, the request) -> the verdict, for a provider whose deliveries carry
    # nothing to verify alone (GoPay): the receiver confirms each through the provider's API with
    # the source's credentials, off the event loop, and stores what the API answered. A
    # ConnectorError is the provider's API failing: answered 503, so the provider sends it again.
    confirm: Callable[[Connector, WebhookRequest], Verdict] | None = None
    # (the request) -> what a confirmation asks the provider about (GoPay's payment id), read from
    # the request alone; a malformed one raises BadPayload, so no call is made for it. Required with
    # ``confirm``: the receiver asks about one key at most once per window (reconciler.inbox.confirming)
    confirm_key: Callable[[WebhookRequest], str] | None = None
    # realistic sample deliveries by event type, for ``hookledger send`` (its package's ``samples``);
    # None: it has none (a delivery only the provider can sign, or one confirmed by its API)
    samples: Catalogue | None = None
    # the signed time's window a source of this kind gets unless it sets ``tolerance_seconds``
    # (Paddle documents 5 s; most providers 5 minutes)
    tolerance: int = 300
    # its signature as data, where it is one (connectors.scheme): ``generic`` and the docs read it
    scheme: Scheme | None = None
    # the ``_env`` keys whose secrets the receiver itself needs (Meta's ``verify_token_env``), read
    # when it starts and given as ``options.credentials``; API credentials are read only where the
    # API is called
    receive_credentials: tuple[str, ...] = ()

    def delivery_of(self, body: bytes) -> bytes:
        """A stored event's body as the provider would deliver it alone: one event of a batch as a
        batch of one (what ``hookledger drill`` re-signs and sends)."""
        if self.as_sent is not None:
            return self.as_sent(body)
        if self.scheme is not None and self.scheme.events:
            return batch_of_one(self.scheme, body)
        return body

    @property
    def resignable(self) -> bool:
        """hookledger can sign one of its stored deliveries afresh (a drill, a test)."""
        return self.sign is not None or self.resign_body is not None

    def signed_afresh(
        self,
        options: SourceOptions,
        headers: Mapping[str, str],
        body: bytes,
        secret: str,
        now: float,
        url: str,
    ) -> tuple[dict[str, str], bytes]:
        """A stored delivery signed again with ``secret`` at ``now`` for ``url``: the headers to
        add and the body to send (changed only where the signature is inside it)."""
        if self.resign_body is not None:
            kind = headers.get("content-type") or "application/json"
            return {"content-type": kind}, self.resign_body(body, secret, now)
        if self.sign is None:
            raise ValueError(f"provider {self.kind!r} cannot sign a delivery again")
        return self.sign(options, headers, body, secret, now, url), body

    def __post_init__(self) -> None:
        if (self.confirm is None) != (self.confirm_key is None):
            raise ValueError(f"provider {self.kind!r}: confirm and confirm_key go together")
