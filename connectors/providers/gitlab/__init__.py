"""GitLab webhooks (``kind = "gitlab"``): a project's or group's webhooks (and system hooks).

Facts, each with its source:

- **Secret token, no signature.** A webhook given a "Secret token" sends it as is in
  ``X-Gitlab-Token``; the receiver compares it with its own (constant-time here). Nothing is signed:
  the body is not bound to the token, so HTTPS is what keeps it intact.
  https://docs.gitlab.com/ee/user/project/integrations/webhooks.html#validate-payloads-by-using-a-secret-token;
  https://backstage.io/api/stable/functions/_backstage_plugin-events-backend-module-gitlab.createGitlabTokenValidator.html.
- **No signed time**, so no replay window; the token never changes per request, and a captured
  request can be sent again: stored once, a duplicate of its id.
- **Identity.** GitLab sends ``X-Gitlab-Event`` (``Push Hook``, ``Merge Request Hook``, ``Issue
  Hook``, …: the event type here; the body's ``object_kind`` is kept as the object type),
  ``X-Gitlab-Webhook-UUID`` (unique per request: the delivery id), ``X-Gitlab-Event-UUID`` (per
  event, shared by recursive webhooks) and, since GitLab 17.4, ``Idempotency-Key``: "a unique ID
  that remains consistent across webhook retries", the event id here. A GitLab that sends no
  ``Idempotency-Key`` (self-managed before 17.4) is identified by ``X-Gitlab-Event-UUID`` instead.
  https://docs.gitlab.com/ee/user/project/integrations/webhooks.html#delivery-headers;
  https://gitlab.com/gitlab-org/gitlab/-/merge_requests/160952 (the Idempotency-Key: "consistent
  across retries"); https://gitlab.com/gitlab-org/gitlab/-/merge_requests/125338
  (X-Gitlab-Webhook-UUID); https://rubydoc.info/github/gitlabhq/gitlabhq/Gitlab/WebHooks (the header
  names).
- **No handshake.** GitLab sends no verification request ("Test" sends an ordinary event).
- **Reconciliation.** The hook's event log (GitLab 17.3+): :mod:`connectors.providers.gitlab.api`.
- **Official library.** ``python-gitlab`` (8.6.0) manages hooks through the API and does not check
  deliveries: the documentation's comparison is the reference, and the tests check against it.

The scheme cannot say "this header, else that one" for the event id: :func:`verify` picks the
scheme by whether ``Idempotency-Key`` is present and delegates the rest to ``scheme_check``.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared, keys_of
from connectors.options import SourceOptions
from connectors.providers.gitlab.api import BUDGET, GitLabKeys, as_delivery, build, rule
from connectors.scheme import Scheme
from connectors.webhooks import Verdict, WebhookRequest

SCHEME = Scheme(
    signatures=("header:X-Gitlab-Token",),
    signed="{body}",
    algorithm="token",
    event_id="header:Idempotency-Key",
    event_type="header:X-Gitlab-Event",
    object_type="body:object_kind",
    delivery_id="header:X-Gitlab-Webhook-UUID",
    carried=(
        "Idempotency-Key",
        "X-Gitlab-Event",
        "X-Gitlab-Event-UUID",
        "X-Gitlab-Webhook-UUID",
        "X-Gitlab-Instance",
    ),
)
# GitLab before 17.4 sends no Idempotency-Key
LEGACY = dataclasses.replace(SCHEME, event_id="header:X-Gitlab-Event-UUID")


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    scheme = SCHEME if request.header("Idempotency-Key") else LEGACY
    return scheme_check.verify(
        scheme, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )


_PROJECT = {
    "id": 15,
    "name": "Diaspora",
    "web_url": "https://gitlab.example.com/mike/diaspora",
    "namespace": "Mike",
    "path_with_namespace": "mike/diaspora",
    "default_branch": "main",
}
_USER = {"id": 4, "name": "John Smith", "username": "jsmith", "email": "[REDACTED]"}
_KINDS = {"Push Hook": "push", "Merge Request Hook": "merge_request", "Issue Hook": "issue"}


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    """A delivery shaped after the documented payload of ``event_type``; fresh UUIDs and ids."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    kind = _KINDS[event_type]
    document: dict[str, Any] = {"object_kind": kind, "event_type": kind, "project": _PROJECT}
    if kind == "push":
        after = token(40)
        document |= {
            "before": token(40),
            "after": after,
            "ref": "refs/heads/main",
            "user_id": _USER["id"],
            "user_name": _USER["name"],
            "user_username": _USER["username"],
            "project_id": _PROJECT["id"],
            "commits": [{"id": after, "message": "A sample from hookledger\n", "timestamp": now}],
            "total_commits_count": 1,
        }
    else:
        iid = int(token(4), 16) % 1000
        document |= {
            "user": _USER,
            "object_attributes": {
                "id": 1_000_000 + int(token(6), 16) % 1_000_000,
                "iid": iid,
                "title": "A sample from hookledger",
                "state": "opened",
                "action": "open",
                "created_at": now,
                "updated_at": now,
                "url": f"{_PROJECT['web_url']}/-/{kind.replace('_', '')}s/{iid}",
            }
            | ({"source_branch": "feature", "target_branch": "main"} if kind != "issue" else {}),
        }
    key = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "x-gitlab-event": event_type,
        "idempotency-key": key,
        "x-gitlab-event-uuid": str(uuid.uuid4()),
        "x-gitlab-webhook-uuid": str(uuid.uuid4()),
        "x-gitlab-instance": "https://gitlab.example.com",
    }
    return Sample(key, compact_json(document), headers)


SAMPLES = Catalogue(tuple(_KINDS), _build)

PROVIDER = dataclasses.replace(
    declared(
        "gitlab",
        SCHEME,
        samples=SAMPLES,
        build=build,  # the hook's event log (connectors.providers.gitlab.api)
        budget=BUDGET,
        keys=GitLabKeys,
        validate=rule,
        as_delivery=as_delivery,
    ),
    verify=verify,
)
