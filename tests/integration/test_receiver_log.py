"""The receiver logs each stored delivery at INFO, over real loopback HTTP on SQLite and PostgreSQL:
source, event id, type, outcome and milliseconds, through the project's formatter (text and JSON);
never the signing secret, the signature or the body."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from reconciler.inbox.receiver import create_app
from reconciler.logs import configure_logging
from tests.conftest import SECRETS, make_settings
from tests.deliveries import stripe_delivery


@pytest.fixture
def log_output(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """What the configured handler writes to standard error; the root logger restored after."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)

    def configure(fmt: str) -> io.StringIO:
        buffer = io.StringIO()
        monkeypatch.setattr("sys.stderr", buffer)
        configure_logging("INFO", fmt)
        return buffer

    yield configure


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_each_delivery_is_one_info_line_with_its_outcome_and_time(
    db_url: str, engine: Engine, serve: Any, log_output: Any, fmt: str
) -> None:
    receiver = serve(create_app(make_settings(db_url), engine))
    buffer = log_output(fmt)
    headers, body = stripe_delivery()
    with httpx.Client(base_url=receiver.url) as client:
        for _ in range(2):  # accepted, then a duplicate
            assert client.post("/webhooks/stripe", content=body, headers=headers).is_success
    event_id = json.loads(body)["id"]
    event_type = json.loads(body)["type"]
    lines = [line for line in buffer.getvalue().splitlines() if "reconciler.inbox.receiver" in line]
    assert len(lines) == 2, buffer.getvalue()
    for line, outcome in zip(lines, ["accepted", "duplicate"], strict=True):
        if fmt == "json":
            record = json.loads(line)
            assert record["level"] == "INFO" and record["message"] == f"delivery {outcome}"
            assert (record["source"], record["event_id"]) == ("stripe", event_id)
            assert (record["event_type"], record["outcome"]) == (event_type, outcome)
            assert isinstance(record["ms"], float) and record["ms"] >= 0
        else:
            assert f" INFO reconciler.inbox.receiver: delivery {outcome} source=stripe " in line
            assert f"event_id={event_id}" in line and f"event_type={event_type} " in line
            assert f"outcome={outcome} ms=" in line
    text = buffer.getvalue()
    assert SECRETS["stripe"] not in text and headers["Stripe-Signature"] not in text
    assert body.decode()[:40] not in text
