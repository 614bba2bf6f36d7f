"""End to end: a real ``hookledger dashboard`` process driven by headless Chromium (Debian's
/usr/bin/chromium through Playwright; never ``playwright install``). Screenshots go to
``$HOOKLEDGER_ARTIFACTS`` (default ``var/test-artifacts``)."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS
from tests.dashboard_data import seed, write_config

CHROMIUM = os.environ.get("HOOKLEDGER_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("HOOKLEDGER_ARTIFACTS", "var/test-artifacts")).resolve()
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
REQUIRED = os.environ.get("HOOKLEDGER_E2E_REQUIRED") == "1"  # set by .ci/run: never skip there
if REQUIRED and not Path(CHROMIUM).exists():
    raise RuntimeError(f"HOOKLEDGER_E2E_REQUIRED=1 but there is no Chromium at {CHROMIUM}")
playwright_api = pytest.importorskip("playwright.sync_api")
playwright_api.expect.set_options(timeout=30_000)  # a loaded CI machine renders slowly
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_dashboard(config: Path, cwd: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A real ``hookledger dashboard`` process on a free port; yields its base URL."""
    port = _free_port()
    exe = shutil.which("hookledger", path=str(Path(sys.executable).parent)) or "hookledger"
    proc = subprocess.Popen(
        [exe, "dashboard", "--config", str(config), "--port", str(port)],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/_stcore/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"hookledger dashboard did not start:\n{err}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path / 'e2e.db'}"
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    engine.dispose()
    config = write_config(tmp_path, url)
    env = {"T_STRIPE_SECRET": "whsec_x", "T_GITHUB_SECRET": "x", "T_SHOPIFY_SECRET": "x"}
    with running_dashboard(config, tmp_path, env) as base:
        yield base, url


def _shot(page: object, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def _settled(page: object) -> None:
    """Wait until the script's rerun is over, so the elements looked up next are not replaced."""
    app = page.get_by_test_id("stApp")  # type: ignore[attr-defined]
    playwright_api.expect(app).to_have_attribute("data-test-script-state", "notRunning")


def _charts_render(page: object, count: int) -> None:
    """``count`` Plotly charts, each drawn (charts below the fold draw when scrolled to)."""
    expect = playwright_api.expect
    _settled(page)
    charts = page.get_by_test_id("stPlotlyChart")  # type: ignore[attr-defined]
    expect(charts).to_have_count(count)
    for i in range(count):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        expect(chart.locator(".js-plotly-plot")).to_have_count(1)
    page.get_by_role("heading").first.scroll_into_view_if_needed()  # type: ignore[attr-defined]


def _select(page: object, label: str, option: str) -> None:
    """Pick an option of a Streamlit selectbox / multiselect by its label."""
    box = page.get_by_label(label, exact=False)  # type: ignore[attr-defined]
    box.click()
    page.get_by_role("option", name=option, exact=False).first.click()  # type: ignore[attr-defined]


def test_overview_discrepancy_replay_audit_and_csv(dashboard: tuple[str, str]) -> None:
    base, db_url = dashboard
    expect = playwright_api.expect
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100}, accept_downloads=True)
        page.set_default_timeout(30_000)
        try:
            # Overview: KPIs and the five charts render
            page.goto(base)
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            _charts_render(page, 5)
            expect(page.get_by_text("past stuck_after_seconds")).to_be_visible()
            _shot(page, "overview")

            # Discrepancies: filter to diverged, inspect, replay its event with a reason
            page.get_by_test_id("stSidebar").get_by_role("link", name="Discrepancies").click()
            expect(page.get_by_role("heading", name="Discrepancies")).to_be_visible()
            expect(page.get_by_text("2 matching discrepancies;")).to_be_visible()
            _select(page, "Kind", "diverged")
            page.keyboard.press("Escape")
            expect(page.get_by_text("1 matching discrepancies;")).to_be_visible()

            with page.expect_download() as dl:
                page.get_by_role("button", name="Download CSV").click()
            rows = list(csv.reader(io.StringIO(Path(dl.value.path()).read_text("utf-8"))))
            assert rows[0][:4] == ["discrepancy_id", "source", "kind", "status"]
            assert [(r[1], r[2], r[7]) for r in rows[1:]] == [("stripe", "diverged", "in_2")]

            did = rows[1][0]
            box = page.get_by_label("Open discrepancy #")
            box.fill(did)
            box.press("Enter")
            expect(page.get_by_text("Source says")).to_be_visible()
            assert f"id={did}" in page.url  # the discrepancy's link
            form = page.get_by_test_id("stForm").filter(has_text="Yes, apply this action")
            form.get_by_label("Reason (required").fill("customer asked for a re-sync")
            form.get_by_text("Yes, apply this action to discrepancy").click()
            form.get_by_role("button", name="Apply").click()
            expect(page.get_by_text("processed → pending")).to_be_visible()
            _shot(page, "discrepancy-replayed")

            # Events: the replay is in the event's timeline, with who and why
            page.get_by_test_id("stSidebar").get_by_role("link", name="Events").click()
            search = page.get_by_label("Find by event id, object id, delivery id or correlation")
            search.fill("evt_2")
            search.press("Enter")
            expect(
                page.get_by_text("replay by anonymous@localhost: customer asked for a re-sync")
            ).to_be_visible()
            status_metric = page.get_by_test_id("stMetric").filter(has_text="Status")
            expect(status_metric).to_contain_text("pending")
            _shot(page, "event-timeline")
        finally:
            browser.close()

    engine = make_engine(db_url)
    with engine.connect() as conn:
        status = conn.execute(
            select(INBOX_EVENTS.c.status).where(INBOX_EVENTS.c.event_id == "evt_2")
        ).scalar_one()
        audit = conn.execute(
            select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.reason)
        ).all()
    engine.dispose()
    assert str(status) == "pending"
    assert [tuple(a) for a in audit] == [
        ("anonymous@localhost", "replay", "customer asked for a re-sync")
    ]


def test_demo_overview_renders_and_is_the_readme_screenshot(tmp_path: Path) -> None:
    """The demo's traffic on Overview in Chromium; with HOOKLEDGER_UPDATE_SCREENSHOT=1 the picture
    becomes docs/dashboard.png (the README's screenshot)."""
    from rich.console import Console

    from reconciler.demo.run import DemoOptions, run_demo

    directory = tmp_path / "var" / "demo"
    result = run_demo(
        DemoOptions(
            directory=directory,
            seed=2,
            events=1500,
            dashboard=False,
            console=Console(file=io.StringIO()),
        )
    )
    assert result.differences == []
    with running_dashboard(result.config_path, tmp_path) as base:
        expect = playwright_api.expect
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            # tall enough that the README's screenshot shows the day's charts too
            page = browser.new_page(viewport={"width": 1400, "height": 3300})
            page.set_default_timeout(30_000)
            try:
                # the bare address opens on Issues: the demo's dead letters were grouped when its
                # ops channel was told of them
                page.goto(base)
                expect(page.get_by_role("heading", name="Issues", exact=True)).to_be_visible()
                page.goto(f"{base}/?range=now-24h")  # the Overview's own link
                # the demo's day over the last 24 hours, a bar per 15 minutes
                expect(page.get_by_text("one bar per 15 min")).to_be_visible()
                _charts_render(page, 5)
                expect(page.get_by_text("Open discrepancies: dead").first).to_be_visible()
                page.wait_for_timeout(1500)  # let plotly finish drawing
                _shot(page, "demo-overview")
                # the outgoing side of the same day: the receipts the demo sent its mailer
                page.get_by_test_id("stSidebar").get_by_role("link", name="Outbox").click()
                expect(page.get_by_role("heading", name="mailer")).to_be_visible()
                expect(page.get_by_text("one bar per 15 min")).to_be_visible()
                sent = page.get_by_test_id("stMetric").filter(has_text="Sent in range")
                expect(sent).to_contain_text(str(len(result.receipts)))
                _charts_render(page, 3)
                expect(page.get_by_text("matching messages")).to_be_visible()
                page.wait_for_timeout(1500)
                _shot(page, "demo-outbox")
            finally:
                browser.close()
    if os.environ.get("HOOKLEDGER_UPDATE_SCREENSHOT") == "1":
        docs = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
        shutil.copyfile(ARTIFACTS / "demo-overview.png", docs)


def test_links_land_where_they_point(dashboard: tuple[str, str]) -> None:
    """A pasted event permalink shows the event's timeline in the first viewport (1440 x 900), the
    list one click back; a run's link opens what it found; ``range=now-1h`` restores its range."""
    base, _ = dashboard
    expect = playwright_api.expect
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/events?source=stripe&event_id=evt_2")
            timeline = page.get_by_text("Timeline", exact=True)
            expect(timeline).to_be_visible()
            _settled(page)
            box = timeline.bounding_box()
            assert box is not None and box["y"] + box["height"] < 900, box  # no scrolling
            assert page.evaluate("window.scrollY") == 0
            expect(page.get_by_text("Find by event id")).to_have_count(0)  # the list is not above
            _shot(page, "event-permalink")
            page.get_by_role("button", name="← All events").click()
            expect(page.get_by_text("Find by event id")).to_be_visible()
            assert "event_id=" not in page.url

            page.goto(f"{base}/runs")
            link = page.get_by_role("link", name="stripe", exact=False).filter(has_text="(2)")
            expect(link).to_be_visible()
            link.click()
            expect(page.get_by_role("heading", name="Discrepancies")).to_be_visible()
            expect(page.get_by_role("textbox", name="Found by run")).to_have_value("run-1")
            expect(page.get_by_text("3 matching discrepancies;")).to_be_visible()  # any status
            assert "run=run-1" in page.url and "status=all" in page.url
            _shot(page, "run-findings")

            page.goto(f"{base}/?range=now-1h")
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            _settled(page)
            expect(page.get_by_role("combobox", name="Range")).to_have_value("Last hour")
            assert "range=now-1h" in page.url
            page.goto(f"{base}/?range=now-90m")
            _settled(page)
            expect(page.get_by_role("combobox", name="Range")).to_have_value("Last 90 minutes")
            assert "range=now-90m" in page.url
        finally:
            browser.close()
