"""Realistic sample Standard Webhooks deliveries for ``hookledger send``, each with a fresh
``webhook-id``. Unsigned: ``PROVIDER.sign`` adds ``webhook-timestamp`` and ``webhook-signature``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


def _standard(options: SourceOptions, event_type: str, secret: str) -> Sample:
    msg_id = f"msg_{_token()}"
    document = {
        "type": event_type,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "data": {"id": f"obj_{_token(12)}", "status": "active"},
    }
    headers = {"content-type": "application/json", "webhook-id": msg_id}
    return Sample(msg_id, _json(document), headers)


STANDARD = Catalogue(("invoice.paid", "user.created", "subscription.updated"), _standard)
