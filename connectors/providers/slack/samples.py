"""Realistic sample Slack Events API deliveries for ``hookledger send``, each with a fresh
``event_id``. Unsigned: ``PROVIDER.sign`` adds ``X-Slack-Signature``.
"""

from __future__ import annotations

import time
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


def _slack(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event_id = f"Ev{_token(10).upper()}"
    event: dict[str, Any] = {"type": event_type, "channel": "C0SAMPLE", "user": "U0SAMPLE"}
    if event_type == "message":
        event |= {"text": "A sample from hookledger", "ts": f"{time.time():.6f}"}
    elif event_type == "reaction_added":
        event |= {"reaction": "thumbsup", "item": {"type": "message", "channel": "C0SAMPLE"}}
    document = {
        "token": "unused",
        "team_id": "T0SAMPLE",
        "api_app_id": "A0SAMPLE",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }
    return Sample(event_id, _json(document), {"content-type": "application/json"})


SLACK = Catalogue(("message", "app_mention", "reaction_added"), _slack)
