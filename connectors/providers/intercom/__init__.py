"""Intercom's webhooks, received (``kind = "intercom"``): HMAC-SHA1 of the body, no timestamp.

Facts, with their sources:

- Signature: ``X-Hub-Signature: sha1=<hex>``, the HMAC-SHA1 of the raw body keyed with the app's
  client secret (Developer Hub, "Basic information"), as written. The signature carries no time, so
  there is no replay window (deduplication by id still holds).
  https://developers.intercom.com/intercom-api-reference/v1.0/reference/signed-notifications
  https://developers.intercom.com/docs/references/2.13/webhooks/webhook-models
- Intercom's official Python SDK (python-intercom 5.0.1) has no webhook verification, nor has the
  Node one (intercom-client): the tests rely on the documented scheme.
- Body: a ``notification_event``: ``{"type": "notification_event", "id": "notif_…", "topic":
  "conversation.user.created", "app_id", "data": {"item": {"type": "conversation", "id": …}},
  "delivery_attempts", "first_sent_at", "created_at"}``: the id is ``id``, the type ``topic``, the
  time ``created_at`` (Unix seconds), the object ``data.item``. ``delivery_attempts``,
  ``delivered_at`` and ``delivery_status`` change between deliveries of one notification and are
  left out of the content fingerprint.
- The test notification sent when a webhook is saved has topic ``ping``: it is signed like the
  others and stored as an event of that type (answered 200, as Intercom asks).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:X-Hub-Signature",),
    signed="{body}",
    algorithm="hmac-sha1",
    encoding="hex",
    prefix="sha1=",
    event_id="body:id",
    event_type="body:topic",
    occurred_at="body:created_at",
    object_id="body:data.item.id",
    object_type="body:data.item.type",
)


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = int(time.time())
    notification_id = f"notif_{uuid.uuid4()}"
    kind = event_type.partition(".")[0]
    item: dict[str, Any]
    if kind == "conversation":
        item = {
            "type": "conversation",
            "id": str(147_000_000_000 + now % 10**6),
            "created_at": now,
            "updated_at": now,
            "state": "open",
            "source": {"type": "conversation", "body": "<p>A sample from hookledger</p>"},
        }
    else:
        item = {
            "type": "contact",
            "id": uuid.uuid4().hex[:24],
            "role": "user",
            "email": "joe@example.com",
            "created_at": now,
            "updated_at": now,
        }
    document = {
        "type": "notification_event",
        "app_id": "ecahpwf5",
        "data": {"type": "notification_event_data", "item": item},
        "links": {},
        "id": notification_id,
        "topic": event_type,
        "delivery_status": "pending",
        "delivery_attempts": 1,
        "delivered_at": 0,
        "first_sent_at": now,
        "created_at": now,
        "self": None,
    }
    return Sample(notification_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(
    ("conversation.user.created", "conversation.admin.replied", "contact.user.created"), _sample
)

PROVIDER = declared(
    "intercom",
    SCHEME,
    samples=SAMPLES,
    fingerprint_ignore=("delivery_attempts", "delivered_at", "delivery_status"),
)
