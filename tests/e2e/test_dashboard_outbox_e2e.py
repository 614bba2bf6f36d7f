"""A pasted outbox permalink in headless Chromium (a real ``hookledger dashboard`` process): the
message and its attempts in the first 1440 x 900 viewport, above 60 other messages, the list one
click back with the target's success rate and who paused it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from reconciler.ops import outbox as outbox_ops
from reconciler.outbox import add_message
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import OUTBOX
from reconciler.storage.types import utcnow
from tests.dashboard_data import seed, write_config
from tests.e2e.test_dashboard_app import _outbox
from tests.e2e.test_dashboard_e2e import (
    CHROMIUM,
    LAUNCH_ARGS,
    _settled,
    _shot,
    playwright_api,
    running_dashboard,
)
from tests.e2e.test_dashboard_jobs import _act

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]
ENV = {"T_STRIPE_SECRET": "whsec_x", "T_GITHUB_SECRET": "x", "T_SHOPIFY_SECRET": "x"}
DAYS_3 = timedelta(days=3)


@pytest.fixture
def outbox_dashboard(tmp_path: Path, pg_db: str) -> Iterator[tuple[str, int, Engine]]:
    """On PostgreSQL: the seeded history, the two crm messages, 60 more pending ones, crm paused
    by ada, and two messages that went dead 10 minutes and 3 days ago."""
    engine = make_engine(pg_db)
    upgrade(engine)
    seed(engine)
    ids = _outbox(engine)
    now = utcnow()
    with engine.begin() as conn:
        for n in range(60):
            add_message(conn, "crm", {"order": 100 + n}, key=f"crm-more-{n}")
        for key, ago in (("crm-died-recently", timedelta(minutes=10)), ("crm-died-3d", DAYS_3)):
            add_message(conn, "crm", {"order": 9}, key=key)
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.key == key)
                .values(status="dead", attempts=5, dead_at=now - ago, last_error="HTTP 503")
            )
    outbox_ops.pause(engine, "crm", actor="ada@example.com", reason="CRM maintenance")
    try:
        with running_dashboard(write_config(tmp_path, pg_db), tmp_path, ENV) as base:
            yield base, ids["crm-dead"], engine
    finally:
        engine.dispose()


def _status(engine: Engine, key: str) -> str:
    with engine.connect() as conn:
        return str(conn.execute(select(OUTBOX.c.status).where(OUTBOX.c.key == key)).scalar_one())


def test_an_outbox_permalink_shows_its_message_in_the_first_viewport(
    outbox_dashboard: tuple[str, int, Engine],
) -> None:
    base, message_id, _ = outbox_dashboard
    expect = playwright_api.expect
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/outbox?message={message_id}&range=now-6h")
            expect(
                page.get_by_role("heading", name=f"Message #{message_id} to crm")
            ).to_be_visible()
            _settled(page)
            attempts = page.get_by_test_id("stDataFrame").first  # its attempts
            expect(attempts).to_be_visible()
            box = attempts.bounding_box()
            assert box is not None and box["y"] + box["height"] < 900, box  # no scrolling
            assert page.evaluate("window.scrollY") == 0
            expect(page.get_by_role("heading", name="Messages", exact=True)).to_have_count(0)
            expect(page.get_by_text("**Paused**")).to_have_count(0)  # markdown, not its source
            expect(page.get_by_text("Paused by ada@example.com at").first).to_be_visible()
            _shot(page, "outbox-permalink")

            page.get_by_role("button", name="← All messages").click()
            expect(page.get_by_role("heading", name="Messages", exact=True)).to_be_visible()
            _settled(page)
            assert "message=" not in page.url and "range=now-6h" in page.url
            expect(page.get_by_role("heading", name="crm (paused)")).to_be_visible()
            rate = page.get_by_test_id("stMetric").filter(has_text="Success rate in range")
            expect(rate).to_contain_text("50.0%")
            expect(page.get_by_text("64 matching messages")).to_be_visible()
            _shot(page, "outbox-list")
        finally:
            browser.close()


def test_an_operator_retries_a_message_and_recovers_what_went_dead_since(
    outbox_dashboard: tuple[str, int, Engine],
) -> None:
    """The operator's outbox job from a pasted permalink: retry the dead message it names, back
    to the list, then "Recover since" (a day back by default) sends again only what went dead
    since then — the message that died 10 minutes ago, not the one of three days ago."""
    base, message_id, engine = outbox_dashboard
    expect = playwright_api.expect
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1400})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/outbox?message={message_id}")
            expect(
                page.get_by_role("heading", name=f"Message #{message_id} to crm")
            ).to_be_visible()
            confirm = f"Yes, send message #{message_id} again with its key"
            _act(page, "the CRM accepts e-mails again", confirm, "Retry this message")
            done = "1 outbox message back to pending (same keys)"
            expect(page.get_by_text(done)).to_be_visible()
            assert _status(engine, "crm-dead") == "pending"

            page.get_by_role("button", name="← All messages").click()
            expect(page.get_by_role("heading", name="Recover since")).to_be_visible()
            expect(page.get_by_text("1 message of crm went dead since")).to_be_visible()
            _act(page, "the 503s are over", "Yes, send this message again", "Recover")
            recovered = page.get_by_text("1 dead message of crm back to pending (same keys)")
            expect(recovered).to_be_visible()
            _settled(page)
            shown = recovered.bounding_box()
            section = page.get_by_role("heading", name="Recover since").bounding_box()
            assert shown is not None and section is not None
            assert 0 < shown["y"] - section["y"] < 300, (shown, section)  # where its form was
            recovered.scroll_into_view_if_needed()
            _shot(page, "outbox-recovered")
            assert _status(engine, "crm-died-recently") == "pending"
            assert _status(engine, "crm-died-3d") == "dead"  # before the default day back
        finally:
            browser.close()
