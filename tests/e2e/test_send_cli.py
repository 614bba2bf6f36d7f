"""``hookledger send`` over real loopback HTTP, on SQLite and PostgreSQL: every sample of every kind
that has them, signed with the source's own secret, is accepted by the receiver and stored with its
type; a wrong secret is refused (exit 1, the reason printed); what cannot be sent is one line."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
import stripe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select
from twilio.request_validator import RequestValidator

from reconciler.cli.main import main
from reconciler.config import load_config
from reconciler.inbox.receiver import create_app
from reconciler.sources import provider
from reconciler.storage.models import INBOX_EVENTS

ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA000"
DISCORD_PUBLIC = "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c"
KINDS = ("stripe", "github", "shopify", "standard", "generic", "slack", "twilio", "adyen")


def _config(tmp_path: Path, db_url: str, port: int = 8000) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[database]
url = "{db_url}"

[receiver]
port = {port}

[[sources]]
name = "stripe"
kind = "stripe"
signing_secret_env = "T_STRIPE_SECRET"

[[sources]]
name = "github"
kind = "github"
signing_secret_env = "T_GITHUB_SECRET"

[[sources]]
name = "shopify"
kind = "shopify"
signing_secret_env = "T_SHOPIFY_SECRET"

[[sources]]
name = "standard"
kind = "standard"
signing_secret_env = "T_STANDARD_SECRET"

[[sources]]
name = "generic"
kind = "generic"
signing_secret_env = "T_GENERIC_SECRET"
signature_header = "X-Acme-Signature"
signature_prefix = "sha256="
id_json_path = "meta.id"
type_json_path = "meta.type"

[[sources]]
name = "slack"
kind = "slack"
signing_secret_env = "T_SLACK_SECRET"

[[sources]]
name = "twilio"
kind = "twilio"
signing_secret_env = "T_TWILIO_TOKEN"

[[sources]]
name = "adyen"
kind = "adyen"
signing_secret_env = "T_ADYEN_HMAC"

[[sources]]
name = "discord"
kind = "discord"
public_key = "{DISCORD_PUBLIC}"
"""
    )
    return path


@pytest.fixture(autouse=True)
def _more_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_SLACK_SECRET", "slack-signing-secret")
    monkeypatch.setenv("T_TWILIO_TOKEN", "twilio-auth-token")
    monkeypatch.setenv("T_ADYEN_HMAC", ADYEN_KEY)


def test_every_sample_of_every_kind_is_accepted_and_stored_with_its_type(
    db_url: str, engine: Engine, serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, db_url)
    loaded = load_config(str(cfg))
    receiver = serve(create_app(loaded.settings, engine))
    expected: dict[str, set[str]] = {}
    for kind in KINDS:
        catalogue = provider(kind).samples
        assert catalogue is not None
        for event_type in catalogue.types:
            to = f"{receiver.url}/webhooks/{kind}"
            code = main(["send", kind, "--type", event_type, "--to", to, "--config", str(cfg)])
            out = capsys.readouterr().out
            assert code == 0, (kind, event_type, out)
            assert "HTTP 200" in out, (kind, event_type, out)
            # Twilio is answered as it expects (TwiML or an empty 200), not with the JSON status
            assert "accepted" in out or kind == "twilio", (kind, event_type, out)
            expected.setdefault(kind, set()).add(event_type)
    with engine.connect() as conn:
        stored: dict[str, set[str]] = {}
        for source, event_type in conn.execute(
            select(INBOX_EVENTS.c.source, INBOX_EVENTS.c.event_type)
        ):
            stored.setdefault(source, set()).add(event_type)
    # each stored under the type it was sent as (GitHub's push has no action; Twilio's type is
    # its resource and status; Adyen's an unsuccessful one .failed)
    for kind, types in expected.items():
        assert stored[kind] == types, kind


def test_count_file_and_the_answers_that_are_not_2xx(
    db_url: str,
    engine: Engine,
    serve: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = str(_config(tmp_path, db_url))
    receiver = serve(create_app(load_config(cfg).settings, engine))
    to = f"{receiver.url}/webhooks/stripe"
    assert main(["send", "stripe", "--count", "3", "--to", to, "--config", cfg]) == 0
    assert capsys.readouterr().out.count("HTTP 200 accepted") == 3

    body = tmp_path / "paid.json"
    body.write_text(
        json.dumps(
            {
                "id": "evt_from_file",
                "object": "event",
                "type": "invoice.paid",
                "created": 1764547200,
                "data": {"object": {"id": "in_f", "object": "invoice"}},
            }
        )
    )
    args = ["send", "stripe", "--file", str(body), "--to", to, "--config", cfg]
    assert main(args) == 0
    assert "evt_from_file: HTTP 200 accepted" in capsys.readouterr().out
    assert main(args) == 0
    assert "evt_from_file: HTTP 200 duplicate" in capsys.readouterr().out

    monkeypatch.setenv("T_STRIPE_SECRET", "whsec_not_the_receivers")
    assert main(["send", "stripe", "--to", to, "--config", cfg]) == 1
    out = capsys.readouterr().out
    assert "HTTP 401" in out and "1 of 1 refused by the receiver" in out

    assert main(["send", "discord", "--to", to, "--config", cfg]) == 2
    assert "only the provider can sign" in capsys.readouterr().err
    assert main(["send", "stripe", "--type", "nope", "--to", to, "--config", cfg]) == 2
    assert "the 'stripe' samples are invoice.paid" in capsys.readouterr().err
    assert main(["send", "nope", "--config", cfg]) == 2
    assert "SOURCE 'nope'" in capsys.readouterr().err
    nobody = "http://127.0.0.1:9/webhooks/stripe"
    assert main(["send", "stripe", "--to", nobody, "--wait", "0", "--config", cfg]) == 2
    assert "cannot be reached" in capsys.readouterr().err
    assert main(["send", "adyen", "--file", str(body), "--to", to, "--config", cfg]) == 2
    assert "use --type" in capsys.readouterr().err


@given(option=st.sampled_from(["--type", "--count", "--file", "--to"]), value=st.text(max_size=30))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_option_value_is_answered_or_one_line_and_exit_2(
    option: str, value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cfg = _config(tmp_path_factory.mktemp("send"), "sqlite://", port=9)  # nobody listens on 9
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["send", "stripe", "--wait", "0", option, value, "--config", str(cfg)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    assert code == 2  # nothing listens: every call that gets as far as sending is refused too
    assert "Traceback" not in err.getvalue() and err.getvalue().strip()


def _recording(app: Any, seen: list[dict[str, str]]) -> Any:
    """The app, noting each request's headers as they arrived."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    return asgi


def test_send_to_a_url_signs_that_url_for_twilio_whatever_public_url_says(
    db_url: str, engine: Engine, serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receiving = load_config(
        str(_config(tmp_path, db_url))
    ).settings  # checks the URL it is called at
    seen: list[dict[str, str]] = []
    receiver = serve(_recording(create_app(receiving, engine), seen))
    cli = tmp_path / "cli"
    cli.mkdir()
    cfg = _config(cli, db_url)
    cfg.write_text(
        cfg.read_text().replace(
            "[receiver]\n", '[receiver]\npublic_url = "https://hooks.example.com"\n'
        )
    )
    to = f"{receiver.url}/webhooks/twilio?tenant=7"
    assert main(["send", "twilio", "--to", to, "--config", str(cfg)]) == 0, capsys.readouterr()
    assert "HTTP 200" in capsys.readouterr().out
    with engine.connect() as conn:
        body = conn.execute(select(INBOX_EVENTS.c.body)).scalar_one()
    params = dict(parse_qsl(body.decode()))
    validator = RequestValidator("twilio-auth-token")
    signature = seen[-1]["x-twilio-signature"]
    assert validator.validate(to, params, signature)  # Twilio's own check, at the URL called
    assert not validator.validate(
        "https://hooks.example.com/webhooks/twilio?tenant=7", params, signature
    )


def test_send_to_a_thin_stripe_source_sends_a_thin_event(
    db_url: str, engine: Engine, serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, db_url)
    cfg.write_text(
        cfg.read_text().replace(
            'signing_secret_env = "T_STRIPE_SECRET"\n',
            'signing_secret_env = "T_STRIPE_SECRET"\npayload_style = "thin"\n',
        )
    )
    seen: list[dict[str, str]] = []
    receiver = serve(_recording(create_app(load_config(str(cfg)).settings, engine), seen))
    to = f"{receiver.url}/webhooks/stripe"
    code = main(["send", "stripe", "--type", "invoice.paid", "--to", to, "--config", str(cfg)])
    assert code == 0 and "HTTP 200 accepted" in capsys.readouterr().out
    with engine.connect() as conn:
        row = conn.execute(select(INBOX_EVENTS)).one()
    # Stripe's own parser takes only a thin event (a v1 snapshot is a ValueError there)
    secret = os.environ["T_STRIPE_SECRET"]
    notification = stripe.StripeClient("sk_test_unused").parse_event_notification(
        row.body, seen[-1]["stripe-signature"], secret
    )
    assert notification.type == "v1.invoice.paid" and notification.id == row.event_id
    assert (row.object_type, row.object_id) == ("invoice", notification.related_object.id)
