"""The dashboard in a real browser: time from navigation to fully rendered, per page, cold and warm.

Headless Debian Chromium through Playwright drives a real ``hookledger dashboard`` process. A page
is rendered when Streamlit's script run is over (``stApp[data-test-script-state=notRunning]``) and
every Plotly chart on it has drawn; the viewport is tall enough that no chart waits for a scroll.

- ``first``: the Overview as the first request after the server answers its health check, from a
  browser with nothing cached (the server is restarted each round: imports, the first script run,
  the first queries, Streamlit's scripts downloaded);
- ``cold``: the page's URL opened (a new Streamlit session) after its cached reads expired
  (``cache_ttl_seconds`` is set short and waited out), so every query runs; the browser keeps
  Streamlit's static files cached, as a returning user's does;
- ``warm``: the page reached through the sidebar from another page while its reads are cached;
- ``pasted``: the page's URL pasted into a fresh browser (a new context: nothing cached, Streamlit's
  static files downloaded again), as an on-call engineer opens a link from an alert; the server is
  warm. Its floor is the bare page's first load in a fresh browser, measured the same way.

The baseline is the floor of any Streamlit page, measured in the same run the same way: a bare app
(``bench/bare_streamlit.py``) with a title and one Plotly chart. Scales: the demo's day (``hookledger
demo``, 3,000 events) and ``--events`` on a generated inbox (``bench/dashboard_queries.py``'s
history: 3 deliveries an event over 7 days).

    python bench/browser.py --rounds 3 [--events 1000000] [--skip-large]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, free_port, median, process

CHROMIUM = os.environ.get("HOOKLEDGER_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PAGES = {  # name: (path, title)
    # the Overview's own link: the bare address lands on Issues while one is open (the demo's are)
    "overview": ("/?range=now-24h", "Overview"),
    "discrepancies": ("/discrepancies", "Discrepancies"),
    "events": ("/events", "Events"),
    "dead_letters": ("/dead_letters", "Dead letters"),
    "outbox": ("/outbox", "Outbox"),
    "runs": ("/runs", "Runs"),
}
TTL = 6  # seconds: the cold arm waits it out; the warm one returns well within it
GOALS = {("demo", "overview", "cold"): 1.5, ("large", "overview", "cold"): 2.5}
WARM_GOAL, FIRST_GOAL = 1.0, 3.0
PASTED_GOAL = 1.5  # x the bare page's first load in a fresh browser
RENDERED = """(title) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const h1 = document.querySelector('h1');
  if (!h1 || !h1.textContent.startsWith(title)) return false;
  const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
  return [...charts].every(c => c.querySelector('.js-plotly-plot .main-svg'));
}"""


def _env() -> dict[str, str]:
    from reconciler.demo.workspace import DEMO_ENV

    return {**DEMO_ENV, "T_S": "x"}


@contextmanager
def dashboard(config: Path) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "reconciler.cli.main", "dashboard", "--config", str(config)]
    argv += ["--port", str(port)]
    with process(argv, f"http://127.0.0.1:{port}/_stcore/health", env=_env(), start_timeout=60):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def bare() -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "streamlit", "run", str(ROOT / "bench" / "bare_streamlit.py")]
    argv += ["--server.port", str(port), "--server.headless", "true"]
    argv += ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    with process(argv, f"http://127.0.0.1:{port}/_stcore/health", start_timeout=60):
        yield f"http://127.0.0.1:{port}"


def load(page: object, url: str, title: str) -> float:
    """Seconds from opening ``url`` (a new Streamlit session) to rendered."""
    started = time.perf_counter()
    page.goto(url)  # type: ignore[attr-defined]
    page.wait_for_function(RENDERED, arg=title, timeout=120_000, polling=20)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def navigate(page: object, title: str) -> float:
    """Seconds from a click on the sidebar's link to the page rendered (the same session)."""
    link = page.get_by_test_id("stSidebar").get_by_role("link", name=title, exact=True)  # type: ignore[attr-defined]
    started = time.perf_counter()
    link.click()
    page.wait_for_function(RENDERED, arg=title, timeout=120_000, polling=20)  # type: ignore[attr-defined]
    return time.perf_counter() - started


def fresh(browser: object) -> object:
    context = browser.new_context(viewport={"width": 1400, "height": 6000})  # type: ignore[attr-defined]
    return context.new_page()


def with_ttl(config: Path) -> Path:
    """The configuration with a short cache TTL (so the cold arm can wait its reads out)."""
    text = config.read_text()
    if "[dashboard]" in text:
        text = text.replace("[dashboard]", f"[dashboard]\ncache_ttl_seconds = {TTL}", 1)
    else:
        text += f"\n[dashboard]\ncache_ttl_seconds = {TTL}\n"
    out = config.with_name("bench-" + config.name)
    out.write_text(text)
    return out


def demo_config(folder: Path) -> Path:
    from rich.console import Console

    from reconciler.demo.run import DemoOptions, run_demo

    result = run_demo(
        DemoOptions(
            directory=folder / "demo",
            seed=1,
            events=3000,
            dashboard=False,
            console=Console(file=io.StringIO()),
        )
    )
    assert not result.differences, result.differences
    return with_ttl(result.config_path)


def large_config(folder: Path, events: int) -> Path:
    from bench.dashboard_queries import populate
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import upgrade

    url = f"sqlite:///{folder / 'large.db'}"
    engine = make_engine(url)
    upgrade(engine)
    took = populate(engine, events, 3, 7)
    engine.dispose()
    print(f"  {events:,} events, {3 * events:,} deliveries generated in {took:.0f} s", flush=True)
    config = folder / "large.toml"
    sources = "".join(
        f'\n[[sources]]\nname = "{n}"\nkind = "{n}"\nsigning_secret_env = "T_S"\n'
        for n in ("stripe", "github", "shopify")
    )
    config.write_text(f'[database]\nurl = "{url}"\n{sources}')
    return with_ttl(config)


def spread(values: list[float]) -> str:
    return f"{median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def measure(scale: str, config: Path, rounds: int, browser: object) -> list[str]:
    first: list[float] = []
    base_first: list[float] = []
    cold: dict[str, list[float]] = {p: [] for p in PAGES}
    warm: dict[str, list[float]] = {p: [] for p in PAGES}
    base_warm: list[float] = []
    pasted: dict[str, list[float]] = {p: [] for p in PAGES}
    base_pasted: list[float] = []
    for r in range(rounds):
        # arms interleaved: the bare app, then the dashboard, each from a fresh server
        with bare() as floor:
            page = fresh(browser)
            base_first.append(load(page, floor, "Floor"))
            base_warm.append(load(page, floor, "Floor"))  # static files cached, as below
            page.context.close()  # type: ignore[attr-defined]
            page = fresh(browser)  # the server warm, the browser new: a pasted link's floor
            base_pasted.append(load(page, floor, "Floor"))
            page.context.close()  # type: ignore[attr-defined]
        with dashboard(config) as base:
            page = fresh(browser)
            first.append(load(page, base + PAGES["overview"][0], "Overview"))
            for name, (path, title) in PAGES.items():
                time.sleep(TTL + 0.5)
                cold[name].append(load(page, base + path, title))
                other = "Runs" if name != "runs" else "Dead letters"  # a light page between
                navigate(page, other)
                warm[name].append(navigate(page, title))
            page.context.close()  # type: ignore[attr-defined]
            for name, (path, title) in PAGES.items():  # each link pasted into a new browser
                page = fresh(browser)
                pasted[name].append(load(page, base + path, title))
                page.context.close()  # type: ignore[attr-defined]
        print(
            f"{scale} round {r + 1}: first {first[-1]:.2f} s (bare {base_first[-1]:.2f}), "
            + ", ".join(f"{p} {cold[p][-1]:.2f}/{warm[p][-1]:.2f}" for p in PAGES),
            flush=True,
        )
    floor_first, floor_warm = median(base_first), median(base_warm)
    lines = [
        f"| {scale} | first page after start (Overview) | {spread(first)} | "
        f"{median(first) / floor_first:.1f}x | ≤ {FIRST_GOAL:g} s |"
    ]
    for name in PAGES:
        goal = GOALS.get((scale, name, "cold"))
        lines.append(
            f"| {scale} | {name} cold | {spread(cold[name])} | "
            f"{median(cold[name]) / floor_warm:.1f}x | {f'≤ {goal:g} s' if goal else ''} |"
        )
        lines.append(
            f"| {scale} | {name} warm | {spread(warm[name])} | "
            f"{median(warm[name]) / floor_warm:.1f}x | ≤ {WARM_GOAL:g} s |"
        )
    floor_pasted = median(base_pasted)
    for name in PAGES:
        lines.append(
            f"| {scale} | {name} pasted into a fresh browser | {spread(pasted[name])} | "
            f"{median(pasted[name]) / floor_pasted:.1f}x | ≤ {PASTED_GOAL:g}x |"
        )
    lines.append(
        f"| {scale} | bare Streamlit page (the floor) | first {spread(base_first)}, warm "
        f"{spread(base_warm)}, fresh browser {spread(base_pasted)} | 1.0x | |"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the large arm")
    parser.add_argument("--skip-large", action="store_true", help="only the demo's day")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    table = [
        "| scale | page | navigation → rendered, median (range) | ratio to the floor | goal |",
        "|---|---|---:|---:|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            print("demo's day: running hookledger demo (3,000 events)", flush=True)
            table += measure("demo", demo_config(Path(tmp)), args.rounds, browser)
            if not args.skip_large:
                print(f"large: generating {args.events:,} events", flush=True)
                table += measure(
                    "large", large_config(Path(tmp), args.events), args.rounds, browser
                )
        finally:
            browser.close()
    print("\n".join(table))


if __name__ == "__main__":
    main()
