"""Vercel webhooks (``kind = "vercel"``): account webhooks and an integration's webhooks.

Facts, each with its source:

- **Signature.** ``x-vercel-signature``: the hex HMAC-SHA1 of the raw request body. The key is the
  webhook's secret as Vercel shows it once when the account webhook is created, or, for an
  integration's webhooks, the integration's Client Secret; used as is (its UTF-8 bytes).
  https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks (Vercel's "Securing webhooks":
  ``crypto.createHmac('sha1', secret).update(rawBody).digest('hex')`` compared with the header);
  https://trigger.dev/docs/webhooks/providers/vercel ("HMAC-SHA1 in x-vercel-signature"; "Webhooks
  from a Vercel integration are signed with the integration's Client Secret").
- **No signed time.** Vercel sends no timestamp header and signs only the body, so there is no
  replay window: a replayed delivery is stored once, as a duplicate of its ``id``.
- **Identity.** The body is ``{"type", "id", "createdAt", "region", "payload"}``: ``id`` is the
  event's id (the event id), ``type`` its type (``deployment.created``, ``project.created``, …),
  ``createdAt`` its time in milliseconds since 1970, ``payload`` the event's objects
  (``payload.deployment.id``, ``payload.project.id``, …).
  https://vercel.com/docs/integrations/webhooks-overview/webhooks-api ("Payload" and "Supported
  Event Types").
- **No handshake.** Vercel sends no verification request.
- **Official library.** Neither the Python ``vercel`` package (0.12.1) nor the npm ``@vercel/sdk``
  verifies webhooks: the documentation's example is the reference, and the tests check against it.
"""

from __future__ import annotations

import time
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme

SCHEME = Scheme(
    signatures=("header:x-vercel-signature",),
    signed="{body}",
    algorithm="hmac-sha1",
    encoding="hex",
    event_id="body:id",
    event_type="body:type",
    occurred_at="body:createdAt",
)


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    """A delivery shaped after the documented payload: fresh ids, ``createdAt`` now (ms)."""
    event_id = token(24)
    now_ms = int(time.time() * 1000)
    team = {"id": "team_" + token(24)}
    user = {"id": token(24)}
    project = {"id": "prj_" + token(28)}
    payload: dict[str, Any] = {"team": team, "user": user, "project": project}
    if event_type.startswith("deployment."):
        deployment_id = "dpl_" + token(28)
        payload |= {
            "deployment": {
                "id": deployment_id,
                "meta": {},
                "url": f"my-app-{token(9)}.vercel.app",
                "name": "my-app",
            },
            "links": {
                "deployment": f"https://vercel.com/acme/my-app/{deployment_id[4:]}",
                "project": "https://vercel.com/acme/my-app",
            },
            "target": "production",
            "plan": "pro",
            "regions": ["iad1"],
        }
    else:  # project.created
        payload["project"] |= {"name": "my-app"}
    document = {
        "id": event_id,
        "type": event_type,
        "createdAt": now_ms,
        "region": "iad1",
        "payload": payload,
    }
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("deployment.created", "deployment.succeeded", "project.created"), _build)

PROVIDER = declared("vercel", SCHEME, samples=SAMPLES)
