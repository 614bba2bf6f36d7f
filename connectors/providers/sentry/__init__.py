"""Sentry integration-platform webhooks (``kind = "sentry"``): an internal or public integration's
webhooks (issues, errors, comments, alerts, installations).

Facts, each with its source:

- **Signature.** ``Sentry-Hook-Signature``: the hex HMAC-SHA256 of the raw JSON body keyed with the
  integration's Client Secret (as shown under the integration's "Credentials", used as is).
  https://docs.sentry.io/integrations/integration-platform/webhooks/ ("Headers":
  ``Sentry-Hook-Signature`` "a cryptographic hash generated with your Client Secret"; "Verifying the
  Signature"); https://trigger.dev/docs/webhooks/providers/sentry ("HMAC-SHA256 in
  sentry-hook-signature", "The integration's Client Secret").
- **Time.** ``Sentry-Hook-Timestamp`` (Unix seconds) is sent but not signed, so it cannot bound a
  replay: there is no time window; it is read as the event's time.
- **Identity.** Every request carries ``Request-ID`` ("a unique identifier for tracking and
  debugging specific events"), computed once per event (Sentry's own test
  ``test_sentry_headers_are_stable_across_calls``): the event id here. The resource is the
  ``Sentry-Hook-Resource`` header (``installation``, ``event_alert``, ``issue``, ``metric_alert``,
  ``error``, ``comment``, ``seer``) and the body's ``action`` says what happened to it
  (``created``, ``resolved``, ``assigned``, ``triggered``, …): the event type stored is
  ``<resource>.<action>`` (``issue.created``), or the resource alone when the body has no action.
  https://docs.sentry.io/integrations/integration-platform/webhooks/ ("Headers", "Request
  Structure": ``action``, ``actor``, ``data``, ``installation``).
- **No handshake.** Sentry sends no verification request (an installation is an ``installation``
  webhook like any other).
- **Official library.** ``sentry-sdk`` (PyPI, 2.75.0) reports errors to Sentry and does not verify
  its webhooks; the documentation's example is the reference, and the tests check against it.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent, json_path_get, load_json, text_or_none
from connectors.scheme import Scheme
from connectors.webhooks import Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("header:Sentry-Hook-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id="header:Request-ID",
    event_type="header:Sentry-Hook-Resource",
    occurred_at="header:Sentry-Hook-Timestamp",
    delivery_id="header:Request-ID",
    carried=("Request-ID", "Sentry-Hook-Resource", "Sentry-Hook-Timestamp"),
)


def event_type(resource: str | None, body: bytes) -> str | None:
    """``<resource>.<action>`` (the header's resource, the body's ``action``), or the resource."""
    action = text_or_none(json_path_get(load_json(body, required=False), "action"))
    if resource and action:
        return f"{resource}.{action}"
    return resource


_DECLARED = declared("sentry", SCHEME)


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verdict = _DECLARED.verify(options, request, secrets)
    if isinstance(verdict, ParsedEvent):
        return dataclasses.replace(
            verdict,
            event_type=event_type(verdict.event_type, request.body),
            object_type=verdict.event_type,
        )
    return verdict


_PROJECT = {"id": "4505321021243392", "slug": "backend", "name": "backend", "platform": "python"}
_INSTALLATION = {"uuid": "7a485448-a9e2-4c85-8a01-4b7c5a1b5a3d"}


def _build(options: SourceOptions, kind: str, secret: str) -> Sample:
    """A delivery shaped after the documented request structure: fresh ``Request-ID`` and ids."""
    resource, _, action = kind.partition(".")
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    issue_id = str(4_000_000_000 + int(token(7), 16) % 1_000_000_000)
    data: dict[str, Any]
    if resource == "issue":
        data = {
            "issue": {
                "id": issue_id,
                "shortId": f"BACKEND-{int(token(4), 16) % 1000}",
                "title": "ZeroDivisionError: division by zero",
                "culprit": "app.views.checkout in total",
                "level": "error",
                "status": "resolved" if action == "resolved" else "unresolved",
                "project": _PROJECT,
                "firstSeen": now,
                "lastSeen": now,
                "web_url": f"https://acme.sentry.io/issues/{issue_id}/",
            }
        }
    else:  # event_alert.triggered
        data = {
            "event": {
                "event_id": uuid.uuid4().hex,
                "issue_id": issue_id,
                "title": "ZeroDivisionError: division by zero",
                "level": "error",
                "platform": "python",
                "project": int(_PROJECT["id"]),
                "datetime": now,
                "web_url": f"https://acme.sentry.io/issues/{issue_id}/events/",
            },
            "triggered_rule": "Send a notification for new issues",
        }
    document = {
        "action": action,
        "installation": _INSTALLATION,
        "data": data,
        "actor": {"type": "application", "id": "sentry", "name": "Sentry"},
    }
    request_id = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "request-id": request_id,
        "sentry-hook-resource": resource,
        "sentry-hook-timestamp": str(int(time.time())),
    }
    return Sample(request_id, compact_json(document), headers)


SAMPLES = Catalogue(("issue.created", "issue.resolved", "event_alert.triggered"), _build)

PROVIDER = dataclasses.replace(_DECLARED, verify=_verify, samples=SAMPLES)
