"""Mailgun's event webhooks (``kind = "mailgun"``): the signature is in the body, over a token.

Facts, each with its source:

- A delivery is JSON: ``{"signature": {"token", "timestamp", "signature"}, "event-data": {…}}``.
  Mailgun "signs them and posts the signature alongside the webhook's event-data"; ``token`` is a
  random string of 50 characters, ``timestamp`` Unix seconds, ``signature`` hex digits
  (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks).
- The signed message is ``timestamp`` then ``token`` "with no separator", HMAC-SHA256 with the
  domain's **Webhook Signing Key** (not the API key) as is, hex; compared with ``signature`` (same
  page). A domain of a subaccount also carries ``parent-signature``, the same computed with the
  primary account's key: either place may match here.
- The signature covers only the timestamp and the token, **not** ``event-data``: Mailgun's own
  scheme. The same page suggests caching the token (refusing a token seen before) and, optionally,
  checking the timestamp "is not too far from the current time", without naming a window and warning
  against being "too aggressive" (delays outside Mailgun's control). hookledger refuses a
  timestamp more than ``tolerance_seconds`` away, 900 s by default (our choice: no documented
  number); the inbox's deduplication on the event id stands in for the token cache.
- Identity: ``event-data.id`` is the event's id, ``event-data.event`` its type (``delivered``,
  ``opened``, ``failed``, …), ``event-data.timestamp`` its time (Unix seconds with a fraction)
  (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-payloads). The
  message it is about: ``event-data.message.headers.message-id``.
- No handshake. The tests follow the documentation's example (the Python snippet of the same page:
  ``hmac.new(key, timestamp + token, sha256).hexdigest()``), and Mailgun's official SDK (``mailgun``
  1.10.0, https://github.com/mailgun/mailgun-python: ``SecurityGuard.verify_webhook``, 900 s by
  default) accepts what hookledger signs (tests/integration/test_mailgun_list.py).
- Its events API is read to reconcile: ``connectors.providers.mailgun.api``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import time
import uuid
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared, keys_of
from connectors.options import SourceOptions
from connectors.parsing import epoch_time, json_path_get, load_json
from connectors.provider import Provider
from connectors.providers.mailgun.api import BUDGET, MailgunKeys, build, rule
from connectors.scheme import Scheme
from connectors.webhooks import ParsedEvent, Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("body:signature.signature", "body:signature.parent-signature"),
    signed="{body:signature.timestamp}{body:signature.token}",
    algorithm="hmac-sha256",
    encoding="hex",
    timestamp="body:signature.timestamp",
    tolerance=900,
    event_id="body:event-data.id",
    event_type="body:event-data.event",
    occurred_at="body:event-data.timestamp",
    object_id="body:event-data.message.headers.message-id",
)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if isinstance(verdict, ParsedEvent) and verdict.occurred_at is None:
        # event-data.timestamp is a float (1521472262.908181), which the scheme's reading of a
        # place as text does not take as a time
        moment = json_path_get(load_json(request.body, required=True), "event-data.timestamp")
        if isinstance(moment, int | float) and not isinstance(moment, bool):
            verdict = dataclasses.replace(verdict, occurred_at=epoch_time(moment))
    return verdict


def signature(key: str, timestamp: str, token: str) -> str:
    """Mailgun's signature of a delivery: hex HMAC-SHA256 of ``timestamp + token``."""
    return hmac.new(key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()


_RECIPIENT = "alice@example.com"
_DOMAIN = "mg.example.com"


def event_data(
    event_type: str, event_id: str, moment: float, message_id: str, recipient: str = _RECIPIENT
) -> dict[str, Any]:
    """An event as Mailgun shows it: a webhook's ``event-data``, an item of its events API."""
    event: dict[str, Any] = {
        "id": event_id,
        "timestamp": round(moment, 6),
        "log-level": "info",
        "event": event_type,
        "recipient": recipient,
        "recipient-domain": recipient.partition("@")[2],
        "tags": ["sample"],
        "user-variables": {},
        "flags": {"is-authenticated": True, "is-test-mode": False},
        "envelope": {"sender": f"bob@{_DOMAIN}", "transport": "smtp", "targets": recipient},
        "message": {
            "headers": {
                "to": recipient,
                "message-id": message_id,
                "from": f"Bob <bob@{_DOMAIN}>",
                "subject": "A sample from hookledger",
            },
            "attachments": [],
            "size": 111,
        },
        "account": {"id": "1234567890303a4bd1f33898"},
        "domain": {"name": _DOMAIN},
    }
    if event_type == "delivered":
        event["delivery-status"] = {
            "code": 250,
            "message": "OK",
            "description": "",
            "attempt-no": 1,
            "tls": True,
        }
    elif event_type == "failed":
        event |= {"severity": "permanent", "reason": "bounce"}
        event["log-level"] = "error"
        event["delivery-status"] = {
            "code": 550,
            "message": "5.1.1 The email account that you tried to reach does not exist.",
            "description": "",
            "attempt-no": 1,
        }
    elif event_type in ("opened", "clicked"):
        event |= {
            "ip": "203.0.113.7",
            "geolocation": {"country": "US", "region": "CA", "city": "San Francisco"},
            "client-info": {"client-type": "mobile browser", "client-os": "iOS"},
        }
    return event


def signed_block(secret: str, now: float, token: str | None = None) -> dict[str, str]:
    """A delivery's ``signature`` object: a fresh 50-character token and its signature."""
    stamp = str(int(now))
    token = token or (uuid.uuid4().hex + uuid.uuid4().hex)[:50]
    return {"token": token, "timestamp": stamp, "signature": signature(secret, stamp, token)}


def signed_again(body: bytes, secret: str, now: float) -> bytes:
    """A delivery's body with its ``signature`` object made afresh: Mailgun signs in the body, so
    sending a stored delivery again (a test, a drill) changes the body, not a header."""
    document = load_json(body, required=True)
    if not isinstance(document, dict) or not isinstance(document.get("event-data"), dict):
        raise ValueError("not a Mailgun delivery: no event-data")
    return compact_json(
        {"signature": signed_block(secret, now), "event-data": document["event-data"]}
    )


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = time.time()
    event_id = uuid.uuid4().hex[:22]
    message_id = (
        f"{time.strftime('%Y%m%d%H%M%S', time.gmtime(now))}.{uuid.uuid4().hex[:16]}@{_DOMAIN}"
    )
    event = event_data(event_type, event_id, now, message_id)
    body = compact_json({"signature": signed_block(secret, now), "event-data": event})
    return Sample(event_id, body, {"content-type": "application/json"})


SAMPLES = Catalogue(("delivered", "opened", "failed"), _sample)

# the signature is in the body: a stored delivery is signed again by a new ``signature`` object
# (resign_body), not a header (sign is None); the samples are signed as they are built
PROVIDER: Provider = dataclasses.replace(
    declared(
        "mailgun",
        SCHEME,
        samples=SAMPLES,
        # recipients and their addresses, at any depth (the dashboard masks them unless told)
        personal_fields=("recipient", "to", "from", "targets", "subject", "ip"),
        # its events API, read to reconcile (connectors.providers.mailgun.api)
        build=build,
        budget=BUDGET,
        keys=MailgunKeys,
        validate=rule,
        resign_body=signed_again,
        # a retry signed afresh is the same event: its signature is no part of the content
        fingerprint_ignore=("signature",),
    ),
    verify=_verify,
)
