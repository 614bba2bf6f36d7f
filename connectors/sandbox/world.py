"""The sandbox's data: a deterministic history of provider events built from a seed.

Object and event shapes follow the providers' published examples (tests/fixtures/providers/):
Stripe ``event``/``invoice``/``charge`` objects, GitHub ``hook-delivery-item``s, Shopify REST orders,
Twilio Message and Call resources.
"""

from __future__ import annotations

import importlib
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

STRIPE_API_VERSION = "2024-06-20"
SHOPIFY_ORDER_BASE_ID = 820982911946154508  # > 2**53, as real Shopify ids are

PLANTED_CARDS = ("4242 4242 4242 4242", "4000056655665556", "5555-5555-5555-4444")
PLANTED_IBAN = "DE89 3704 0044 0532 0130 00"


@dataclass
class GitHubAttempt:
    id: int
    guid: str
    delivered_at: datetime
    status: str
    status_code: int
    event: str
    action: str | None
    redelivery: bool
    payload: dict[str, Any]

    def item(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": self.delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "redelivery": self.redelivery,
            "duration": 0.27,
            "status": self.status,
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": None,
            "repository_id": 1296269,
        }


@dataclass
class World:
    """Everything the sandbox serves. Lists are in creation order (oldest first)."""

    now: datetime
    stripe_events: list[dict[str, Any]] = field(default_factory=list)
    stripe_objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    github_attempts: list[GitHubAttempt] = field(default_factory=list)
    shopify_orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Twilio's messages and calls by SID, as its API shows them (their current status)
    twilio_messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    twilio_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the statuses each went through, in order: one status callback each
    twilio_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # GoPay's payments by id, as its API shows them (their current state); a payment's states in
    # order are in ``gopay_paths``, one notification each
    gopay_payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    gopay_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the events of each provider with a stand-in (``connectors.sandbox.standin``), oldest first
    listed: dict[str, list[Any]] = field(default_factory=dict)

    def stripe_event(self, event_id: str) -> dict[str, Any] | None:
        return next((e for e in self.stripe_events if e["id"] == event_id), None)


def _rid(rng: random.Random, prefix: str, n: int = 24) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(rng.choice(alphabet) for _ in range(n))


def _stripe(world: World, rng: random.Random, count: int, start: datetime, span: timedelta) -> None:
    times = sorted(
        start + timedelta(seconds=rng.uniform(0, span.total_seconds())) for _ in range(count)
    )
    i = 0
    while i < len(times):
        customer = _rid(rng, "cus_", 14)
        kind = rng.random()
        if kind < 0.6:  # an invoice's life: created, finalized, paid (sometimes voided instead)
            invoice_id = _rid(rng, "in_")
            amount = rng.randrange(500, 250_000)
            steps = [
                "invoice.created",
                "invoice.finalized",
                "invoice.paid" if rng.random() < 0.85 else "invoice.voided",
            ]
            state = {"draft": "draft", "finalized": "open", "paid": "paid", "voided": "void"}
            for step in steps:
                if i >= len(times):
                    break
                status = state[step.split(".")[1] if step != "invoice.created" else "draft"]
                obj = {
                    "id": invoice_id,
                    "object": "invoice",
                    "amount_due": amount,
                    "amount_paid": amount if status == "paid" else 0,
                    "amount_remaining": 0 if status == "paid" else amount,
                    "currency": rng.choice(["usd", "eur", "gbp"])
                    if step == "invoice.created"
                    else world.stripe_objects[("invoice", invoice_id)]["currency"],
                    "customer": customer,
                    "status": status,
                    "created": int(times[i].timestamp()),
                    "livemode": False,
                    "paid": status == "paid",
                    "number": f"SBX-{len(world.stripe_events):06d}",
                }
                _emit_stripe(world, rng, step, obj, times[i])
                i += 1
        elif kind < 0.85:
            charge = {
                "id": _rid(rng, "ch_"),
                "object": "charge",
                "amount": rng.randrange(500, 100_000),
                "amount_refunded": 0,
                "currency": "usd",
                "customer": customer,
                "paid": True,
                "status": "succeeded",
                "captured": True,
                "created": int(times[i].timestamp()),
                "livemode": False,
                # payment data a payload may carry (Stripe's test card numbers, its example IBAN):
                # whatever shows payloads to people must mask it
                "payment_method_details": {
                    "type": "card",
                    "card": {"brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2030},
                },
                "metadata": {
                    "card_on_file": PLANTED_CARDS[len(world.stripe_events) % len(PLANTED_CARDS)],
                    "refund_iban": PLANTED_IBAN,
                    # free text holds them too: masked inside the text, not only as whole values
                    "note": f"paid with {PLANTED_CARDS[0]}; refunds to {PLANTED_IBAN} if asked",
                },
            }
            _emit_stripe(world, rng, "charge.succeeded", charge, times[i])
            i += 1
        else:
            cust = {
                "id": customer,
                "object": "customer",
                "email": f"{customer[4:10].lower()}@example.com",
                "created": int(times[i].timestamp()),
                "livemode": False,
            }
            _emit_stripe(world, rng, "customer.created", cust, times[i])
            i += 1


def _emit_stripe(
    world: World, rng: random.Random, event_type: str, obj: dict[str, Any], at: datetime
) -> None:
    world.stripe_objects[(obj["object"], obj["id"])] = obj
    world.stripe_events.append(
        {
            "id": _rid(rng, "evt_"),
            "object": "event",
            "api_version": STRIPE_API_VERSION,
            "created": int(at.timestamp()),
            "data": {"object": dict(obj)},
            "livemode": False,
            "pending_webhooks": 0,
            "request": {
                "id": _rid(rng, "req_", 14),
                "idempotency_key": str(uuid.UUID(int=rng.getrandbits(128))),
            },
            "type": event_type,
        }
    )


GITHUB_EVENTS = [
    ("push", None),
    ("pull_request", "opened"),
    ("pull_request", "closed"),
    ("issues", "opened"),
    ("issues", "closed"),
    ("issue_comment", "created"),
]


def _github(
    world: World,
    rng: random.Random,
    count: int,
    start: datetime,
    span: timedelta,
    failure_rate: float,
) -> None:
    times = sorted(
        start + timedelta(seconds=rng.uniform(0, span.total_seconds())) for _ in range(count)
    )
    next_id = 10_000_000_000
    for n, at in enumerate(times):
        event, action = rng.choice(GITHUB_EVENTS)
        guid = str(uuid.UUID(int=rng.getrandbits(128)))
        number = n + 1
        payload: dict[str, Any] = {
            "repository": {"id": 1296269, "full_name": "octocat/Hello-World"},
            "sender": {"login": "octocat"},
        }
        if action:
            payload["action"] = action
        if event == "push":
            payload.update({"ref": "refs/heads/main", "after": f"{rng.getrandbits(160):040x}"})
        else:
            payload[event if event != "issue_comment" else "comment"] = {
                "id": 1_000_000 + number,
                "number": number,
                "updated_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        failed = rng.random() < failure_rate
        next_id += rng.randrange(1, 50)
        world.github_attempts.append(
            GitHubAttempt(
                next_id,
                guid,
                at,
                "failed to connect" if failed else "OK",
                502 if failed else 200,
                event,
                action,
                False,
                payload,
            )
        )


def _shopify(
    world: World, rng: random.Random, count: int, start: datetime, span: timedelta
) -> None:
    for n in range(count):
        created = start + timedelta(seconds=rng.uniform(0, span.total_seconds()))
        updated = created + timedelta(seconds=rng.uniform(0, 3600))
        order_id = SHOPIFY_ORDER_BASE_ID + n * 7919
        price = rng.randrange(100, 50_000)
        world.shopify_orders[str(order_id)] = {
            "id": order_id,
            "name": f"#{1001 + n}",
            "email": f"buyer{n}@example.com",
            "created_at": created.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
            "updated_at": updated.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
            "currency": "USD",
            "total_price": f"{price / 100:.2f}",
            "financial_status": rng.choice(["paid", "pending", "refunded", "authorized"]),
            "fulfillment_status": rng.choice([None, "fulfilled", "partial"]),
            "line_items": [
                {
                    "id": 466157049 + n,
                    "title": "IPod Nano - 8gb",
                    "quantity": 1,
                    "price": f"{price / 100:.2f}",
                }
            ],
        }


TWILIO_ACCOUNT = "AC" + "0" * 28 + "demo"
# a message's statuses (most delivered, some undelivered or failed); a call's, as its callbacks
# report them
TWILIO_MESSAGE_PATHS = (
    ("queued", "sent", "delivered"),
    ("queued", "sent", "undelivered"),
    ("queued", "failed"),
)
TWILIO_CALL_ENDS = ("completed", "busy", "no-answer", "failed")


def twilio_time(at: datetime) -> str:
    """Twilio's RFC 2822 dates."""
    return at.strftime("%a, %d %b %Y %H:%M:%S +0000")


def _twilio(
    world: World, rng: random.Random, messages: int, calls: int, start: datetime, span: timedelta
) -> None:
    for n in range(messages):
        sid = f"SM{uuid.UUID(int=rng.getrandbits(128)).hex}"
        path = rng.choices(TWILIO_MESSAGE_PATHS, weights=(8, 1, 1))[0]
        sent = start + timedelta(seconds=rng.uniform(0, span.total_seconds()))
        updated = sent + timedelta(seconds=rng.uniform(1, 90))
        world.twilio_paths[sid] = path
        world.twilio_messages[sid] = {
            "account_sid": TWILIO_ACCOUNT,
            "api_version": "2010-04-01",
            "body": f"Your code is {rng.randrange(100000, 999999)}",
            "date_created": twilio_time(sent),
            "date_sent": twilio_time(sent),
            "date_updated": twilio_time(updated),
            "direction": "outbound-api",
            "error_code": 30003 if path[-1] in ("undelivered", "failed") else None,
            "from": "+15005550006",
            "num_segments": "1",
            "price": "-0.00750",
            "price_unit": "USD",
            "sid": sid,
            "status": path[-1],
            "to": f"+1500555{n % 10000:04d}",
            "uri": f"/2010-04-01/Accounts/{TWILIO_ACCOUNT}/Messages/{sid}.json",
        }
    for n in range(calls):
        sid = f"CA{uuid.UUID(int=rng.getrandbits(128)).hex}"
        end = rng.choices(TWILIO_CALL_ENDS, weights=(7, 1, 1, 1))[0]
        began = start + timedelta(seconds=rng.uniform(0, span.total_seconds()))
        duration = rng.randrange(5, 600) if end == "completed" else 0
        world.twilio_paths[sid] = (end,)
        world.twilio_calls[sid] = {
            "account_sid": TWILIO_ACCOUNT,
            "api_version": "2010-04-01",
            "date_created": twilio_time(began),
            "date_updated": twilio_time(began + timedelta(seconds=duration + 1)),
            "direction": "outbound-api",
            "duration": str(duration),
            "end_time": twilio_time(began + timedelta(seconds=duration)),
            "from": "+15005550006",
            "sid": sid,
            "start_time": twilio_time(began),
            "status": end,
            "to": f"+1500555{n % 10000:04d}",
            "uri": f"/2010-04-01/Accounts/{TWILIO_ACCOUNT}/Calls/{sid}.json",
        }


GOPAY_PATHS = (("CREATED", "PAID"), ("CREATED", "CANCELED"), ("CREATED", "TIMEOUTED"))


def _gopay(world: World, rng: random.Random, count: int) -> None:
    for n in range(count):
        payment_id = str(3_000_006_500 + n * 7)
        path = rng.choices(GOPAY_PATHS, weights=(8, 1, 1))[0]
        world.gopay_paths[payment_id] = path
        world.gopay_payments[payment_id] = {
            "id": int(payment_id),
            "order_number": f"order-{1001 + n}",
            "state": path[-1],
            "amount": rng.randrange(1000, 500_000),
            "currency": rng.choice(["CZK", "EUR"]),
            "payment_instrument": "PAYMENT_CARD",
            "payer": {"contact": {"email": f"payer{n}@example.com"}},
            "target": {"type": "ACCOUNT", "goid": 8123456789},
            "lang": "CS",
            "gw_url": f"https://gw.sandbox.gopay.com/gw/v3/{payment_id}",
        }


def build_world(
    seed: int = 1,
    *,
    now: datetime | None = None,
    stripe_events: int = 300,
    github_deliveries: int = 200,
    shopify_orders: int = 120,
    span: timedelta = timedelta(hours=24),
    old_stripe_events: int = 0,
    github_failure_rate: float = 0.05,
    twilio_messages: int = 0,
    twilio_calls: int = 0,
    gopay_payments: int = 0,
    listed: Mapping[str, int] | None = None,
) -> World:
    """A reproducible world: the same seed and ``now`` give the same ids, times and states.

    ``listed``: events per kind with a stand-in (``connectors.sandbox.standin``), in the span.
    ``old_stripe_events`` adds events 31-40 days old: beyond Stripe's 30-day retention, so the
    sandbox will not list them (used to exercise retention gaps).
    """
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    rng = random.Random(seed)
    world = World(now=now)
    if old_stripe_events:
        _stripe(world, rng, old_stripe_events, now - timedelta(days=40), timedelta(days=9))
    _stripe(world, rng, stripe_events, now - span, span - timedelta(seconds=1))
    _github(
        world, rng, github_deliveries, now - span, span - timedelta(seconds=1), github_failure_rate
    )
    _shopify(world, rng, shopify_orders, now - span, span - timedelta(hours=1))
    # a generator of its own: Twilio's history leaves the other providers' ids as they were
    _twilio(
        world,
        random.Random(f"{seed}-twilio"),
        twilio_messages,
        twilio_calls,
        now - span,
        span - timedelta(minutes=15),
    )
    _gopay(world, random.Random(f"{seed}-gopay"), gopay_payments)
    for kind, count in (listed or {}).items():
        # a generator per kind: one kind's ids stay as they were when another's count changes
        stand_in = importlib.import_module(f"connectors.providers.{kind}.standin").STAND_IN
        history = stand_in.history(
            random.Random(f"{seed}-{kind}"), count, now - span, span - timedelta(minutes=5)
        )
        world.listed[kind] = history
    return world
