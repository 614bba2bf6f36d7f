"""What a notification says (pure: no I/O): a fact found in the database, rendered as a title,
lines and links into the dashboard, then shaped for each target kind (Slack-compatible JSON, a
generic JSON webhook body, an e-mail)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from reconciler.ops.display import count, money
from reconciler.ops.links import page_url

KIND_TITLES = {
    "discrepancies": "new discrepancies",
    "dead_letters": "new dead letters",
    "run_failed": "reconciliation failed",
    "run_missed": "scheduled reconciliation missed",
    "issue": "new or reopened issue",
    "test": "test notification",
}


@dataclass(frozen=True)
class Fact:
    """Something to tell: ``key`` names it uniquely (a target is told about a key once)."""

    kind: str
    key: str
    subject: str  # the source ("" when it is about the schedule)
    at: datetime  # when it happened
    data: dict[str, Any]  # JSON-safe details, stored with the notification


@dataclass(frozen=True)
class Message:
    title: str
    lines: list[str]
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, absolute URL)


def render(kind: str, data: dict[str, Any], base_url: str, held_back: int = 0) -> Message:
    """The message for a stored fact; ``held_back``: notifications the rate limit kept from this
    target since its last one, said at the end so nothing is silently lost."""
    message = _RENDERERS.get(kind, _render_unknown)(data, base_url.rstrip("/"))
    if held_back:
        message.lines.append(
            f"{count(held_back, 'other notification')} held back by this target's max_per_hour "
            "since the last one: see the dashboard."
        )
    return message


def _by_kind(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(counts.items()) if n) or "none"


def _render_discrepancies(data: dict[str, Any], base: str) -> Message:
    source = data["source"]
    new = {k: int(v) for k, v in data.get("new", {}).items()}
    total = sum(new.values())
    lines = [
        f"Reconciliation of {source} (run {data['run_id']}, {data.get('trigger', 'schedule')}) "
        f"found {count(total, 'new discrepancy', 'new discrepancies')}: {_by_kind(new)}.",
        f"Open now: {_by_kind({k: int(v) for k, v in data.get('open', {}).items()})}.",
    ]
    impact = data.get("money", [])
    if impact:
        parts = [
            f"{row['kind']} {money(int(row['amount']), row['currency'])} "
            f"({count(int(row['records']), 'record')})"
            for row in impact
        ]
        lines.append("Money in the new ones: " + "; ".join(parts) + ".")
    links = [("Open discrepancies", page_url("discrepancies", base, source=[source]))]
    links += [
        (f"{kind} ({n:,})", page_url("discrepancies", base, source=[source], kind=[kind]))
        for kind, n in sorted(new.items())
        if n
    ]
    return Message(
        f"{source}: {count(total, 'new discrepancy', 'new discrepancies')}", lines, links
    )


def _render_dead_letters(data: dict[str, Any], base: str) -> Message:
    source = data["source"]
    new = int(data["new"])
    lines = [
        f"{count(new, 'event')} of {source} became dead letters"
        + (f" since {data['since']}" if data.get("since") else "")
        + f" (the newest at {data['until']}); {count(int(data.get('dead_now', new)), 'dead letter')} "
        "in the inbox now.",
    ]
    types = data.get("types", {})
    if types:
        lines.append("By event type: " + _by_kind(types) + ".")
    lines.append("Nothing retries them: replay them once the cause is fixed.")
    received = data.get("received") or [None, None]  # absent on notices queued before it was
    span = {"from": received[0], "to": received[1]}
    links = [("Open dead letters", page_url("dead_letters", base, source=[source], **span))]
    return Message(f"{source}: {count(new, 'new dead letter')}", lines, links)


def _render_run_failed(data: dict[str, Any], base: str) -> Message:
    source = data["source"]
    lines = [
        f"The {data.get('trigger', 'schedule')} reconciliation of {source} (run {data['run_id']}) "
        f"failed at {data.get('finished_at') or 'an unknown time'}: {data.get('error') or 'no error recorded'}",
        "Nothing was checked by this run: what it would have found is still unknown.",
    ]
    links = [("Open runs", page_url("runs", base, source=[source]))]
    return Message(f"{source}: reconciliation failed", lines, links)


def _render_run_missed(data: dict[str, Any], base: str) -> Message:
    sources = ", ".join(data.get("sources", [])) or "every source"
    lines = [
        f"The reconciliation scheduled for {data['slot']} ({data.get('schedule', '')} "
        f"{data.get('timezone', '')}) did not start within {data.get('grace_seconds', 0):g} s "
        f"for {sources}: was a scheduler running?",
        "Run it now with 'hookledger reconcile', or check 'hookledger schedule' on its host.",
    ]
    return Message(
        "scheduled reconciliation missed", lines, [("Open runs", page_url("runs", base))]
    )


ISSUE_KINDS = {
    "dead_event": "dead events",
    "outbox_failure": "failed deliveries",
    "reconcile_failure": "failed reconciliations",
    "discrepancy": "open discrepancies",
}


def _render_issue(data: dict[str, Any], base: str) -> Message:
    source, reopened = data["source"], int(data.get("reopened", 0))
    what = ISSUE_KINDS.get(data["kind"], data["kind"])
    of_type = f" ({data['type']})" if data.get("type") else ""
    lines = [
        f"{what.capitalize()} of {source}{of_type}: {data['signature']}",
        f"{count(int(data['count']), 'failure')} so far, first at {data['first_seen']}, the last at "
        f"{data['last_seen']}"
        + (f"; reopened {reopened} time{'s' if reopened > 1 else ''}." if reopened else "."),
        "Told once per issue (and again if it comes back after being resolved), not per failure.",
    ]
    title = f"{source}: {'issue reopened' if reopened else 'new issue'} #{data['issue']}"
    return Message(title, lines, [("Open the issue", page_url("issues", base, id=data["issue"]))])


def _render_test(data: dict[str, Any], base: str) -> Message:
    return Message(
        "test notification",
        [f"A test from 'hookledger notify --test' at {data['at']}: this target works."],
        [("Open the dashboard", page_url("", base).rstrip("/") or base)],
    )


def _render_unknown(data: dict[str, Any], base: str) -> Message:
    return Message("notification", [str(data)])


_RENDERERS = {
    "discrepancies": _render_discrepancies,
    "dead_letters": _render_dead_letters,
    "run_failed": _render_run_failed,
    "run_missed": _render_run_missed,
    "issue": _render_issue,
    "test": _render_test,
}


def slack_body(message: Message) -> dict[str, Any]:
    """An incoming-webhook body Slack renders with blocks, and every Slack-compatible receiver
    (Mattermost, Rocket.Chat, ...) shows from ``text``."""
    text = "\n".join(
        [f"*hookledger: {_slack_escape(message.title)}*", *map(_slack_escape, message.lines)]
    )
    links = " · ".join(f"<{url}|{_slack_escape(label)}>" for label, url in message.links)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}
    ]
    if links:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": links[:3000]}]})
    return {"text": text + (f"\n{links}" if links else ""), "blocks": blocks}


def _slack_escape(text: str) -> str:
    """Slack's three control characters (its docs: escape &, < and > in mrkdwn)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webhook_body(kind: str, data: dict[str, Any], message: Message, at: datetime) -> dict[str, Any]:
    """The generic webhook's JSON: the Standard Webhooks payload shape (type, timestamp, data)."""
    return {
        "type": f"hookledger.{kind}",
        "timestamp": at.isoformat(),
        "data": {
            **data,
            "title": message.title,
            "text": "\n".join(message.lines),
            "links": {label: url for label, url in message.links},
        },
    }


def email_message(message: Message, sender: str, to: tuple[str, ...]) -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"] = f"[hookledger] {message.title}"
    mail["From"] = sender
    mail["To"] = ", ".join(to)
    body = "\n\n".join(message.lines)
    if message.links:
        body += "\n\n" + "\n".join(f"{label}: {url}" for label, url in message.links)
    mail.set_content(body + "\n")
    return mail
