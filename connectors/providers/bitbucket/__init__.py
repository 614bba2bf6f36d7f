"""Bitbucket Cloud webhooks (``kind = "bitbucket"``): a repository's or workspace's webhook with a
secret.

Facts, each with its source:

- **Signature.** A webhook given a secret signs each request: ``X-Hub-Signature: sha256=<hex>``,
  the HMAC-SHA256 of the raw body keyed with the secret as typed (its UTF-8 bytes); the prefix names
  the algorithm. A webhook without a secret sends no ``X-Hub-Signature``: refused here (401), so a
  ``bitbucket`` source needs the secret set on the webhook.
  https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/ ("Secure webhooks");
  https://bitbucket.org/blog/enhanced-webhook-security (webhook secrets, HMAC of the payload);
  https://www.skills.sh/hookdeck/webhook-skills/bitbucket-webhooks ("X-Hub-Signature header
  formatted as sha256=<hex>"; "configured without a secret are unsigned").
- **No signed time.** Only the body is signed; there is no timestamp and so no replay window
  (a replayed delivery is a duplicate of its ``X-Request-UUID``).
- **Identity.** Every event request carries ``X-Event-Key`` (the event: ``repo:push``,
  ``pullrequest:created``, ``issue:created``, …), ``X-Hook-UUID`` (the webhook),
  ``X-Request-UUID`` (the request: the event id here) and ``X-Attempt-Number``. The bodies carry
  no event id of their own. On a 5xx Bitbucket "resends the request up to two more times", counted
  by ``X-Attempt-Number``; that a resend keeps its ``X-Request-UUID`` is how the request log shows
  one request with several attempts, but not stated in so many words.
  https://support.atlassian.com/bitbucket-cloud/docs/event-payloads/ ("HTTP headers");
  https://support.atlassian.com/bitbucket-cloud/docs/troubleshoot-webhooks/ (retries).
- **No handshake.** Bitbucket sends no verification request.
- **Official library.** Atlassian publishes no library that verifies Bitbucket Cloud webhooks
  (``atlassian-python-api`` is a REST client and does not): the documented algorithm is the
  reference, and the tests check against it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:X-Hub-Signature",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    prefix="sha256=",
    event_id="header:X-Request-UUID",
    event_type="header:X-Event-Key",
    delivery_id="header:X-Request-UUID",
    carried=("X-Request-UUID", "X-Event-Key", "X-Hook-UUID"),
)

_REPOSITORY = {
    "type": "repository",
    "full_name": "acme/website",
    "name": "website",
    "uuid": "{3f2c4d6b-1e0a-4b8e-9c1d-2a7f5e6b8c90}",
    "links": {"html": {"href": "https://bitbucket.org/acme/website"}},
    "is_private": True,
}
_ACTOR = {
    "type": "user",
    "display_name": "Ada Lovelace",
    "uuid": "{8d5e3a1c-7b2f-4c6d-9e0a-1b2c3d4e5f60}",
    "account_id": "557058:c0ffee00-1111-2222-3333-444455556666",
    "nickname": "ada",
}


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    """A delivery shaped after the documented payloads of ``event_type``; a fresh request UUID."""
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    document: dict[str, Any] = {"actor": _ACTOR, "repository": _REPOSITORY}
    if event_type == "repo:push":
        old, new = token(40), token(40)
        document["push"] = {
            "changes": [
                {
                    "old": {"type": "branch", "name": "main", "target": {"hash": old}},
                    "new": {
                        "type": "branch",
                        "name": "main",
                        "target": {"type": "commit", "hash": new, "date": now},
                    },
                    "created": False,
                    "forced": False,
                    "closed": False,
                    "commits": [{"type": "commit", "hash": new, "message": "A sample push\n"}],
                    "truncated": False,
                }
            ]
        }
    elif event_type.startswith("pullrequest:"):
        number = int(token(6), 16) % 10_000
        document["pullrequest"] = {
            "id": number,
            "title": "A sample from hookledger",
            "state": "OPEN",
            "author": _ACTOR,
            "source": {"branch": {"name": "feature"}},
            "destination": {"branch": {"name": "main"}},
            "created_on": now,
            "updated_on": now,
            "links": {
                "html": {"href": f"https://bitbucket.org/acme/website/pull-requests/{number}"}
            },
        }
    else:  # issue:created
        number = int(token(6), 16) % 10_000
        document["issue"] = {
            "id": number,
            "title": "A sample from hookledger",
            "state": "new",
            "kind": "bug",
            "priority": "major",
            "reporter": _ACTOR,
            "created_on": now,
            "updated_on": now,
        }
    request_uuid = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "x-event-key": event_type,
        "x-request-uuid": request_uuid,
        "x-hook-uuid": str(uuid.uuid4()),
        "x-attempt-number": "1",
    }
    return Sample(request_uuid, compact_json(document), headers)


SAMPLES = Catalogue(("repo:push", "pullrequest:created", "issue:created"), _build)

PROVIDER = declared("bitbucket", SCHEME, samples=SAMPLES)
