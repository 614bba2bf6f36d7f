"""Deliver the sandbox's events as signed webhooks, with the faults providers really cause.

:func:`plan` is pure: from the events, the fault rates and a seed it decides what is dropped,
duplicated, reordered and delayed, and the :class:`Report` it returns is the ground truth that tests
and the demo check the reconciler against. :func:`send` then POSTs the plan to a receiver.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from connectors.providers.github.signature import github_sign
from connectors.providers.shopify.base import delivery_identity
from connectors.providers.shopify.signature import shopify_sign
from connectors.providers.standard.signature import standard_sign
from connectors.providers.stripe.signature import stripe_sign
from connectors.sandbox.world import GitHubAttempt, World


@dataclass(frozen=True)
class Webhook:
    """One signed HTTP delivery, ready to POST."""

    event_id: str
    headers: dict[str, str]
    body: bytes
    # signs it as it is sent, for a provider whose signed time has a window too short to sign
    # a day's deliveries ahead (Paddle's 5 seconds): the signature headers
    sign: Callable[[], dict[str, str]] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DeliveryFaults:
    drop: float = 0.0  # never delivered
    duplicate: float = 0.0  # delivered twice
    reorder: float = 0.0  # swapped with a later delivery
    delay: float = 0.0  # delivered after everything else (late)
    drop_first: int = 0  # the first ones never delivered: a fault a short history surely has


@dataclass
class Report:
    """Exactly what the sender did: the ground truth."""

    planned: list[str] = field(default_factory=list)  # every event, in source order
    dropped: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    delayed: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the delivery sequence actually sent
    responses: Counter[str] = field(default_factory=Counter)  # receiver answers by status

    def to_json(self) -> dict[str, Any]:
        return {
            "planned": len(self.planned),
            "dropped": self.dropped,
            "duplicated": self.duplicated,
            "reordered": self.reordered,
            "delayed": self.delayed,
            "requests": len(self.order),
            "responses": dict(self.responses),
        }


def plan(
    webhooks: Sequence[Webhook], faults: DeliveryFaults, seed: int = 0
) -> tuple[list[Webhook], Report]:
    rng = random.Random(seed)
    report = Report(planned=[w.event_id for w in webhooks])
    sequence: list[Webhook] = []
    late: list[Webhook] = []
    for index, hook in enumerate(webhooks):
        if index < faults.drop_first or rng.random() < faults.drop:
            report.dropped.append(hook.event_id)
            continue
        if rng.random() < faults.delay:
            report.delayed.append(hook.event_id)
            late.append(hook)
        else:
            sequence.append(hook)
        if rng.random() < faults.duplicate:
            report.duplicated.append(hook.event_id)
            late.append(hook) if rng.random() < 0.5 else sequence.append(hook)
    for i in range(len(sequence) - 1):
        if rng.random() < faults.reorder:
            j = rng.randrange(i + 1, min(len(sequence), i + 20))
            sequence[i], sequence[j] = sequence[j], sequence[i]
            report.reordered.append(sequence[j].event_id)
    rng.shuffle(late)
    ordered = sequence + late
    report.order = [w.event_id for w in ordered]
    return ordered, report


def send(
    client: httpx.Client,
    url: str,
    webhooks: Iterable[Webhook],
    report: Report,
    *,
    on_sent: Any = None,
) -> Report:
    """POST each webhook; a transport error counts as status ``error`` (a provider would retry)."""
    for hook in webhooks:
        try:
            headers = hook.headers | hook.sign() if hook.sign else hook.headers
            status = str(client.post(url, content=hook.body, headers=headers).status_code)
        except httpx.TransportError:
            status = "error"
        report.responses[status] += 1
        if on_sent is not None:
            on_sent()
    return report


# -- signed requests, as each provider sends them ------------------------------------------------


def stripe_webhooks(
    events: Iterable[dict[str, Any]], secret: str, now: float | None = None
) -> list[Webhook]:
    ts = int(now if now is not None else time.time())
    out = []
    for event in events:
        body = json.dumps(event).encode()
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Stripe-Signature": stripe_sign(body, secret, ts),
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        out.append(Webhook(event["id"], headers, body))
    return out


def github_webhooks(attempts: Iterable[GitHubAttempt], secret: str) -> list[Webhook]:
    out = []
    for attempt in attempts:
        body = json.dumps(attempt.payload).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/sandbox",
            "X-GitHub-Event": attempt.event,
            "X-GitHub-Delivery": attempt.guid,
            "X-GitHub-Hook-ID": "1",
            "X-Hub-Signature-256": github_sign(body, secret),
        }
        out.append(Webhook(attempt.guid, headers, body))
    return out


def shopify_webhooks(
    world: World, secret: str, seed: int = 0, topic: str = "orders/updated"
) -> list[Webhook]:
    rng = random.Random(seed)
    out = []
    for order in sorted(world.shopify_orders.values(), key=lambda o: o["updated_at"]):
        body = json.dumps(order).encode()
        webhook_id = str(uuid.UUID(int=rng.getrandbits(128)))
        headers = {
            "Content-Type": "application/json",
            "X-Shopify-Topic": topic,
            "X-Shopify-Hmac-Sha256": shopify_sign(body, secret),
            "X-Shopify-Shop-Domain": "sandbox.myshopify.com",
            "X-Shopify-API-Version": "2025-01",
            "X-Shopify-Webhook-Id": webhook_id,
            "X-Shopify-Event-Id": str(uuid.UUID(int=rng.getrandbits(128))),
            "X-Shopify-Triggered-At": order["updated_at"],
        }
        # named as the receiver stores it: its topic and event id
        named = delivery_identity({k.lower(): v for k, v in headers.items()})
        out.append(Webhook(named or webhook_id, headers, body))
    return out


def standard_webhooks(
    messages: Iterable[tuple[str, dict[str, Any]]], secret: str, now: float | None = None
) -> list[Webhook]:
    ts = int(now if now is not None else time.time())
    out = []
    for msg_id, payload in messages:
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": standard_sign(body, secret, msg_id, ts),
        }
        out.append(Webhook(msg_id, headers, body))
    return out


def record_github_outcomes(
    world: World, report: Report, lost_after_ack: Iterable[str] = ()
) -> None:
    """Make GitHub's delivery log agree with what happened: a dropped delivery failed, unless the
    receiver's side lost it after acknowledging (a proxy answered 200 for us)."""
    dropped, lost = set(report.dropped), set(lost_after_ack)
    for attempt in world.github_attempts:
        if attempt.guid in dropped and attempt.guid not in lost:
            attempt.status, attempt.status_code = "failed to connect", 502
        elif attempt.guid in report.order or attempt.guid in lost:
            attempt.status, attempt.status_code = "OK", 200


def slack_webhooks(seed: int, count: int, secret: str, now: float | None = None) -> list[Webhook]:
    """Slack's Events API as a workspace's day sends it: the Request URL's verification first, then
    ``count`` message and reaction events across three channels, signed as Slack signs."""
    from connectors.providers.slack import slack_sign

    rng = random.Random(seed)
    ts = int(now if now is not None else time.time())
    documents: list[tuple[str, dict[str, Any]]] = [
        (
            "url_verification",
            {"token": "demo", "challenge": f"demo-{seed}", "type": "url_verification"},
        )
    ]
    for n in range(count):
        channel = f"C0DEMO{rng.randrange(1, 4)}"
        kind = rng.choice(["message", "message", "reaction_added", "app_mention"])
        event: dict[str, Any] = {
            "type": kind,
            "channel": channel,
            "ts": f"{ts - 86_400 + n}.000100",
        }
        if kind == "reaction_added":
            event = {
                "type": kind,
                "reaction": "eyes",
                "item": {"type": "message", "channel": channel},
            }
        event_id = f"Ev0DEMO{seed:04d}{n:06d}"
        documents.append(
            (
                event_id,
                {
                    "type": "event_callback",
                    "team_id": "T0DEMO",
                    "api_app_id": "A0DEMO",
                    "event_id": event_id,
                    "event_time": ts - 86_400 + n * 60,
                    "event": event,
                },
            )
        )
    out = []
    for event_id, document in documents:
        body = json.dumps(document).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": slack_sign(body, secret, ts),
        }
        out.append(Webhook(event_id, headers, body))
    return out


def twilio_webhooks(world: World, token: str, url: str) -> list[Webhook]:
    """Twilio's status callbacks for the world's messages and calls, one for each status each went
    through, as form posts signed over ``url``, the URL Twilio calls."""
    from urllib.parse import urlencode

    from connectors.providers.twilio import twilio_sign

    out = []
    resources = [("Message", m) for m in world.twilio_messages.values()]
    resources += [("Call", c) for c in world.twilio_calls.values()]
    for prefix, item in resources:
        sid = item["sid"]
        for status in world.twilio_paths[sid]:
            fields = {
                "AccountSid": item["account_sid"],
                f"{prefix}Sid": sid,
                f"{prefix}Status": status,
                "To": item["to"],
                "From": item["from"],
                "ApiVersion": item["api_version"],
            }
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Twilio-Signature": twilio_sign(url, fields, token),
                "I-Twilio-Idempotency-Token": str(
                    uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}:{status}")
                ),
            }
            out.append(Webhook(f"{sid}:{status}", headers, urlencode(fields).encode()))
    return out
