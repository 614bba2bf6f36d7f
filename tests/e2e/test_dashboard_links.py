"""The URL is the state: every in-app link kind, clicked after another item was open in the same
browser session, opens the item it names (headless Chromium against a real ``hookledger dashboard``
process). One pasted link starts the session; everything after is a click."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS
from reconciler.storage.types import utcnow
from tests.dashboard_data import seed, write_config
from tests.e2e.test_dashboard_app import _seed_conflict
from tests.e2e.test_dashboard_e2e import (
    ARTIFACTS,
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
def linked(tmp_path: Path, pg_db: str) -> Iterator[dict[str, object]]:
    """On PostgreSQL: the seeded history plus a second open discrepancy of invoice in_2 that names
    evt_3, so the diverged discrepancy (evt_2) lists another discrepancy of its object."""
    url = pg_db
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    now = utcnow()
    with engine.begin() as conn:
        diverged = conn.execute(
            select(DISCREPANCIES.c.id).where(DISCREPANCIES.c.kind == "diverged")
        ).scalar_one()
        other = conn.execute(
            insert(DISCREPANCIES)
            .values(
                source="stripe",
                kind="unapplied",
                record_key="evt_3",
                field="",
                event_id="evt_3",
                event_type="invoice.paid",
                object_type="invoice",
                object_id="in_2",
                status="open",
                first_seen_at=now - timedelta(minutes=20),
                last_seen_at=now - timedelta(minutes=20),
                first_run_id="run-1",
                last_run_id="run-1",
                detail={},
            )
            .returning(DISCREPANCIES.c.id)
        ).scalar_one()
    engine.dispose()
    config = write_config(tmp_path, url)
    with running_dashboard(config, tmp_path, ENV) as base:
        yield {"base": base, "diverged": diverged, "other": other}


def _pick_row(page: object, key: str, row: int) -> None:
    """Select ``row`` (0-based) of the dataframe with widget key ``key`` by its row marker."""
    frame = page.locator(f".st-key-{key}")  # type: ignore[attr-defined]
    frame.scroll_into_view_if_needed()
    box = frame.bounding_box()
    assert box is not None
    # the grid's header row and each data row are 35 px high; the row marker is the first 30 px
    frame.click(position={"x": 15, "y": 35 + 35 * row + 17})
    _settled(page)


def _nav(page: object, name: str) -> None:
    page.get_by_test_id("stSidebar").get_by_role("link", name=name).click()  # type: ignore[attr-defined]
    _settled(page)


def _event_heading(page: object, event_id: str) -> object:
    return page.get_by_role("heading", name=re.compile(rf"\b{event_id}$"))  # type: ignore[attr-defined]


def test_every_in_app_link_opens_what_it_names(linked: dict[str, object]) -> None:
    expect = playwright_api.expect
    base, diverged, other = linked["base"], linked["diverged"], linked["other"]
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1200})
        page.set_default_timeout(30_000)
        try:
            # the only pasted link: an event permalink, evt_1 open
            page.goto(f"{base}/events?source=stripe&event_id=evt_1")
            expect(_event_heading(page, "evt_1")).to_be_visible()
            _settled(page)

            # a discrepancy picked from the list, then its "Timeline of" link: evt_2, not evt_1
            _nav(page, "Discrepancies")
            expect(page.get_by_role("heading", name="Discrepancies")).to_be_visible()
            _pick_row(page, "d_table", 0)  # newest first: the discrepancy of evt_3 (20 minutes ago)
            expect(page.get_by_role("heading", name=f"Discrepancy #{other}:")).to_be_visible()
            page.get_by_role("link", name="Timeline of evt_3").click()
            expect(_event_heading(page, "evt_3")).to_be_visible()
            expect(page).to_have_url(re.compile(r"event_id=evt_3\b"))

            # "Other discrepancies of this object": from #other to #diverged, then its timeline
            _nav(page, "Discrepancies")
            _pick_row(page, "d_table", 0)
            expect(page.get_by_role("heading", name=f"Discrepancy #{other}:")).to_be_visible()
            page.get_by_role("link", name=re.compile(rf"^#{diverged} diverged")).click()
            expect(page.get_by_role("heading", name=f"Discrepancy #{diverged}:")).to_be_visible()
            expect(page).to_have_url(re.compile(rf"\bid={diverged}\b"))
            page.get_by_role("link", name="Timeline of evt_2").click()
            expect(_event_heading(page, "evt_2")).to_be_visible()

            # Overview's "Events in this range": the list, not the event open before
            _nav(page, "Overview")
            page.get_by_role("link", name="Events in this range").first.click()
            expect(page.get_by_text("Find by event id")).to_be_visible()
            expect(_event_heading(page, "evt_2")).to_have_count(0)
            expect(page).not_to_have_url(re.compile("event_id="))

            # a pending-events link: the list filtered by status, with the one pending event
            _nav(page, "Overview")
            page.get_by_role("link", name="1 pending event").first.click()
            expect(page.get_by_text(re.compile(r"^1-1 of 1 events"))).to_be_visible()
            expect(page).to_have_url(re.compile("status=pending"))

            # dead letters' "Timeline of" after another event was open
            _nav(page, "Dead letters")
            _pick_row(page, "dl_events", 0)
            page.get_by_role("link", name="Timeline of evt_dead").click()
            expect(_event_heading(page, "evt_dead")).to_be_visible()

            # a discrepancy's "Every event of": the object's events (evt_2 is in_2's only one)
            _nav(page, "Discrepancies")
            _pick_row(page, "d_table", 1)
            expect(page.get_by_role("heading", name=f"Discrepancy #{diverged}:")).to_be_visible()
            page.get_by_role("link", name="Every event of in_2").click()
            expect(_event_heading(page, "evt_2")).to_be_visible()

            # a run's findings after a discrepancy was open: the run's list, not the discrepancy
            _nav(page, "Runs")
            link = page.get_by_role("link", name="stripe", exact=False).filter(has_text="(2)")
            link.click()
            expect(page.get_by_role("textbox", name="Found by run")).to_have_value("run-1")
            expect(page.get_by_role("heading", name=re.compile("^Discrepancy #"))).to_have_count(0)

            # the health strip's "Open" (dead letters) after a filtered dead-letter view
            _nav(page, "Overview")
            page.get_by_role("link", name="Open").first.click()  # the strip's first: dead events
            expect(page.get_by_role("heading", name="Dead letters")).to_be_visible()
            expect(page.get_by_text(re.compile(r"^1 event selected"))).to_be_visible()
            expect(page.get_by_role("link", name="Timeline of evt_dead")).to_have_count(0)
            _shot(page, "links-last-hop")

            # an issue picked from the Issues page, then its "Timeline of" link
            _nav(page, "Issues")
            _pick_row(page, "iss_table", 0)
            expect(
                page.get_by_role("heading", name=re.compile(r"^Issue #\d+: open"))
            ).to_be_visible()
            _settled(page)
            _shot(page, "issues-page")
            page.get_by_role("link", name="Timeline of evt_dead").click()
            expect(_event_heading(page, "evt_dead")).to_be_visible()
            if os.environ.get("HOOKLEDGER_UPDATE_SCREENSHOT") == "1":
                docs = Path(__file__).resolve().parents[2] / "docs" / "issues.png"
                shutil.copyfile(ARTIFACTS / "issues-page.png", docs)
        finally:
            browser.close()


def test_a_discrepancy_permalink_opens_with_the_discrepancy_first(
    linked: dict[str, object],
) -> None:
    """At 1440 x 900 the pasted discrepancy's heading and its source-beside-local values are in the
    first screen, above the filters and the list; "← All discrepancies" leaves the list."""
    expect = playwright_api.expect
    base, diverged = linked["base"], linked["diverged"]
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/discrepancies?id={diverged}")
            heading = page.get_by_role("heading", name=f"Discrepancy #{diverged}: diverged")
            expect(heading).to_be_visible()
            _settled(page)
            box = heading.bounding_box()
            filters = page.get_by_text("Sort by").bounding_box()
            assert box is not None and filters is not None
            assert box["y"] + box["height"] < 900, box
            assert box["y"] < filters["y"], (box, filters)  # the item above the list's filters
            assert page.evaluate("window.scrollY") == 0
            _shot(page, "discrepancy-permalink")
            page.get_by_role("button", name="← All discrepancies").click()
            expect(heading).to_have_count(0)
            expect(page.get_by_text(re.compile(r"^\d+ matching discrepancies"))).to_be_visible()
            expect(page).not_to_have_url(re.compile(r"\bid="))
        finally:
            browser.close()


def test_an_actions_result_is_shown_next_to_the_action(linked: dict[str, object]) -> None:
    """On a long page the result of "Apply" appears just below the form, not at the top of the
    page out of view."""
    expect = playwright_api.expect
    base, diverged = linked["base"], linked["diverged"]
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/discrepancies?id={diverged}")
            _settled(page)
            page.get_by_test_id("stRadio").get_by_text("ignore", exact=True).click()
            form = page.get_by_test_id("stForm").filter(has_text="Yes, apply this action")
            form.get_by_label("Reason (required").fill("a known gap in the CRM")
            form.get_by_text("Yes, apply this action").click()
            form.get_by_role("button", name="Apply").click()
            done = page.get_by_text(f"discrepancy {diverged} marked ignored")
            expect(done).to_be_visible()
            _settled(page)
            expect(done).to_have_count(1)
            result, button = done.bounding_box(), form.bounding_box()
            assert result is not None and button is not None
            assert 0 <= result["y"] - (button["y"] + button["height"]) < 200, (result, button)
            done.scroll_into_view_if_needed()
            _shot(page, "result-next-to-action")
        finally:
            browser.close()


def test_a_conflict_is_compared_and_the_later_delivery_applied(
    linked: dict[str, object], pg_db: str
) -> None:
    """The conflict job: an event id delivered again with other content; its discrepancy's link
    shows both versions (masked) and "apply later delivery" stores the later body."""
    expect = playwright_api.expect
    engine = make_engine(pg_db)
    try:
        _seed_conflict(engine)
        with engine.connect() as conn:
            conflict = conn.execute(
                select(DISCREPANCIES.c.id).where(
                    DISCREPANCIES.c.kind == "conflict",
                    DISCREPANCIES.c.field == "data.object.status",
                )
            ).scalar_one()
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            page.set_default_timeout(30_000)
            try:
                page.goto(f"{linked['base']}/discrepancies?id={conflict}")
                heading = f"Discrepancy #{conflict}: conflict"
                expect(page.get_by_role("heading", name=heading)).to_be_visible()
                expect(page.get_by_text("Later delivery has")).to_be_visible()
                _settled(page)
                expect(page.get_by_text("bob@example.com")).to_have_count(0)  # masked
                page.get_by_test_id("stRadio").get_by_text("apply later delivery").click()
                form = page.get_by_test_id("stForm").filter(has_text="Yes, apply this action")
                form.get_by_label("Reason (required").fill("the refund went through")
                form.get_by_text("Yes, apply this action").click()
                form.get_by_role("button", name="Apply").click()
                applied = page.get_by_text(re.compile(r"with the later delivery's body"))
                expect(applied).to_be_visible()
                _shot(page, "conflict-applied")
            finally:
                browser.close()
        with engine.connect() as conn:
            stored = conn.execute(
                select(INBOX_EVENTS.c.body).where(INBOX_EVENTS.c.event_id == "evt_conflict")
            ).scalar_one()
        assert b"refunded" in stored
    finally:
        engine.dispose()
