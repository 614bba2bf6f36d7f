"""Postmark's webhooks (``kind = "postmark"``): no signature, HTTP Basic credentials on the URL.

Facts, each with its source:

- Postmark does not sign its webhooks. To protect the URL it documents basic HTTP authentication:
  the webhook URL is set as ``https://<username>:<password>@example.com/webhook``, so each request
  carries ``Authorization: Basic base64(username:password)``; it also names the IP ranges it sends
  from (https://postmarkapp.com/developer/webhooks/webhooks-overview, "Protecting your webhook").
  The Webhooks API sets the same through ``HttpAuth: {Username, Password}``
  (https://postmarkapp.com/developer/api/webhooks-api). The source's secret is written
  ``username:password``; several (comma-separated) rotate.
- No signed time: no replay window. No handshake.
- A delivery is one JSON record: ``RecordType`` says what it is (``Delivery``, ``Bounce``,
  ``SpamComplaint``, ``Open``, ``Click``, ``SubscriptionChange``), ``MessageID`` the message it is
  about; its time is ``DeliveredAt``, ``BouncedAt``, ``ReceivedAt`` or ``ChangedAt`` by type, ISO 8601
  (https://postmarkapp.com/developer/webhooks/delivery-webhook,
  https://postmarkapp.com/developer/webhooks/bounce-webhook,
  https://postmarkapp.com/developer/webhooks/open-tracking-webhook,
  https://postmarkapp.com/developer/webhooks/click-webhook).
- **Identity.** Postmark sends no event id. ``MessageID`` + ``RecordType`` does not identify an
  event: a message sent to several recipients is delivered once per recipient (the delivery page:
  "that particular recipient, since there can be multiple"), and a message is opened and clicked
  many times, each its own webhook. So the identity is a digest of the record as sent
  (``postmark:<sha256 of the body>``): Postmark's retry of the same record is a duplicate, two opens
  are two events.
- Postmark has no official Python library (its libraries do not verify webhooks: there is nothing to
  verify but the credentials); the tests follow the documentation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared, keys_of
from connectors.options import SourceOptions
from connectors.parsing import iso_time, load_json
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import ParsedEvent, Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("header:Authorization",),
    algorithm="basic",
    prefix="Basic ",
    event_id="hash",
    id_prefix="postmark:",
    event_type="body:RecordType",
    object_id="body:MessageID",
)

# where each record type carries its time (the scheme has one place for all)
TIME_FIELDS = {
    "Delivery": "DeliveredAt",
    "Bounce": "BouncedAt",
    "SpamComplaint": "BouncedAt",
    "Open": "ReceivedAt",
    "Click": "ReceivedAt",
    "SubscriptionChange": "ChangedAt",
}


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if isinstance(verdict, ParsedEvent) and verdict.event_type in TIME_FIELDS:
        document = load_json(request.body, required=True)
        if isinstance(document, dict):
            moment = iso_time(document.get(TIME_FIELDS[verdict.event_type]))
            verdict = dataclasses.replace(verdict, occurred_at=moment)
    return verdict


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    record: dict[str, Any] = {
        "RecordType": event_type,
        "ServerID": 23,
        "MessageStream": "outbound",
        "MessageID": str(uuid.uuid4()),
        "Tag": "welcome-email",
        "Metadata": {"a_key": "a_value"},
    }
    if event_type == "Delivery":
        record |= {
            "Recipient": "john@example.com",
            "DeliveredAt": _now(),
            "Details": "smtp;250 2.0.0 OK",
        }
    elif event_type == "Bounce":
        record |= {
            "ID": int(time.time() * 1000) % 10**12,
            "Type": "HardBounce",
            "TypeCode": 1,
            "Name": "Hard bounce",
            "Description": "The server was unable to deliver your message (ex: unknown user).",
            "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
            "Email": "john@example.com",
            "From": "sender@example.com",
            "BouncedAt": _now(),
            "DumpAvailable": True,
            "Inactive": True,
            "CanActivate": True,
            "Subject": "Welcome",
        }
    else:  # Open
        record |= {
            "Recipient": "john@example.com",
            "FirstOpen": True,
            "ReceivedAt": _now(),
            "Platform": "WebMail",
            "ReadSeconds": 5,
            "UserAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
            "Client": {"Name": "Chrome 35.0.1916.153", "Company": "Google", "Family": "Chrome"},
            "OS": {"Name": "OS X 10.7 Lion", "Company": "Apple Computer, Inc.", "Family": "OS X"},
            "Geo": {"CountryISOCode": "US", "Country": "United States", "City": "Seattle"},
        }
    body = compact_json(record)
    event_id = SCHEME.id_prefix + hashlib.sha256(body).hexdigest()
    return Sample(event_id, body, {"content-type": "application/json"})


SAMPLES = Catalogue(("Delivery", "Bounce", "Open"), _sample)

PROVIDER: Provider = dataclasses.replace(
    declared(
        "postmark",
        SCHEME,
        samples=SAMPLES,
        # the recipient, the message, where and how it was opened
        personal_fields=("Recipient", "Email", "From", "Subject", "Content", "UserAgent", "Geo"),
    ),
    verify=_verify,
)
