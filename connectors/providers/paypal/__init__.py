"""PayPal's REST webhooks (``kind = "paypal"``): signed with PayPal's RSA key, each delivery
verified by PayPal's own verify-webhook-signature API before anything is stored.

Facts (with sources):

- Each delivery carries ``PAYPAL-TRANSMISSION-ID`` (a UUID), ``PAYPAL-TRANSMISSION-TIME`` (RFC 3339),
  ``PAYPAL-TRANSMISSION-SIG`` (base64), ``PAYPAL-CERT-URL`` (PayPal's X.509 certificate) and
  ``PAYPAL-AUTH-ALGO`` (``SHA256withRSA``). The signed message is
  ``<transmission id>|<transmission time>|<webhook id>|<CRC32 of the raw body, unsigned decimal>``,
  RSA with SHA-256 — the webhook id is the listener's, from the app's settings.
  https://developer.paypal.com/api/rest/webhooks/rest/
- Verification here is the "postback": ``POST /v1/notifications/verify-webhook-signature`` with
  ``auth_algo``, ``cert_url``, ``transmission_id``, ``transmission_sig``, ``transmission_time``,
  ``webhook_id`` and ``webhook_event`` (the event), with an OAuth2 client-credentials token
  (``POST /v1/oauth2/token``, HTTP Basic ``client_id:secret``); PayPal answers
  ``{"verification_status": "SUCCESS" | "FAILURE"}``. Mock events of the webhooks simulator cannot
  be verified this way (PayPal says so).
  https://developer.paypal.com/api/webhooks/v1/#verify-webhook-signature_post,
  https://developer.paypal.com/api/rest/authentication/
- PayPal prefers self-verification (the certificate fetched from ``PAYPAL-CERT-URL``, a
  ``paypal.com`` host, cached; RSA-SHA256 over the message above): faster, no token, works for
  mock events. Not built here: see docs/providers.md "PayPal".
- No time window is documented, and PayPal retries a delivery up to 25 times over 3 days: the
  transmission time is not checked; the event id deduplicates a replay.
- Identity: the event's ``id`` (``WH-…``), type ``event_type`` (``PAYMENT.CAPTURE.COMPLETED``),
  time ``create_time``, the object ``resource_type`` / ``resource.id``; the delivery id is the
  transmission id. https://developer.paypal.com/api/rest/webhooks/event-names/
- Reconciliation: the app's webhook events, ``GET /v1/notifications/webhooks-events``
  (:mod:`connectors.providers.paypal.api`).

The official Python library, ``paypal-server-sdk`` (2.4.0), has no webhook calls at all (its
controllers are OAuth, orders, payments, subscriptions, transaction search and vault); the
deprecated ``paypalrestsdk`` (1.13.3) self-verifies with pyOpenSSL and lists webhook events
(``WebhookEvent.all``). The unit tests stand in for PayPal's API with ``httpx.MockTransport``, with a
real delivery from PayPal's PHP SDK sample; the sandbox's stand-in (``standin.py``) signs its own
deliveries and verifies them as PayPal's verify call does.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from connectors.budget import BudgetSettings
from connectors.errors import ConfigError
from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import ClientFactory, Provider, headers_named
from connectors.providers.paypal.api import DEFAULT_BASE_URL, PayPalConnector
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    ParsedEvent,
    SignatureError,
    WebhookRequest,
    iso_time,
    load_json,
    require_header,
    required_id,
    text_or_none,
)

TRANSMISSION_ID = "PAYPAL-TRANSMISSION-ID"
TRANSMISSION_TIME = "PAYPAL-TRANSMISSION-TIME"
TRANSMISSION_SIG = "PAYPAL-TRANSMISSION-SIG"
CERT_URL = "PAYPAL-CERT-URL"
AUTH_ALGO = "PAYPAL-AUTH-ALGO"
# PayPal's own patterns for the verify request's fields (its API refuses anything else)
_ID = re.compile(r"(?![0-9]+$)[A-Za-z0-9][A-Za-z0-9_\-]{1,49}")
_ALGO = re.compile(r"[A-Za-z0-9]{1,100}")
_CERT_HOST = re.compile(r"([a-z0-9\-]+\.)*paypal\.com")
# RSA with a certificate PayPal names, verified by PayPal's API: no connectors.scheme family
SCHEME: Scheme | None = None
SAMPLES = None  # only PayPal can sign a delivery its API then verifies


class PayPalKeys(ProviderKeys):
    # the listener's webhook id (the app's webhook settings): part of what PayPal signed
    webhook_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9]{1,50}$")
    # environment variables holding the REST app's OAuth client (the secret may come from
    # api_key_env instead): the receiver verifies each delivery with them
    client_id_env: str | None = None
    client_secret_env: str | None = None


def rule(values: Mapping[str, Any]) -> str | None:
    if values.get("kind") != "paypal":
        return None
    if not values.get("webhook_id"):
        return "a paypal source needs 'webhook_id' (the listener's, from the app's settings)"
    if not values.get("client_id_env") or not (
        values.get("client_secret_env") or values.get("api_key_env")
    ):
        return (
            "a paypal source needs 'client_id_env' and 'client_secret_env' (or 'api_key_env' for "
            "the secret): each delivery is verified through PayPal's API"
        )
    return None


def transmission(request: WebhookRequest) -> dict[str, str]:
    """The verify call's transmission fields, read from the headers and checked before any call:
    a missing or garbage signature header is a SignatureError, a malformed id a BadPayload."""
    values = {
        "auth_algo": require_header(request.headers, AUTH_ALGO),
        "cert_url": require_header(request.headers, CERT_URL),
        "transmission_id": require_header(request.headers, TRANSMISSION_ID),
        "transmission_sig": require_header(request.headers, TRANSMISSION_SIG),
        "transmission_time": require_header(request.headers, TRANSMISSION_TIME),
    }
    if not _ID.fullmatch(values["transmission_id"]):
        raise BadPayload(f"{TRANSMISSION_ID} {values['transmission_id'][:60]!r} is not an id")
    if len(values["transmission_time"]) > 100 or iso_time(values["transmission_time"]) is None:
        raise BadPayload(f"{TRANSMISSION_TIME} is not a time")
    signature = values["transmission_sig"]
    if not signature.isascii() or len(signature) > 500 or not _base64(signature):
        raise SignatureError(f"{TRANSMISSION_SIG} is not base64")
    if not _ALGO.fullmatch(values["auth_algo"]):
        raise SignatureError(f"{AUTH_ALGO} is not an algorithm name")
    url = values["cert_url"]
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        raise SignatureError(f"{CERT_URL} is not a URL") from None
    if (
        not url.isascii()
        or len(url) > 500
        or parts.scheme != "https"
        or parts.username is not None
        or port not in (None, 443)
        or not _CERT_HOST.fullmatch(host)
    ):
        raise SignatureError(f"{CERT_URL} is not https on a paypal.com host")
    return values


def _base64(text: str) -> bool:
    try:
        return bool(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return False


def transmission_id(request: WebhookRequest) -> str:
    """The gate's key (``Provider.confirm_key``): the transmission id, every header checked."""
    return transmission(request)["transmission_id"]


def event_of(body: bytes) -> dict[str, Any]:
    event = load_json(body, required=True)
    if not isinstance(event, dict):
        raise BadPayload("body is not a PayPal event (a JSON object)")
    required_id(event.get("id"), "id")
    if not text_or_none(event.get("event_type")):
        raise BadPayload("the event has no event_type")
    return event


def confirm(connector: Any, request: WebhookRequest) -> ParsedEvent:
    """A delivery PayPal's API says it signed, read as its event (the body as it arrived)."""
    fields = transmission(request)
    event = event_of(request.body)
    connector.verify_signature(fields, event)
    resource = event.get("resource")
    resource_id = text_or_none(resource.get("id")) if isinstance(resource, dict) else None
    return ParsedEvent(
        event_id=required_id(event.get("id"), "id"),
        delivery_id=fields["transmission_id"],
        event_type=text_or_none(event.get("event_type")),
        object_type=text_or_none(event.get("resource_type")) if resource_id else None,
        object_id=resource_id,
        occurred_at=iso_time(event.get("create_time")),
    )


def _unverified(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Any:
    """Never called by the receiver: ``confirm`` is (only PayPal's API verifies a delivery)."""
    raise SignatureError("a PayPal delivery is verified through PayPal's API")


def build(options: SourceOptions, client: ClientFactory) -> PayPalConnector:
    keys = options.own(PayPalKeys)
    client_id = options.credentials.get("client_id")
    secret = options.credentials.get("client_secret") or options.api_key
    if not client_id or not secret or not keys.webhook_id:
        raise ConfigError(
            f"source '{options.name}': PayPal needs webhook_id, client_id_env and "
            "client_secret_env (or api_key_env)"
        )
    base_url = options.base_url or DEFAULT_BASE_URL
    named = [f"${name}" for name in (keys.client_id_env, keys.client_secret_env) if name]
    if not keys.client_secret_env and options.api_key_env:
        named.append(f"${options.api_key_env}")
    return PayPalConnector(
        options.name,
        client(base_url, {}, f"the OAuth client in {' and '.join(named) or 'client_*_env'}"),
        client_id=client_id,
        client_secret=secret,
        webhook_id=keys.webhook_id,
        base_url=base_url,
        page_size=options.page_size,
    )


PROVIDER = Provider(
    "paypal",
    verify=_unverified,
    build=build,
    keys=PayPalKeys,
    validate=rule,
    signed_with_secret=False,
    sensitive_headers=headers_named(TRANSMISSION_SIG),
    confirm=confirm,
    confirm_key=transmission_id,
    samples=SAMPLES,
    # PayPal publishes no rate limit (https://developer.paypal.com/api/rate-limiting): the pace the
    # receiver's verify calls had before the list was read, shared with the list's scans
    budget=BudgetSettings(rate=10.0, concurrency=4),
    tolerance=0,
)

__all__ = ["PROVIDER", "SCHEME", "PayPalConnector", "PayPalKeys", "confirm", "transmission"]
