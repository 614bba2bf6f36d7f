"""``hookledger deliveries list|resend`` on SQLite and PostgreSQL, over real loopback HTTP: a stored
delivery re-sent ten times to a second receiver is accepted once and a duplicate nine times, its
business table written once (the design notes' test of a handler)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from reconciler.cli.main import main
from reconciler.inbox.receiver import create_app
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import INBOX_EVENTS
from tests.conftest import make_settings
from tests.deliveries import github_delivery, stripe_delivery
from tests.e2e.test_cli import write_config


def _config(tmp_path: Path, db_url: str) -> str:
    path = Path(write_config(tmp_path, db_url))
    path.write_text(
        path.read_text()
        + """
[[sources]]
name = "github"
kind = "github"
signing_secret_env = "T_GITHUB_SECRET"
"""
    )
    return str(path)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one())


def test_a_delivery_resent_ten_times_is_accepted_once_and_nine_times_a_duplicate(
    db_url: str,
    engine: Engine,
    serve: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = _config(tmp_path, db_url)
    production = serve(create_app(make_settings(db_url), engine))
    headers, body = stripe_delivery("evt_resend_me")
    assert httpx.post(f"{production.url}/webhooks/stripe", content=body, headers=headers).is_success
    gh_headers, gh_body = github_delivery(event="issues", payload={"action": "opened"})
    assert httpx.post(
        f"{production.url}/webhooks/github", content=gh_body, headers=gh_headers
    ).is_success
    forged = httpx.post(
        f"{production.url}/webhooks/stripe",
        content=body,
        headers={**headers, "Stripe-Signature": "t=1,v1=00"},
    )
    assert forged.status_code == 400 or forged.status_code == 401

    assert main(["deliveries", "list", "--json", "--config", cfg]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["total"] == 3
    by_outcome = {d["outcome"]: d for d in listed["deliveries"]}
    assert set(by_outcome) == {"accepted", "rejected"}
    stripe_id = next(d["id"] for d in listed["deliveries"] if d["event_id"] == "evt_resend_me")
    github_id = next(
        d["id"]
        for d in listed["deliveries"]
        if d["source"] == "github" and d["outcome"] == "accepted"
    )
    assert main(["deliveries", "list", "--outcome", "rejected", "--config", cfg]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and "rejected" in out[1] and out[-1] == "1 of 1"
    # the header names the id column that 'deliveries resend' takes, aligned with the ids
    assert out[0].split()[:5] == ["DELIVERY", "RECEIVED", "(UTC)", "SOURCE", "OUTCOME"]
    assert out[0].index("DELIVERY") + len("DELIVERY") == len(out[1].split()[0]) + out[1].index(
        out[1].split()[0]
    )

    # the developer's own receiver, a database of its own
    local_url = f"sqlite:///{tmp_path / 'local.db'}"
    local = make_engine(local_url)
    upgrade(local)
    try:
        receiver = serve(create_app(make_settings(local_url), local))
        to = f"{receiver.url}/webhooks/stripe"
        assert (
            main(
                [
                    "deliveries",
                    "resend",
                    str(stripe_id),
                    "--to",
                    to,
                    "--times",
                    "10",
                    "--config",
                    cfg,
                ]
            )
            == 0
        )
        answers = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()[1:]]
        assert answers == ["HTTP 200 accepted"] + ["HTTP 200 duplicate"] * 9
        assert _count(local) == 1
        # GitHub's own headers go with it (its event name), signed afresh
        to = f"{receiver.url}/webhooks/github"
        assert main(["deliveries", "resend", str(github_id), "--to", to, "--config", cfg]) == 0
        assert "HTTP 200 accepted" in capsys.readouterr().out
        with local.connect() as conn:
            types = set(conn.execute(select(INBOX_EVENTS.c.event_type)).scalars())
        assert types == {"invoice.paid", "issues.opened"}
    finally:
        local.dispose()

    rejected_id = by_outcome["rejected"]["id"]
    assert main(["deliveries", "resend", str(rejected_id), "--to", to, "--config", cfg]) == 2
    assert "stored no event" in capsys.readouterr().err
    assert main(["deliveries", "resend", "999999", "--to", to, "--config", cfg]) == 2
    assert "no delivery 999999" in capsys.readouterr().err
    assert (
        main(
            [
                "deliveries",
                "resend",
                str(stripe_id),
                "--to",
                "http://127.0.0.1:9/x",
                "--config",
                cfg,
            ]
        )
        == 2
    )
    assert "cannot be reached" in capsys.readouterr().err


@pytest.fixture(scope="module")
def quiet_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("deliveries")
    url = f"sqlite:///{path / 'db.sqlite'}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return str(write_config(path, url))


@given(
    command=st.sampled_from(
        [
            ["deliveries", "list", "--since"],
            ["deliveries", "list", "--outcome"],
            ["deliveries", "list", "--limit"],
            ["deliveries", "resend", "1", "--to"],
            ["deliveries", "resend", "1", "--to", "http://127.0.0.1:9/x", "--times"],
        ]
    ),
    value=st.text(max_size=30),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_option_value_is_a_result_or_one_line_and_exit_2(
    command: list[str], value: str, quiet_config: str
) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*command, value, "--config", quiet_config])
        except SystemExit as exc:  # argparse's refusal of the value
            code = exc.code if isinstance(exc.code, int) else 2
    assert code in (0, 2)
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().strip()
