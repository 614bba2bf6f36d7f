"""The on-call jobs, each started from a pasted link in headless Chromium against a real
``hookledger dashboard`` process: a discrepancy link (the very first request after the server
starts) → backfill → the event's timeline; a bulk replay of a 1,000-event dead-letter group with
one audit entry; resolve → the page shows the new state without a reload; the hung database."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, make_url, select

from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import (
    AUDIT_LOG,
    DISCREPANCIES,
    INBOX_EVENTS,
    ISSUES,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
)
from tests.conftest import start_server
from tests.dashboard_data import _event, seed, write_config
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
DEAD_GROUP = 1000
ENV = {
    "T_STRIPE_SECRET": "whsec_x",
    "T_GITHUB_SECRET": "x",
    "T_SHOPIFY_SECRET": "x",
    "T_SBX_KEY": "sk_test_sandbox",
}


@pytest.fixture
def on_call(tmp_path: Path, pg_db: str) -> Iterator[dict[str, object]]:
    """On PostgreSQL: the seeded history, a sandbox Stripe to backfill from, a missing event the
    inbox never got, a dead-letter group of 1,000 events, and the dashboard on all of it."""
    now = datetime.now(UTC).replace(microsecond=0)
    world = build_world(
        5, now=now - timedelta(minutes=15), stripe_events=20, github_deliveries=0, shopify_orders=0
    )
    sandbox = start_server(Sandbox(world).app)
    url = pg_db
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    lost = world.stripe_events[3]
    with engine.begin() as conn:
        missing_id = conn.execute(
            insert(DISCREPANCIES)
            .values(
                source="stripe",
                kind="missing",
                record_key=lost["id"],
                field="",
                event_id=lost["id"],
                event_type=lost["type"],
                cause="not_received",
                status="open",
                first_seen_at=now,
                last_seen_at=now,
                first_run_id="run-1",
                last_run_id="run-1",
                detail={},
            )
            .returning(DISCREPANCIES.c.id)
        ).scalar_one()
        diverged_id = conn.execute(
            select(DISCREPANCIES.c.id).where(DISCREPANCIES.c.kind == "diverged")
        ).scalar_one()
        conn.execute(
            insert(INBOX_EVENTS),
            [
                _event(
                    "stripe",
                    f"evt_bulk_{i:04d}",
                    "dead",
                    now - timedelta(minutes=90, seconds=i),
                    event_type="invoice.bulk",
                    object_id=f"in_bulk_{i}",
                    last_error="PermanentError: the CRM refused the plan",
                    error_class="permanent",
                    attempts=5,
                )
                for i in range(DEAD_GROUP)
            ],
        )
        bulk = conn.execute(
            select(INBOX_EVENTS.c.id).where(INBOX_EVENTS.c.event_type == "invoice.bulk")
        ).scalars()
        conn.execute(  # the attempt that dead-lettered each one (what issues group)
            insert(PROCESSING_ATTEMPTS),
            [
                {
                    "inbox_event_id": row_id,
                    "source": "stripe",
                    "attempt": 5,
                    "worker": "w1",
                    "started_at": now - timedelta(minutes=80),
                    "finished_at": now - timedelta(minutes=80),
                    "outcome": "dead",
                    "error_class": "permanent",
                    "error": f"PermanentError: the CRM refused plan '{row_id}'",
                }
                for row_id in bulk
            ],
        )
    extra = f'base_url = "{sandbox.url}"\napi_key_env = "T_SBX_KEY"'
    config = write_config(tmp_path, url, stripe_extra=extra)
    try:
        with running_dashboard(config, tmp_path, ENV) as base:
            yield {
                "base": base,
                "engine": engine,
                "lost": lost["id"],
                "missing_id": missing_id,
                "diverged_id": diverged_id,
                "sandbox": sandbox,
            }
    finally:
        sandbox.stop()
        engine.dispose()


def _browser(pw: object) -> object:
    return pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)  # type: ignore[attr-defined]


def _act(page: object, reason: str, confirm: str, button: str) -> None:
    """Fill the form whose confirmation box says ``confirm`` and submit it."""
    _settled(page)  # a rerun still drawing keeps the previous run's forms beside the new ones
    form = page.get_by_test_id("stForm").filter(has_text=confirm)  # type: ignore[attr-defined]
    playwright_api.expect(form).to_have_count(1)
    form.get_by_label("Reason (required").fill(reason)
    form.get_by_text(confirm).click()
    form.get_by_role("button", name=button).click()


def test_operator_jobs_from_pasted_links(on_call: dict[str, object]) -> None:
    expect = playwright_api.expect
    base, engine = str(on_call["base"]), on_call["engine"]
    lost, missing_id, diverged_id = on_call["lost"], on_call["missing_id"], on_call["diverged_id"]
    with playwright_api.sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 1500, "height": 1400})  # type: ignore[attr-defined]
        page.set_default_timeout(30_000)
        try:
            # 1. a discrepancy link as the very first request: the full app, the missing event
            page.goto(f"{base}/discrepancies?id={missing_id}")
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar.get_by_role("link", name="Dead letters")).to_be_visible()
            expect(sidebar.get_by_text("dead_letters")).to_have_count(0)  # no bare file names
            expect(
                page.get_by_role("heading", name=f"Discrepancy #{missing_id}: missing")
            ).to_be_visible()
            # the inbox never got it: no replay offered, a backfill is
            expect(page.get_by_text(f"{lost} is not in the inbox.")).to_be_visible()
            radios = page.get_by_test_id("stRadio")
            expect(radios.get_by_text("backfill")).to_be_visible()
            expect(radios.get_by_text("replay", exact=True)).to_have_count(0)
            radios.get_by_text("backfill").click()
            _act(page, "the webhook never came", "Yes, apply this action", "Apply")
            expect(page.get_by_text(f"stripe {lost}: accepted")).to_be_visible()
            _settled(page)
            page.get_by_role("link", name=f"Timeline of {lost}").click()
            expect(page.get_by_role("heading", name=lost)).to_be_visible()
            expect(page.get_by_text("stored from backfill")).to_be_visible()
            assert f"event_id={lost}" in page.url
            _shot(page, "job-backfill-timeline")

            # 2. a dead-letter group of 1,000 by link: counted, confirmed, replayed, one audit entry
            page.goto(f"{base}/dead_letters?type=invoice.bulk")
            selection = "dead events with type invoice.bulk"
            expect(page.get_by_text(f"{DEAD_GROUP:,} events selected: {selection}")).to_be_visible()
            _act(
                page,
                "the CRM accepts the plan again",
                f"Yes, replay {DEAD_GROUP:,} events",
                f"Replay {DEAD_GROUP:,} events",
            )
            done = f"{DEAD_GROUP:,} events put back to pending ({selection}; same event ids"
            expect(page.get_by_text(done)).to_be_visible()
            _shot(page, "job-bulk-replay")

            # 3. resolve from a link: the header and the list change at once, no reload
            page.goto(f"{base}/discrepancies?id={diverged_id}")
            heading = page.get_by_role("heading", name=f"Discrepancy #{diverged_id}: diverged")
            expect(heading).to_contain_text("(open)")
            caption = page.get_by_text(re.compile(r"^[\d,]+ matching discrepancies; showing"))
            before = caption.inner_text()
            page.get_by_test_id("stRadio").get_by_text("resolve", exact=True).click()
            _act(page, "fixed in the CRM by hand", "Yes, apply this action", "Apply")
            expect(page.get_by_text(f"discrepancy {diverged_id} marked resolved")).to_be_visible()
            expect(heading).to_contain_text("(resolved)")
            expect(caption).not_to_have_text(before)
            after = caption.inner_text()
            assert int(before.split()[0]) - int(after.split()[0]) == 1, (before, after)
            _shot(page, "job-resolved")
        finally:
            browser.close()  # type: ignore[attr-defined]

    with engine.connect() as conn:  # type: ignore[attr-defined]
        statuses = (
            conn.execute(
                select(INBOX_EVENTS.c.status).where(INBOX_EVENTS.c.event_type == "invoice.bulk")
            )
            .scalars()
            .all()
        )
        bulk = conn.execute(
            select(AUDIT_LOG.c.actor, AUDIT_LOG.c.reason, AUDIT_LOG.c.detail).where(
                AUDIT_LOG.c.action == "replay.bulk"
            )
        ).all()
        per_event = conn.execute(
            select(AUDIT_LOG.c.id).where(AUDIT_LOG.c.event_id.like("evt_bulk_%"))
        ).all()
    assert sorted(set(map(str, statuses))) == ["pending"] and len(statuses) == DEAD_GROUP
    [(actor, reason, detail)] = bulk
    assert (actor, reason, detail["count"]) == (
        "anonymous@localhost",
        "the CRM accepts the plan again",
        DEAD_GROUP,
    )
    assert len(detail["events"]) == DEAD_GROUP and detail["selection"]["types"] == ["invoice.bulk"]
    assert per_event == []


def test_a_failed_reconcile_and_an_issue_from_pasted_links(on_call: dict[str, object]) -> None:
    """4. "Reconcile now" against a provider that went away: the error beside the button, the run
    red on the strip with its first line. 5. dead letters of the last two hours by link. 6. the
    dead-letter group as one issue: acknowledged, then resolved, each audited."""
    expect = playwright_api.expect
    base, engine, sandbox = str(on_call["base"]), on_call["engine"], on_call["sandbox"]
    sandbox.stop()  # type: ignore[attr-defined]
    with playwright_api.sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 1500, "height": 1400})  # type: ignore[attr-defined]
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{base}/runs?source=stripe")
            button = page.get_by_role("button", name="Reconcile stripe now")
            button.click()
            failed = page.get_by_text(re.compile(r"^stripe: .*(refused|connect|unreachable)", re.I))
            expect(failed).to_be_visible(timeout=60_000)
            _settled(page)
            shown, near = failed.bounding_box(), button.bounding_box()
            assert shown is not None and near is not None and 0 < shown["y"] - near["y"] < 300
            _shot(page, "job-reconcile-failed")
            page.goto(base)  # nothing grouped yet: the Overview
            strip = page.get_by_text(re.compile(r"Reconciled: stripe: failed"))
            expect(strip).to_be_visible()
            _shot(page, "job-reconcile-failed-strip")

            page.goto(f"{base}/dead_letters?range=now-2h&type=invoice.bulk")
            expect(page.get_by_text(f"{DEAD_GROUP:,} events selected")).to_be_visible()
            page.goto(f"{base}/dead_letters?range=now-30m&type=invoice.bulk")
            expect(page.get_by_text("0 events selected")).to_be_visible()  # they died 90 min ago

            page.goto(f"{base}/issues")  # the page groups what failed since the last pass
            expect(page.get_by_role("heading", name="Issues")).to_be_visible()
            _settled(page)
            with engine.connect() as conn:  # type: ignore[attr-defined]
                issue_id, members = conn.execute(
                    select(ISSUES.c.id, ISSUES.c.count).where(
                        ISSUES.c.kind == "dead_event", ISSUES.c.event_type == "invoice.bulk"
                    )
                ).one()
            assert members == DEAD_GROUP  # 1,000 dead letters, one issue
            page.goto(f"{base}/issues?id={issue_id}")  # its permalink
            heading = page.get_by_role("heading", name=re.compile(rf"^Issue #{issue_id}: open"))
            expect(heading).to_be_visible()
            page.get_by_role("button", name="Acknowledge").click()
            expect(page.get_by_role("heading", name=re.compile(r": acknowledged"))).to_be_visible()
            _act(page, "the CRM plan is back", "Yes, resolve issue", "Resolve")
            expect(page.get_by_role("heading", name=re.compile(r": resolved"))).to_be_visible()
            _settled(page)
            _shot(page, "job-issue-resolved")
        finally:
            browser.close()  # type: ignore[attr-defined]
    with engine.connect() as conn:  # type: ignore[attr-defined]
        actions = (
            conn.execute(
                select(AUDIT_LOG.c.action)
                .where(AUDIT_LOG.c.action.like("issue.%"))
                .order_by(AUDIT_LOG.c.id)
            )
            .scalars()
            .all()
        )
        runs = conn.execute(select(RECON_RUNS.c.status)).scalars().all()
    assert actions[-2:] == ["issue.acknowledge", "issue.resolve"], actions
    assert "failed" in [str(r) for r in runs]


class HangingProxy:
    """A TCP proxy to PostgreSQL that can start hanging: from then on it accepts connections and
    never answers, and stops passing bytes on the open ones (a frozen database server)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.hung = threading.Event()
        self.stop = threading.Event()
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by close()
                return
            self.sockets.append(client)
            if self.hung.is_set():
                continue  # held open, never answered
            upstream = socket.create_connection(self.upstream)
            self.sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                if self.hung.is_set():
                    continue  # swallowed: the server went silent
                dst.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.acceptor.join(timeout=5)
        # shutdown() before close(): close() alone neither wakes a thread blocked in recv() nor
        # ends the TCP connection, and PostgreSQL would keep the dashboard's open transaction
        # (and its locks on the test schema) for as long as the test process lives.
        for sock in [self.server, *self.sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


# The spinner is shown only while the check waits, which a loaded machine can make shorter than a
# poll of the page: every page load records whether it ever appeared.
SAW_CHECKING = """
new MutationObserver(() => {
  if (document.body && document.body.innerText.includes("Checking the database")) {
    window.__sawChecking = true;
  }
}).observe(document, {childList: true, subtree: true, characterData: true});
"""


def test_a_hung_database_is_an_error_within_the_timeout(tmp_path: Path, pg_url: str) -> None:
    """The dashboard starts on a healthy PostgreSQL, which then freezes: every page says so within
    the connection timeout instead of staying blank."""
    parsed = make_url(pg_url)
    engine = make_engine(pg_url)
    upgrade(engine)
    engine.dispose()
    proxy = HangingProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    url = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    config = write_config(tmp_path, url)  # ([dashboard] cache_ttl_seconds = 1)
    text = config.read_text().replace(
        f'url = "{url}"', f'url = "{url}"\nconnect_timeout_seconds = 3'
    )
    config.write_text(text)
    expect = playwright_api.expect
    try:
        with (
            running_dashboard(config, tmp_path, ENV) as base,
            playwright_api.sync_playwright() as pw,
        ):
            browser = _browser(pw)
            page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
            page.add_init_script(SAW_CHECKING)
            try:
                page.goto(base)
                expect(page.get_by_role("heading", name="Overview")).to_be_visible()
                expect(page.get_by_text("Cannot reach the database")).to_have_count(0)
                # what the pages cached has expired, as after any pause longer than the cache's
                # time to live: nothing answers from the cache once the database hangs
                time.sleep(1.5)
                proxy.hung.set()
                for path in (
                    "/",
                    "/discrepancies?id=1",
                    "/events",
                    "/dead_letters",
                    "/outbox",
                    "/runs",
                ):
                    started = time.monotonic()
                    page.goto(base + path)
                    expect(page.get_by_text("Cannot reach the database")).to_be_visible(
                        timeout=10_000
                    )
                    took = time.monotonic() - started
                    assert took <= 10, f"{path}: {took:.1f} s"
                    # while the page waited, it said so (recorded when shown, however briefly)
                    assert page.evaluate("window.__sawChecking === true"), path
                _shot(page, "hung-database")
            finally:
                browser.close()  # type: ignore[attr-defined]
    finally:
        proxy.close()
