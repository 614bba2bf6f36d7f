"""A GitLab webhook's history as the sandbox makes it: each event as GitLab delivered it and as its
event log (``GET …/hooks/:hook_id/events``) shows the delivery.

Shapes after GitLab's documentation: the payloads of "Webhook events"
(https://docs.gitlab.com/user/project/integrations/webhook_events/), the delivery headers
(https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers) and the log item of
https://docs.gitlab.com/api/project_webhooks/#list-project-webhook-events. GitLab logs the body it
sent with e-mail addresses replaced by ``[REDACTED]`` (``WebHookLog#redact_user_emails``), so the
bodies here carry ``[REDACTED]`` already: the delivered body and ``request_data`` are the same JSON.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from connectors.sandbox.standin import Sent

HOOK_URL = "https://hooks.example.com/webhooks/gitlab"
INSTANCE = "https://gitlab.example.com"
USER_AGENT = "GitLab/18.6.1"
PROJECT = {
    "id": 61829302,
    "name": "Shop",
    "description": "The shop's storefront and its checkout.",
    "web_url": f"{INSTANCE}/acme/shop",
    "avatar_url": None,
    "git_ssh_url": "git@gitlab.example.com:acme/shop.git",
    "git_http_url": f"{INSTANCE}/acme/shop.git",
    "namespace": "Acme",
    "visibility_level": 0,
    "path_with_namespace": "acme/shop",
    "default_branch": "main",
    "ci_config_path": None,
    "homepage": f"{INSTANCE}/acme/shop",
    "url": "git@gitlab.example.com:acme/shop.git",
    "ssh_url": "git@gitlab.example.com:acme/shop.git",
    "http_url": f"{INSTANCE}/acme/shop.git",
}
REPOSITORY = {
    "name": "Shop",
    "url": "git@gitlab.example.com:acme/shop.git",
    "description": PROJECT["description"],
    "homepage": PROJECT["homepage"],
}
USERS = (
    {"id": 4, "name": "Ada Brandt", "username": "abrandt"},
    {"id": 17, "name": "Kim Oduya", "username": "koduya"},
    {"id": 23, "name": "Lea Marsh", "username": "lmarsh"},
)
TITLES = ("Fix the VAT rounding", "Cache the price list", "Retry failed captures", "Add SEPA")
HOOK_NAMES = {
    "merge_request": ("Merge Request Hook", "merge_request_hooks"),
    "issue": ("Issue Hook", "issue_hooks"),
    "push": ("Push Hook", "push_hooks"),
}
_FIRST_LOG_ID = 7_421_508_113
_FIRST_OBJECT_ID = 318_400_000


def payload_time(at: datetime) -> str:
    """GitLab's time in webhook payloads: ``2015-05-17 18:21:36 UTC``."""
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def api_time(at: datetime) -> str:
    """GitLab's time in its REST answers: ISO 8601 in milliseconds, ``Z``."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _user(rng: random.Random) -> dict[str, Any]:
    who = rng.choice(USERS)
    avatar = f"https://www.gravatar.com/avatar/{rng.getrandbits(128):032x}?s=80&d=identicon"
    return {**who, "avatar_url": avatar, "email": "[REDACTED]"}


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass
class _Thing:
    """A merge request or an issue the history keeps changing."""

    id: int
    iid: int
    title: str
    created: datetime
    kind: str


class _Story:
    """The project's life: merge requests and issues opened, updated and closed; pushes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.open: list[_Thing] = []
        self.next_id = _FIRST_OBJECT_ID + rng.randrange(10_000)
        self.iids = {"merge_request": 0, "issue": 0}

    def _new(self, kind: str, at: datetime) -> _Thing:
        self.next_id += self.rng.randrange(1, 900)
        self.iids[kind] += 1
        thing = _Thing(self.next_id, self.iids[kind], self.rng.choice(TITLES), at, kind)
        self.open.append(thing)
        return thing

    def event(self, at: datetime) -> dict[str, Any]:
        roll = self.rng.random()
        if roll < 0.25:
            return self._push(at)
        kind = "merge_request" if roll < 0.8 else "issue"
        mine = [t for t in self.open if t.kind == kind]
        if not mine or self.rng.random() < 0.4:
            thing, action, state = self._new(kind, at), "open", "opened"
        else:
            thing = self.rng.choice(mine)
            ends = ("merge", "close") if kind == "merge_request" else ("close",)
            action = self.rng.choice(("update", *ends))
            state = {"merge": "merged", "close": "closed"}.get(action, "opened")
            if state != "opened":
                self.open.remove(thing)
        return self._change(thing, action, state, at)

    def _change(self, thing: _Thing, action: str, state: str, at: datetime) -> dict[str, Any]:
        path = "merge_requests" if thing.kind == "merge_request" else "issues"
        attributes: dict[str, Any] = {
            "id": thing.id,
            "iid": thing.iid,
            "title": thing.title,
            "state": state,
            "action": action,
            "author_id": USERS[thing.id % len(USERS)]["id"],
            "project_id": PROJECT["id"],
            "created_at": payload_time(thing.created),
            "updated_at": payload_time(at),
            "url": f"{PROJECT['web_url']}/-/{path}/{thing.iid}",
        }
        if thing.kind == "merge_request":
            attributes |= {
                "source_branch": f"feature/{thing.iid}",
                "target_branch": "main",
                "source_project_id": PROJECT["id"],
                "target_project_id": PROJECT["id"],
                "merge_status": "can_be_merged",
                "draft": False,
            }
        return {
            "object_kind": thing.kind,
            "event_type": thing.kind,
            "user": _user(self.rng),
            "project": PROJECT,
            "object_attributes": attributes,
            "labels": [],
            "changes": {"updated_at": {"previous": None, "current": payload_time(at)}},
            "repository": REPOSITORY,
        }

    def _push(self, at: datetime) -> dict[str, Any]:
        who = self.rng.choice(USERS)
        before, after = f"{self.rng.getrandbits(160):040x}", f"{self.rng.getrandbits(160):040x}"
        return {
            "object_kind": "push",
            "event_name": "push",
            "before": before,
            "after": after,
            "ref": "refs/heads/main",
            "ref_protected": True,
            "checkout_sha": after,
            "message": None,
            "user_id": who["id"],
            "user_name": who["name"],
            "user_username": who["username"],
            "user_email": "[REDACTED]",
            "project_id": PROJECT["id"],
            "project": PROJECT,
            "commits": [
                {
                    "id": after,
                    "message": "Tidy the checkout\n",
                    "title": "Tidy the checkout",
                    "timestamp": at.isoformat(timespec="seconds"),
                    "url": f"{PROJECT['web_url']}/-/commit/{after}",
                    "author": {"name": who["name"], "email": "[REDACTED]"},
                    "added": [],
                    "modified": ["app/checkout.rb"],
                    "removed": [],
                }
            ],
            "total_commits_count": 1,
            "push_options": {},
            "repository": REPOSITORY,
        }


def _answer(rng: random.Random) -> tuple[str, dict[str, str], str, float]:
    """What the receiver answered: mostly 200; now and then a 502 or no answer at all."""
    roll = rng.random()
    if roll < 0.03:
        return "internal error", {}, "execution expired", round(rng.uniform(10, 10.5), 6)
    status = "502" if roll < 0.08 else "200"
    headers = {"Content-Type": "application/json", "Content-Length": "15", "Connection": "close"}
    body = '{"stored":true}' if status == "200" else "Bad Gateway"
    return status, headers, body, round(rng.uniform(0.02, 0.9), 6)


def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
    """``count`` deliveries between ``start`` and ``start + span``, oldest first."""
    story = _Story(rng)
    log_id = _FIRST_LOG_ID + rng.randrange(100_000)
    out = []
    for n in range(count):
        at = start + span * (n + rng.random()) / max(count, 1)
        at = at.replace(microsecond=at.microsecond // 1000 * 1000)  # GitLab answers milliseconds
        data = story.event(at)
        kind = data["object_kind"]
        event_name, trigger = HOOK_NAMES[kind]
        key = _uuid(rng)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Idempotency-Key": key,
            "X-Gitlab-Event": event_name,
            "X-Gitlab-Webhook-UUID": _uuid(rng),
            "X-Gitlab-Instance": INSTANCE,
            "X-Gitlab-Event-UUID": _uuid(rng),
        }
        status, answer_headers, answer, took = _answer(rng)
        log_id += rng.randrange(1, 4000)
        item = {
            "id": log_id,
            "url": HOOK_URL,
            "trigger": trigger,
            "request_headers": {**headers, "X-Gitlab-Token": "[REDACTED]"},
            "request_data": data,
            "response_headers": answer_headers,
            "response_body": answer,
            "execution_duration": took,
            "response_status": status,
            "created_at": api_time(at),
        }
        attributes = data.get("object_attributes") or {}
        out.append(
            Sent(
                key,
                at,
                item,
                json.dumps(data, separators=(",", ":")).encode(),
                {k.lower(): v for k, v in headers.items()},
                object_type=kind,
                object_id=str(attributes["id"]) if attributes else None,
                status=attributes.get("state"),
            )
        )
    return out
