"""The event a handler would see, built in one call from a provider's sample delivery or from a
payload of the test's own, the way the receiver and the worker build it.

The delivery is signed with a test secret exactly as the provider signs (``Provider.sign``), checked
and read by the provider's own ``verify``, turned into the events to store by the receiver's own
step (``reconciler.inbox.intake``: masked headers, a correlation id), and handed over as the worker
hands a claimed row (``reconciler.inbox.claims.event_of``). A sample the provider's reader refuses,
or a payload it cannot read, fails here with the receiver's reason rather than in production.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime
from itertools import count
from typing import Any
from urllib.parse import urlencode

from connectors.catalogue import Sample
from connectors.provider import Provider
from connectors.registry import kinds
from connectors.webhooks import Handshake, WebhookRequest, is_form, query_pairs
from reconciler.config import SourceSettings
from reconciler.config.settings import parse_settings
from reconciler.errors import ConfigError, RejectedDelivery
from reconciler.inbox.handlers import Event
from reconciler.inbox.intake import items_of
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord
from reconciler.sources import options_of, provider
from reconciler.storage.types import utcnow

# A secret of the form each kind takes: a Standard Webhooks one (``whsec_`` and base64) is a plain
# secret to every other HMAC scheme; Adyen's HMAC key is hexadecimal.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SECRETS = {"adyen": "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA000"}
WHAT = "hookledger.testing"
_ROW_IDS = count(1)  # each event built gets an inbox row id of its own, as stored events do


def source_of(
    kind: str, name: str | None = None, keys: Mapping[str, Any] | None = None
) -> SourceSettings:
    """A ``[[sources]]`` table of ``kind`` as a configuration would hold it (``keys``: the kind's
    own keys it needs, e.g. ``generic``'s ``signature_header``); a ConfigError names what is wrong."""
    if kind not in kinds():
        raise ConfigError(
            f"{WHAT}: no provider of kind {kind!r} (registered: {', '.join(kinds())})"
        )
    table = {"name": name or kind, "kind": kind, "signing_secret_env": "HOOKLEDGER_TESTING_SECRET"}
    table |= dict(keys or {})
    return parse_settings({"sources": [table]}, WHAT).sources[0]


def _secret(source: SourceSettings) -> str:
    return SECRETS.get(source.kind, SECRET)


def _catalogue_sample(own: Provider, source: SourceSettings, event_type: str | None) -> Sample:
    if own.samples is None:
        why = (
            "its deliveries are confirmed through the provider's own API"
            if own.confirm is not None
            else "only the provider can sign its deliveries"
        )
        raise ConfigError(
            f"{WHAT}: kind '{own.kind}' has no sample deliveries ({why}): build the Event "
            "yourself (reconciler.inbox.handlers.Event)"
        )
    if event_type is not None and event_type not in own.samples.types:
        raise ConfigError(
            f"{WHAT}: the '{own.kind}' samples are {', '.join(own.samples.types)}, not "
            f"{event_type!r} (or pass payload=)"
        )
    return own.samples.sample(options_of(source, secrets=False), event_type, _secret(source))


def sample_payload(
    kind: str, event_type: str | None = None, *, keys: Mapping[str, Any] | None = None
) -> Any:
    """A sample delivery's document (its JSON, or a form body's fields), for a test to change and
    pass back as ``event_of(kind, payload=...)``."""
    return event_of(kind, event_type, keys=keys).payload


def _body(payload: Mapping[str, Any] | bytes | str, content_type: str | None) -> bytes:
    """A payload as its provider's deliveries carry it: a form's fields form-encoded, any other
    document as compact JSON; bytes and text as they are."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    if is_form(content_type):
        return urlencode(list(payload.items()), doseq=True).encode()
    return json.dumps(payload, separators=(",", ":")).encode()


def event_of(
    kind: str,
    event_type: str | None = None,
    *,
    payload: Mapping[str, Any] | bytes | str | None = None,
    source: str | None = None,
    keys: Mapping[str, Any] | None = None,
    received_at: datetime | None = None,
) -> Event:
    """The :class:`Event` a handler of ``kind`` would be handed for a sample delivery of
    ``event_type`` (default: the kind's commonest), or for ``payload`` (a document, sent as
    compact JSON, or the body's bytes) delivered with that type's sample headers.

    ``source``: the source's name as configured (default: the kind); ``keys``: the source's own
    keys where its kind needs some. A delivery of several events (Adyen's) gives its first; a
    ConfigError says what could not be built, with the receiver's reason.
    """
    settings = source_of(kind, source, keys)
    own = provider(kind)
    sample = _catalogue_sample(own, settings, event_type)
    headers = {name.lower(): value for name, value in sample.headers.items()}
    body = sample.body
    if payload is not None:  # the event's document, delivered as its provider delivers it alone
        body = own.delivery_of(_body(payload, headers.get("content-type")))
    secret = _secret(settings)
    url = f"http://127.0.0.1:8000/webhooks/{settings.name}"
    now = time.time()
    if payload is not None or own.sign is not None:
        if not own.resignable:
            raise ConfigError(
                f"{WHAT}: a '{kind}' delivery is signed inside each item, which hookledger does "
                "only for its samples: leave payload out, or build the Event yourself"
            )
        options = options_of(settings, secrets=False)
        try:
            added, body = own.signed_afresh(options, headers, body, secret, now, url)
        except ValueError as exc:  # a body its provider could not have sent (a form not UTF-8)
            raise ConfigError(
                f"{WHAT}: a '{kind}' delivery cannot carry this payload: {exc}"
            ) from None
        headers |= {name.lower(): value for name, value in added.items()}
    request = WebhookRequest("POST", url, headers, body, now, query_pairs(url))
    verifier = SourceVerifier(settings, (secret,))
    try:
        verdict = verifier.verify(request)
    except RejectedDelivery as exc:
        raise ConfigError(
            f"{WHAT}: the '{kind}' receiver refuses this delivery: {exc.reason}"
        ) from None
    if isinstance(verdict, Handshake):
        raise ConfigError(
            f"{WHAT}: this '{kind}' delivery is a handshake ({verdict.what}), no event"
        )
    intake = items_of(verifier, verdict, request, received_at or utcnow())
    if isinstance(intake, RejectedRecord):
        raise ConfigError(f"{WHAT}: the receiver would not store this delivery: {intake.reason}")
    return as_handed(intake.items[0])


def as_handed(item: IncomingEvent, *, attempt: int = 1) -> Event:
    """A stored event as the worker hands it to its handler on its first attempt."""
    parsed = item.parsed
    return Event(
        id=next(_ROW_IDS),
        source=item.source,
        event_id=parsed.event_id,
        event_type=parsed.event_type,
        object_type=parsed.object_type,
        object_id=parsed.object_id,
        occurred_at=parsed.occurred_at,
        body=item.body,
        content_type=item.content_type,
        headers=dict(item.headers),
        attempt=attempt,
        correlation_id=item.correlation_id,
        origin=str(item.origin),
    )
