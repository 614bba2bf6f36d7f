"""Linear webhooks (``kind = "linear"``): a workspace's or an OAuth application's data-change
webhooks (issues, comments, projects, cycles, …).

Facts, each with its source:

- **Signature.** ``Linear-Signature``: the hex HMAC-SHA256 of the raw body keyed with the webhook's
  signing secret (shown on the webhook's page, used as is).
  https://linear.app/developers/webhooks ("Securing webhooks"); the official SDK, npm
  ``@linear/sdk`` 98.0.0, ``LinearWebhookClient.verify``:
  ``createHmac("sha256", secret).update(rawBody).digest("hex")`` compared with the header
  (https://linear.app/docs/api/sdk-webhooks).
- **Signed time.** The body's ``webhookTimestamp`` (milliseconds since 1970) is covered by the
  signature; the SDK refuses a delivery more than 60 s either side of now ("Only webhookTimestamp in
  the signed body is trusted"; ``Math.abs(Date.now() - timestamp) > 1e3 * 60``), and Linear's docs
  recommend checking it is within a minute. Default ``tolerance_seconds`` here: 60, both ways. The
  ``Linear-Timestamp`` header is not signed and not read.
- **Identity.** ``Linear-Delivery`` (a UUID per delivery: the event id here), ``Linear-Event`` (the
  entity: ``Issue``, ``Comment``, ``Project``, …). The body is ``{"action", "type", "data",
  "createdAt", "url", "actor", "organizationId", "webhookTimestamp", "webhookId"}``: the event type
  stored is ``<type>.<action>`` (``Issue.create``, ``Comment.update``, ``Issue.remove``), the object
  ``data.id``, the time ``createdAt``.
  https://linear.app/developers/webhooks ("The webhook payload", "Delivery headers").
- **No handshake.** Linear sends no verification request.
- **Official library.** Linear's SDK is npm-only (``@linear/sdk``); there is no official Python
  library. The vector was signed here and accepted by ``LinearWebhookClient.verify`` and
  ``parseData`` of ``@linear/sdk`` 98.0.0 (node 20) at the vector's time.

What the scheme cannot express: signing again. The signed time is in the body, which a re-signature
cannot change; :func:`sign` signs the body as it is (a fresh sample's ``webhookTimestamp`` is now;
a stored delivery keeps its old one, which a receiver refuses after 60 s).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent, json_path_get, load_json, text_or_none
from connectors.scheme import Scheme
from connectors.webhooks import Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("header:Linear-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    timestamp="body:webhookTimestamp",
    time_format="unix_ms",
    tolerance=60,
    event_id="header:Linear-Delivery",
    event_type="header:Linear-Event",
    occurred_at="body:createdAt",
    object_id="body:data.id",
    delivery_id="header:Linear-Delivery",
    carried=("Linear-Delivery", "Linear-Event"),
)
_UNTIMED = dataclasses.replace(SCHEME, timestamp=None)


def event_type(entity: str | None, body: bytes) -> str | None:
    """``<type>.<action>`` from the body (``Issue.create``), else the ``Linear-Event`` entity."""
    document = load_json(body, required=False)
    kind = text_or_none(json_path_get(document, "type")) or entity
    action = text_or_none(json_path_get(document, "action"))
    return f"{kind}.{action}" if kind and action else kind


_DECLARED = declared("linear", SCHEME)


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = _DECLARED.verify(options, request, secrets)
    if isinstance(verdict, ParsedEvent):
        return dataclasses.replace(
            verdict,
            event_type=event_type(verdict.event_type, request.body),
            object_type=verdict.event_type,
        )
    return verdict


def sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    """``Linear-Signature`` over the body as it is (its ``webhookTimestamp`` is not changed)."""
    return scheme_check.sign(_UNTIMED, headers, body, secret, now, url)


_TEAM = {"id": "72b2a2dc-6f4f-4423-9d34-24b5bd10634a", "key": "ENG", "name": "Engineering"}
_ACTOR = {"id": "2e6eea91-1111-0000-9486-acea0603064c", "type": "user", "name": "Ada Lovelace"}
_ORGANIZATION = "f2d6d5b5-0b8c-4d0a-8a55-1c2a7b3e4f60"


def _build(options: SourceOptions, kind: str, secret: str) -> Sample:
    """A delivery shaped after the documented payload; ``webhookTimestamp`` now (ms)."""
    entity, _, action = kind.partition(".")
    now_ms = int(time.time() * 1000)
    now = datetime.fromtimestamp(now_ms / 1000, UTC).isoformat(timespec="milliseconds")
    now = now.replace("+00:00", "Z")
    object_id = str(uuid.uuid4())
    number = now_ms % 1000
    issue = {
        "id": object_id if entity == "Issue" else str(uuid.uuid4()),
        "identifier": f"ENG-{number}",
        "number": number,
        "title": "A sample from hookledger",
        "priority": 2,
        "teamId": _TEAM["id"],
        "team": _TEAM,
        "stateId": "a6e2a1b3-1c7e-4a8d-9f60-3c1d2e4f5a6b",
        "createdAt": now,
        "updatedAt": now,
        "url": f"https://linear.app/acme/issue/ENG-{number}/a-sample-from-hookledger",
    }
    data: dict[str, Any] = issue
    url = issue["url"]
    if entity == "Comment":
        data = {
            "id": object_id,
            "body": "A sample comment from hookledger",
            "issueId": issue["id"],
            "issue": {key: issue[key] for key in ("id", "identifier", "title", "url")},
            "userId": _ACTOR["id"],
            "createdAt": now,
            "updatedAt": now,
        }
        url = f"{issue['url']}#comment-{object_id[:8]}"
    document = {
        "action": action,
        "actor": _ACTOR,
        "createdAt": now,
        "data": data,
        "url": url,
        "type": entity,
        "organizationId": _ORGANIZATION,
        "webhookTimestamp": now_ms,
        "webhookId": "000042e3-d123-4980-b49f-8e140eef9329",
    }
    if action == "update":
        document["updatedFrom"] = {"title": "A sample", "updatedAt": now}
    delivery = str(uuid.uuid4())
    headers = {"content-type": "application/json", "linear-delivery": delivery}
    headers["linear-event"] = entity
    return Sample(delivery, compact_json(document), headers)


SAMPLES = Catalogue(("Issue.create", "Issue.update", "Comment.create"), _build)

PROVIDER = dataclasses.replace(_DECLARED, verify=verify, sign=sign, samples=SAMPLES)
