"""The database lost and back, in headless Chromium against a real ``hookledger dashboard`` on
PostgreSQL behind a proxy the test can cut: the refreshing Overview says so in one line (no
traceback), a page opened during the outage says so too, and both come back by themselves."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from pathlib import Path

import pytest
from sqlalchemy import make_url

from reconciler.storage.engine import make_engine
from tests.dashboard_data import seed, write_config
from tests.e2e.test_dashboard_e2e import (
    CHROMIUM,
    LAUNCH_ARGS,
    _shot,
    playwright_api,
    running_dashboard,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]
ENV = {"T_STRIPE_SECRET": "whsec_x", "T_GITHUB_SECRET": "x", "T_SHOPIFY_SECRET": "x"}
LOST = "Cannot reach the database"


class CuttableProxy:
    """A TCP proxy to PostgreSQL on a fixed port that can be cut (every connection closed, new
    ones refused: the server is gone) and restored (the same port answers again)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.sockets: list[socket.socket] = []
        self.server: socket.socket | None = None
        self.up()

    def up(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.port = int(server.getsockname()[1])
        self.server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:  # cut
                return
            upstream = socket.create_connection(self.upstream)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        for sock in [s for s in [self.server, *self.sockets] if s is not None]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.sockets, self.server = [], None


def test_the_database_lost_and_back(tmp_path: Path, pg_db: str) -> None:
    engine = make_engine(pg_db)
    seed(engine)
    engine.dispose()
    parsed = make_url(pg_db)
    proxy = CuttableProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    url = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    config = write_config(tmp_path, url)
    config.write_text(
        config.read_text().replace(f'url = "{url}"', f'url = "{url}"\nconnect_timeout_seconds = 3')
    )
    expect = playwright_api.expect
    try:
        with (
            running_dashboard(config, tmp_path, ENV) as base,
            playwright_api.sync_playwright() as pw,
        ):
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            try:
                page.goto(f"{base}/?refresh=10s")
                strip = page.get_by_text("Dead events:")
                expect(strip).to_be_visible()

                # lost while the Overview refreshes: one line in place of the figures
                proxy.cut()
                expect(page.get_by_text(LOST).first).to_be_visible(timeout=40_000)
                expect(page.get_by_text(re.compile("Traceback|OperationalError"))).to_have_count(0)
                _shot(page, "database-lost-overview")

                # a page opened during the outage: the same line, and it checks again by itself
                other = browser.new_page(viewport={"width": 1400, "height": 1000})
                other.goto(f"{base}/events")
                expect(other.get_by_text(LOST).first).to_be_visible()
                expect(other.get_by_text("the page comes back by itself")).to_be_visible()

                # back: both pages show their content again without a reload
                proxy.up()
                expect(strip).to_be_visible(timeout=40_000)
                expect(page.get_by_text(LOST)).to_have_count(0)
                expect(other.get_by_text("Find by event id")).to_be_visible(timeout=40_000)
                expect(other.get_by_text(LOST)).to_have_count(0)
                _shot(page, "database-back-overview")
            finally:
                browser.close()
    finally:
        proxy.cut()
