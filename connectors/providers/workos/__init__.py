"""WorkOS's webhooks, received (``kind = "workos"``): ``t=<ms>, v1=<hex>`` over ``{t}.{body}``.

Facts, with their sources:

- Signature: ``WorkOS-Signature: t=<Unix ms>, v1=<hex>`` (a comma and a space between the two), the
  hex HMAC-SHA256 of ``"{t}.{body}"`` keyed with the webhook endpoint's secret as the dashboard
  shows it. https://workos.com/docs/events/data-syncing/webhooks/what-you-will-build
  https://workos.com/docs/sso/webhooks
- Window: the official libraries default to 180 s either side (workos-python ``verify_header``,
  ``DEFAULT_TOLERANCE = 180``, ``abs(now - t) > tolerance`` refused; workos-node 180000 ms:
  https://www.mintlify.com/workos/workos-node/api/webhooks).
- Official library: ``workos`` (workos-python, 10.8.0) ``WorkOSClient.webhooks.verify_header``; it
  splits the header on ``", "`` exactly, so hookledger signs with that separator too. It only
  verifies; the vector is the one in workos-python ``tests/test_webhooks.py``.
- Body: ``{"id": "event_01…", "event": "user.created", "data": {"object": "user", "id": …},
  "created_at": "2024-…Z"}``: the id is ``id``, the type ``event``, the time ``created_at``, the
  object ``data.object`` / ``data.id``.
- No handshake.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.scheme import Scheme, SignatureList

SCHEME = Scheme(
    signatures=("header:WorkOS-Signature",),
    signed="{timestamp}.{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    listed=SignatureList(key="v1", separator=", ", pair="="),
    timestamp="list:t",
    time_format="unix_ms",
    tolerance=180,
    event_id="body:id",
    event_type="body:event",
    occurred_at="body:created_at",
    object_id="body:data.id",
    object_type="body:data.object",
)


def _ulid() -> str:
    return token(26).upper()


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    event_id = f"event_{_ulid()}"
    data: dict[str, Any]
    if event_type.startswith("user."):
        data = {
            "object": "user",
            "id": f"user_{_ulid()}",
            "email": "todd@example.com",
            "first_name": "Todd",
            "last_name": "Rundgren",
            "email_verified": False,
            "created_at": now,
            "updated_at": now,
        }
    else:
        data = {
            "object": "organization",
            "id": f"org_{_ulid()}",
            "name": "Foo Corp",
            "domains": [],
            "created_at": now,
            "updated_at": now,
        }
    document = {"id": event_id, "event": event_type, "data": data, "created_at": now}
    return Sample(event_id, compact_json(document), {"content-type": "application/json"})


SAMPLES = Catalogue(("user.created", "user.updated", "organization.created"), _sample)

PROVIDER = declared("workos", SCHEME, samples=SAMPLES)
