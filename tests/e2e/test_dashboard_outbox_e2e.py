"""A pasted outbox permalink in headless Chromium (a real ``hookledger dashboard`` process): the
message and its attempts in the first 1440 x 900 viewport, above 60 other messages, the list one
click back with the target's success rate and who paused it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from reconciler.ops import outbox as outbox_ops
from reconciler.outbox import add_message
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import OUTBOX
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

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]
ENV = {"T_STRIPE_SECRET": "whsec_x", "T_GITHUB_SECRET": "x", "T_SHOPIFY_SECRET": "x"}


@pytest.fixture
def outbox_dashboard(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The seeded history, the two crm messages, 60 more pending ones, crm paused by ada."""
    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    ids = _outbox(engine)
    with engine.begin() as conn:
        for n in range(60):
            add_message(conn, "crm", {"order": 100 + n}, key=f"crm-more-{n}")
        assert conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.key == "crm-dead")).scalar_one()
    outbox_ops.pause(engine, "crm", actor="ada@example.com", reason="CRM maintenance")
    engine.dispose()
    with running_dashboard(write_config(tmp_path, url), tmp_path, ENV) as base:
        yield base, ids["crm-dead"]


def test_an_outbox_permalink_shows_its_message_in_the_first_viewport(
    outbox_dashboard: tuple[str, int],
) -> None:
    base, message_id = outbox_dashboard
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
            expect(page.get_by_text("62 matching messages")).to_be_visible()
            _shot(page, "outbox-list")
        finally:
            browser.close()
