"""Notifications' pure parts: what each message says, each target kind's shape, the schedule's
last slot, and the [[notify]] tables' validation (hypothesis: any table loads or is one line
naming it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.config import parse_settings
from reconciler.errors import ConfigError
from reconciler.notify.notices import email_message, render, slack_body, webhook_body
from reconciler.notify.send import message_id

BASE = "https://ops.example.com/hookledger/"
RUN = {
    "source": "stripe",
    "run_id": "r-1",
    "trigger": "schedule",
    "finished_at": "2026-12-03T02:04:00+00:00",
    "new": {"missing": 3, "diverged": 1, "stuck": 0},
    "open": {"missing": 5, "diverged": 1},
    "money": [
        {"source": "stripe", "currency": "eur", "kind": "missing", "records": 3, "amount": 1163061},
        {"source": "stripe", "currency": "jpy", "kind": "diverged", "records": 1, "amount": 5000},
    ],
}


def test_new_discrepancies_say_counts_money_and_link_each_kind() -> None:
    message = render("discrepancies", RUN, BASE)
    assert message.title == "stripe: 4 new discrepancies"
    assert message.lines == [
        "Reconciliation of stripe (run r-1, schedule) found 4 new discrepancies: diverged 1, "
        "missing 3.",
        "Open now: diverged 1, missing 5.",
        "Money in the new ones: missing €11,630.61 (3 records); diverged ¥5,000 (1 record).",
    ]
    assert message.links == [
        ("Open discrepancies", "https://ops.example.com/hookledger/discrepancies?source=stripe"),
        (
            "diverged (1)",
            "https://ops.example.com/hookledger/discrepancies?source=stripe&kind=diverged",
        ),
        (
            "missing (3)",
            "https://ops.example.com/hookledger/discrepancies?source=stripe&kind=missing",
        ),
    ]


def test_held_back_notifications_are_said_at_the_end() -> None:
    message = render(
        "run_failed", {"source": "github", "run_id": "r-2", "error": "HTTP 503"}, BASE, 1
    )
    assert message.lines[-1] == (
        "1 other notification held back by this target's max_per_hour since the last one: "
        "see the dashboard."
    )
    assert message.links == [("Open runs", "https://ops.example.com/hookledger/runs?source=github")]


def test_slack_escapes_what_a_provider_sent() -> None:
    data = {
        "source": "shop",
        "new": 2,
        "until": "2026-12-03T09:00:00+00:00",
        "since": None,
        "dead_now": 2,
        "types": {"<!channel> & <https://evil.example|click>": 2},
    }
    body = slack_body(render("dead_letters", data, BASE))
    assert "<!channel>" not in body["text"] and "&lt;!channel&gt; &amp; &lt;https" in body["text"]
    assert body["blocks"][0]["type"] == "section"
    assert body["blocks"][1]["elements"][0]["text"] == (
        "<https://ops.example.com/hookledger/dead_letters?source=shop|Open dead letters>"
    )


def test_the_generic_webhook_is_the_standard_webhooks_payload_shape() -> None:
    at = datetime(2026, 12, 3, 2, 5, tzinfo=UTC)
    message = render("discrepancies", RUN, BASE)
    body = webhook_body("discrepancies", RUN, message, at)
    assert set(body) == {"type", "timestamp", "data"}
    assert (body["type"], body["timestamp"]) == ("hookledger.discrepancies", at.isoformat())
    assert body["data"]["new"] == RUN["new"] and body["data"]["title"] == message.title
    json.dumps(body)  # JSON as it is
    assert message_id("hook", "discrepancies:r-1") == message_id("hook", "discrepancies:r-1")
    assert message_id("hook", "discrepancies:r-1") != message_id("hook2", "discrepancies:r-1")


def test_an_email_has_a_subject_and_the_links_in_plain_text() -> None:
    mail = email_message(render("discrepancies", RUN, BASE), "hl@example.com", ("a@x.io", "b@x.io"))
    assert mail["Subject"] == "[hookledger] stripe: 4 new discrepancies"
    assert mail["To"] == "a@x.io, b@x.io"
    text = mail.get_content()
    assert (
        "missing (3): https://ops.example.com/hookledger/discrepancies?source=stripe&kind=missing"
        in text
    )


def _load(*targets: dict[str, Any]) -> str:
    try:
        parse_settings(
            {"sources": [{"name": "stripe", "kind": "stripe"}], "notify": list(targets)}, "<t>"
        )
    except ConfigError as exc:
        return str(exc)
    return "ok"


def test_each_kind_takes_its_own_keys_and_says_which_is_wrong() -> None:
    mail = {"name": "m", "kind": "email", "smtp_host": "smtp.example.com", "from": "h@x.io"}
    assert _load({**mail, "to": ["ops@x.io"]}) == "ok"
    assert (
        _load(mail) == "<t>: table [notify][0] (name 'm'): Value error, kind 'email' needs key 'to'"
    )
    assert _load({**mail, "to": ["ops@x.io"], "url": "https://x.io"}).endswith(
        "kind 'email' takes no key 'url'"
    )
    assert _load(
        {**mail, "to": ["ops@x.io"], "username": "u", "password_env": "P", "smtp_security": "none"}
    ).endswith("a password is never sent without TLS: set smtp_security")
    assert _load(
        {"name": "s", "kind": "slack", "url_env": "U", "signing_secret_env": "S"}
    ).endswith("kind 'slack' takes no signing_secret_env (Slack's URL is the secret)")
    assert _load({"name": "w", "kind": "webhook", "url": "https://a.io", "url_env": "U"}).endswith(
        "kind 'webhook' needs key 'url' or 'url_env' (one of them)"
    )
    assert _load(
        {"name": "w", "kind": "webhook", "url": "https://a.io", "sources": ["shop"]}
    ).endswith("notify target 'w': source 'shop' is not configured")
    assert _load(
        {"name": "w", "kind": "webhook", "url": "https://a.io", "from": "a@b.io"}
    ).endswith("kind 'webhook' takes no key 'from'")


TEXT = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.integers(),
    st.booleans(),
    st.lists(st.text(max_size=8), max_size=3),
)
KEYS = st.sampled_from(
    [
        "name", "kind", "on", "sources", "max_per_hour", "dead_letters_every_minutes",
        "max_attempts", "timeout_seconds", "url", "url_env", "signing_secret_env", "smtp_host",
        "smtp_port", "smtp_security", "username", "password_env", "from", "to", "bogus",
    ]
)  # fmt: skip
VALUES = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "slack", "webhook", "email", "https://hooks.example.com/x", "ops@example.com",
            ["ops@example.com"], ["dead_letters"], ["stripe"], "starttls", "none", 587, 0, -1,
        ]
    ),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(tables=st.lists(st.dictionaries(KEYS, VALUES, max_size=8), max_size=3))
def test_any_notify_table_loads_or_is_one_line_naming_it(tables: list[dict[str, Any]]) -> None:
    data = {"sources": [{"name": "stripe", "kind": "stripe"}], "notify": tables}
    try:
        loaded = parse_settings(data, "<fuzz>")
    except ConfigError as exc:
        for line in str(exc).splitlines():
            assert line.startswith(("<fuzz>: table [notify]", "<fuzz>: table top level")), line
            assert "Traceback" not in line
        return
    for target in loaded.notify:  # what loads is whole: a kind's required keys are there
        if target.kind == "email":
            assert target.smtp_host and target.sender and target.to
        else:
            assert bool(target.url) != bool(target.url_env)


@settings(max_examples=120, deadline=None)
@given(
    status=st.integers(min_value=100, max_value=599),
    body=st.text(max_size=300),
    kind=st.sampled_from(["slack", "webhook"]),
)
def test_any_answer_from_a_target_is_an_outcome_of_one_line_without_its_secret_url(
    status: int, body: str, kind: str
) -> None:
    """Whatever a target answers: sent on 2xx only, one line otherwise, another attempt only
    where one may succeed, and a Slack URL (a secret) never in the error."""
    import httpx

    from reconciler.config import NotifySettings
    from reconciler.notify.send import Sender

    secret_url = "https://hooks.slack.example/services/T0/B0/SECRETPART"
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text=body))
    target = NotifySettings.model_validate({"name": "t", "kind": kind, "url_env": "T_URL"})
    environ = {"T_URL": secret_url}
    data = {"at": "2026-12-03T09:00:00+00:00"}
    with httpx.Client(transport=transport) as client:
        outcome = Sender(client, environ).send(
            target, "test:1", "test", data, render("test", data, BASE), datetime.now(UTC)
        )
    assert outcome.ok == (200 <= status < 300)
    if outcome.ok:
        assert outcome.error == ""
        return
    assert len(outcome.error.splitlines()) == 1, outcome.error
    assert "SECRETPART" not in outcome.error and outcome.error.startswith("the URL in T_URL")
    assert outcome.retry == (status in (408, 429) or status >= 500)


def test_a_malformed_signing_secret_is_given_up_at_once_and_nothing_is_sent() -> None:
    import httpx

    from reconciler.config import NotifySettings
    from reconciler.notify.send import Sender

    sent: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200))
    target = NotifySettings.model_validate(
        {"name": "w", "kind": "webhook", "url": "https://x.example/h", "signing_secret_env": "S"}
    )
    data = {"at": "2026-12-03T09:00:00+00:00"}
    with httpx.Client(transport=transport) as client:
        outcome = Sender(client, {"S": "not-a-whsec-secret"}).send(
            target, "test:1", "test", data, render("test", data, BASE), datetime.now(UTC)
        )
    assert (outcome.ok, outcome.retry, sent) == (False, False, [])
    assert outcome.error == (
        "notify target 'w': the secret in S is not a Standard Webhooks secret "
        "(whsec_ followed by base64)"
    )
