"""Realistic sample GitHub deliveries for ``hookledger send``, shaped after GitHub's documented
examples (the fixtures in ``tests/fixtures/providers/``), each with a fresh ``X-GitHub-Delivery``.
Unsigned: ``PROVIDER.sign`` adds ``X-Hub-Signature-256``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.options import SourceOptions


def _json(document: Any) -> bytes:
    return compact_json(document)


def _github(options: SourceOptions, event_type: str, secret: str) -> Sample:
    event, _, action = event_type.partition(".")
    repository = {"id": 1296269, "full_name": "octocat/Hello-World", "private": False}
    payload: dict[str, Any] = {"repository": repository, "sender": {"login": "octocat"}}
    if event == "push":
        payload |= {
            "ref": "refs/heads/main",
            "before": "0" * 40,
            "after": (uuid.uuid4().hex * 2)[:40],
        }
    elif event == "ping":
        payload |= {"zen": "Design for failure.", "hook_id": 1}
    else:
        number = int(time.time()) % 100_000
        item = {"id": number + 1_000_000, "number": number, "title": "A sample from hookledger"}
        payload |= {"action": action or "opened", event: item}
    delivery = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": delivery,
        "x-github-hook-id": "1",
    }
    return Sample(delivery, _json(payload), headers)


GITHUB = Catalogue(
    ("push", "issues.opened", "pull_request.opened", "issue_comment.created", "ping"), _github
)
