"""A small, exactly known operations history for the dashboard tests (times relative to now)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, insert, select

from reconciler.storage.models import (
    DELIVERIES,
    DISCREPANCIES,
    INBOX_EVENTS,
    PROCESSING_ATTEMPTS,
    QUEUE_SNAPSHOTS,
    RECON_RUNS,
)
from reconciler.storage.types import utcnow

CONFIG = """\
[database]
url = "{url}"

[reconcile]
stuck_after_seconds = 3600

[dashboard]
operator = "{operator}"
cache_ttl_seconds = 1
mask_fields = ["email", "card_last4"]
{dashboard_extra}
{auth}
[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"
{stripe_extra}

[[sources]]
name = "github"
kind = "github"
signing_secret_env = "T_GITHUB_SECRET"

[[sources]]
name = "shopify"
kind = "shopify"
signing_secret_env = "T_SHOPIFY_SECRET"

[[outbox.targets]]
name = "crm"
url = "http://127.0.0.1:9/in"
"""

AUTH = """
[dashboard.auth]
enabled = true
operators = ["ops@example.com"]
client_id = "hookledger"
client_secret_env = "T_OIDC_SECRET"
cookie_secret_env = "T_COOKIE_SECRET"
server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"
"""


def write_config(
    folder: Path,
    url: str,
    *,
    operator: str = "tester",
    auth: bool = False,
    stripe_extra: str = "",
    dashboard_extra: str = "",
) -> Path:
    path = folder / "config.toml"
    path.write_text(
        CONFIG.format(
            url=url,
            operator=operator,
            auth=AUTH if auth else "",
            stripe_extra=stripe_extra,
            dashboard_extra=dashboard_extra,
        )
    )
    return path


@dataclass(frozen=True)
class Expected:
    """What the seeded history must show (computed here, independently of the dashboard)."""

    accepted: dict[str, int]
    duplicate: dict[str, int]
    rejected: dict[str, int]
    processed: dict[str, int]
    failed: dict[str, int]
    dead_attempts: dict[str, int]
    pending_now: dict[str, int]
    open_by_kind: dict[str, dict[str, int]]


def _event(
    source: str, event_id: str, status: str, received: datetime, **kw: object
) -> dict[str, object]:
    body = {
        "id": event_id,
        "type": kw.get("event_type", "invoice.paid"),
        "data": {
            "object": {
                "id": kw.get("object_id", "in_1"),
                "customer_email": "jane@example.com",
                "client_secret": "pi_secret_123",
                "amount_paid": 500,
            }
        },
    }
    return {
        "source": source,
        "event_id": event_id,
        "event_type": kw.get("event_type", "invoice.paid"),
        "object_type": "invoice",
        "object_id": kw.get("object_id", "in_1"),
        "occurred_at": received,
        "body": json.dumps(body).encode(),
        "content_type": "application/json",
        "headers": {"stripe-signature": "<masked>"},
        "received_at": received,
        "origin": "webhook",
        "status": status,
        "attempts": kw.get("attempts", 1),
        "next_attempt_at": received if status in ("pending", "failed") else None,
        "last_error": kw.get("last_error"),
        "error_class": kw.get("error_class"),
        "processed_at": received if status == "processed" else None,
        "correlation_id": kw.get("correlation_id", f"corr-{event_id}"),
    }


def _same_keys(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    keys = {k for r in rows for k in r}
    return [{k: r.get(k) for k in keys} for r in rows]


def seed(engine: Engine) -> Expected:
    now = utcnow()
    m = timedelta(minutes=1)
    events = [
        _event("stripe", "evt_1", "processed", now - 10 * m, object_id="in_1"),
        _event("stripe", "evt_2", "processed", now - 9 * m, object_id="in_2"),
        _event("stripe", "evt_3", "processed", now - 8 * m, object_id="in_3"),
        _event("stripe", "evt_old", "pending", now - 120 * m, object_id="in_4", attempts=0),
        _event(
            "stripe",
            "evt_dead",
            "dead",
            now - 7 * m,
            object_id="in_5",
            attempts=3,
            last_error="handler refused: unknown plan 'gold'",
            error_class="permanent",
        ),
        _event("github", "gh_1", "processed", now - 6 * m, event_type="issues", object_id="42"),
        _event("github", "gh_2", "processed", now - 5 * m, event_type="issues", object_id="43"),
        # outside a 24-hour range: counted in 7 days only
        _event("github", "gh_old", "processed", now - timedelta(days=3), event_type="issues"),
    ]
    with engine.begin() as conn:
        conn.execute(insert(INBOX_EVENTS), events)
        ids = {
            r.event_id: r.id
            for r in conn.execute(select(INBOX_EVENTS.c.id, INBOX_EVENTS.c.event_id))
        }
        deliveries = []
        for e in events:
            deliveries.append(
                {
                    "source": e["source"],
                    "event_id": e["event_id"],
                    "delivery_id": f"d-{e['event_id']}",
                    "received_at": e["received_at"],
                    "outcome": "accepted",
                    "status_code": 200,
                }
            )
        for eid in ("evt_1", "evt_2"):
            deliveries.append(
                {
                    "source": "stripe",
                    "event_id": eid,
                    "delivery_id": f"d2-{eid}",
                    "received_at": now - 4 * m,
                    "outcome": "duplicate",
                    "status_code": 200,
                }
            )
        deliveries.append(
            {
                "source": "stripe",
                "event_id": None,
                "delivery_id": None,
                "received_at": now - 3 * m,
                "outcome": "rejected",
                "status_code": 401,
                "reason": "no valid signature",
            }
        )
        conn.execute(insert(DELIVERIES), _same_keys(deliveries))
        attempts = []
        for eid, outcome in [
            ("evt_1", "processed"),
            ("evt_2", "processed"),
            ("evt_3", "processed"),
            ("evt_dead", "failed"),
            ("evt_dead", "failed"),
            ("evt_dead", "dead"),
            ("gh_1", "processed"),
            ("gh_2", "processed"),
        ]:
            src = "github" if eid.startswith("gh") else "stripe"
            attempts.append(
                {
                    "inbox_event_id": ids[eid],
                    "source": src,
                    "attempt": 1,
                    "worker": "w1",
                    "started_at": now - 2 * m,
                    "finished_at": now - 2 * m,
                    "outcome": outcome,
                    "error_class": "permanent" if outcome == "dead" else None,
                    "error": "boom" if outcome != "processed" else None,
                }
            )
        conn.execute(insert(PROCESSING_ATTEMPTS), attempts)
        run = {
            "run_id": "run-1",
            "source": "stripe",
            "trigger": "cli",
            "status": "succeeded",
            "started_at": now - 30 * m,
            "finished_at": now - 29 * m,
            "window_start": now - timedelta(days=1),
            "window_end": now - 30 * m,
            "records_scanned": 7,
            "counts": {"missing": 1, "diverged": 1},
            "error": None,
            "detail": None,
        }
        conn.execute(insert(RECON_RUNS), [run])
        base = {
            "first_seen_at": now - 30 * m,
            "last_seen_at": now - 30 * m,
            "first_run_id": "run-1",
            "last_run_id": "run-1",
            "occurred_at": now - timedelta(hours=5),
        }
        conn.execute(
            insert(DISCREPANCIES),
            _same_keys(
                [
                    {
                        **base,
                        "source": "stripe",
                        "kind": "missing",
                        "record_key": "evt_missing_1",
                        "field": "",
                        "event_id": "evt_missing_1",
                        "event_type": "invoice.paid",
                        "object_type": "invoice",
                        "object_id": "in_9",
                        "amount": 500,
                        "currency": "usd",
                        "cause": "not_received",
                        "status": "open",
                        "source_value": '{"status": "paid"}',
                    },
                    {
                        **base,
                        "source": "stripe",
                        "kind": "diverged",
                        "record_key": "invoice:in_2",
                        "field": "status",
                        "event_id": "evt_2",
                        "event_type": "invoice.paid",
                        "object_type": "invoice",
                        "object_id": "in_2",
                        "source_value": '"paid"',
                        "local_value": '"open"',
                        "amount": 1200,
                        "currency": "eur",
                        "status": "open",
                    },
                    {
                        **base,
                        "source": "github",
                        "kind": "unapplied",
                        "record_key": "gh_1",
                        "field": "",
                        "event_id": "gh_1",
                        "event_type": "issues",
                        "object_type": "issue",
                        "object_id": "42",
                        "status": "resolved",
                        "resolution": "fixed by hand",
                    },
                ]
            ),
        )
        conn.execute(
            insert(QUEUE_SNAPSHOTS),
            [
                {
                    "at": now - k * m,
                    "source": "stripe",
                    "unprocessed": 1,
                    "oldest_age_seconds": 7200.0 - 60 * k,
                }
                for k in range(1, 6)
            ],
        )
    return Expected(
        accepted={"stripe": 5, "github": 2},  # 24 hours
        duplicate={"stripe": 2, "github": 0},
        rejected={"stripe": 1, "github": 0},
        processed={"stripe": 3, "github": 2},
        failed={"stripe": 2, "github": 0},
        dead_attempts={"stripe": 1, "github": 0},
        pending_now={"stripe": 1, "github": 0},
        open_by_kind={"stripe": {"diverged": 1, "missing": 1}},
    )
