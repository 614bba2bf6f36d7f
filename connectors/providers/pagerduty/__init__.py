"""PagerDuty V3 webhooks (``kind = "pagerduty"``): a webhook subscription's deliveries.

Facts, each with its source:

- **Signature.** ``X-PagerDuty-Signature`` holds one or more signatures, comma-separated, each
  ``v1=<hex>``: the HMAC-SHA256 of the raw body keyed with the subscription's secret (as the API
  returned it when the subscription was created, used as is), one per signing secret while PagerDuty
  rotates it. The request is authentic when any ``v1`` matches.
  https://github.com/PagerDuty/developer-docs/blob/main/docs/webhooks/04-Signatures.md ("The
  Signature", "Verifying the Signature", and its Python example; read at commit 01f977eb);
  https://docs.pagerduty.com/developer/verifying-webhook-signatures (where PagerDuty serves it).
- **No signed time.** Only the body is signed, so there is no replay window: a replayed delivery is
  a duplicate of its ``event.id``.
- **Identity.** Each delivery holds one event: ``event.id`` (the event id), ``event.event_type``
  (``incident.triggered``, ``incident.resolved``, ``service.updated``, …), ``event.resource_type``,
  ``event.occurred_at`` (ISO 8601) and ``event.data`` (the resource: ``data.id``).
  https://raw.githubusercontent.com/PagerDuty/developer-docs/main/docs/webhooks/01-Overview.md
  ("Webhook Payload", "Event Types").
- **No handshake.** A subscription's "ping" (``POST /webhook_subscriptions/{id}/ping``) arrives as a
  signed event of type ``pagey.ping`` and is stored like any other.
- **Official library.** PagerDuty's Python clients (``pagerduty`` 7.2.0, ``pdpyras``) do not verify
  webhooks; its Go client does (``go-pagerduty/webhookv3``), which the documentation cites. The
  documentation's Python example is the reference, and the tests check against it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme, SignatureList

SCHEME = Scheme(
    signatures=("header:X-PagerDuty-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    listed=SignatureList(key="v1", separator=",", pair="="),
    event_id="body:event.id",
    event_type="body:event.event_type",
    occurred_at="body:event.occurred_at",
    object_id="body:event.data.id",
    object_type="body:event.resource_type",
)

_API = "https://api.pagerduty.com"
_WEB = "https://acme.pagerduty.com"


def _reference(kind: str, path: str, ident: str, summary: str) -> dict[str, str]:
    return {
        "html_url": f"{_WEB}/{path}/{ident}",
        "id": ident,
        "self": f"{_API}/{path}/{ident}",
        "summary": summary,
        "type": f"{kind}_reference",
    }


def _pd_id() -> str:
    return "P" + token(6).upper()


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    """One event shaped after the documented payload of ``event_type``; a fresh ``event.id``."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    service = _reference("service", "services", "PF9KMXH", "API Service")
    data: dict[str, Any]
    if event_type.startswith("incident."):
        incident = _pd_id()
        data = {
            "id": incident,
            "type": "incident",
            "self": f"{_API}/incidents/{incident}",
            "html_url": f"{_WEB}/incidents/{incident}",
            "number": int(token(4), 16) % 10_000,
            "status": event_type.removeprefix("incident."),
            "incident_key": token(32),
            "created_at": now,
            "title": "A sample from hookledger",
            "service": service,
            "assignees": [_reference("user", "users", "PTUXL6G", "User 123")],
            "escalation_policy": _reference(
                "escalation_policy", "escalation_policies", "PUS0KTE", "Default"
            ),
            "teams": [_reference("team", "teams", "PFCVPS0", "Engineering")],
            "priority": None,
            "urgency": "high",
            "conference_bridge": None,
            "resolve_reason": None,
        }
        resource = "incident"
    else:  # service.updated
        data = {key: value for key, value in service.items() if key != "type"}
        data |= {"alert_creation": "create_alerts_and_incidents", "type": "service"}
        resource = "service"
    event_id = str(uuid.uuid4()) if resource == "incident" else "01" + token(24).upper()
    document = {
        "event": {
            "id": event_id,
            "event_type": event_type,
            "resource_type": resource,
            "occurred_at": now,
            "agent": _reference("user", "users", "PLH1HKV", "Tenex Engineer"),
            "client": {"name": "PagerDuty"},
            "data": data,
        }
    }
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("incident.triggered", "incident.resolved", "service.updated"), _build)

PROVIDER = declared("pagerduty", SCHEME, samples=SAMPLES)
