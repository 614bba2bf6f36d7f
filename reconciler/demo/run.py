"""``hookledger demo``: sandbox provider, receiver, worker and reconciliation on one machine.

1. a workspace under ``--dir`` (``var/demo``): ``config.toml`` (every other command works on it with
   ``--config var/demo/config.toml``), ``demo.env`` (the demo's non-secret keys), the inbox database,
   the application's ``business.db``;
2. the sandbox provider, the receiver and a worker, in threads on 127.0.0.1;
3. a day of Stripe, GitHub and Shopify traffic, signed, through the real receiver, with drops,
   duplicates, reordering and delays; handler failures (transient that recover, permanent that
   dead-letter, one non-idempotent ledger credit that a failed attempt rolls back); business rows
   changed behind the tool's back (a few ledger credits doubled by the application itself); a receipt per paid invoice through the outbox to a stand-in mailer that fails now and then;
4. a reconciliation of every source, compared with the ground truth (``truth.json``), and the
   mailer's receipts: exactly one per paid invoice, by key;
5. the dashboard, until Ctrl-C (``--no-dashboard`` stops after the summary).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import Engine, delete, insert, select, update
from starlette.applications import Starlette

from connectors.sandbox.app import Sandbox
from connectors.sandbox.sender import (
    DeliveryFaults,
    Report,
    Webhook,
    github_webhooks,
    plan,
    record_github_outcomes,
    send,
    shopify_webhooks,
    slack_webhooks,
    stripe_webhooks,
    twilio_webhooks,
)
from connectors.sandbox.world import World, build_world
from reconciler.config import Settings, load_config
from reconciler.demo import handlers, report, serving, truth, waits
from reconciler.demo.business import invoices, ledger, metadata, orders
from reconciler.demo.day import SLOT, Day, SteppedClock, arrival_times, day_ending
from reconciler.demo.listed import LISTED, listed_webhooks
from reconciler.demo.mailer import Mailer
from reconciler.demo.ops_channel import OpsChannel
from reconciler.demo.workspace import DEMO_ENV, prepare_workspace
from reconciler.errors import HookledgerError
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.notify.dispatch import dispatch
from reconciler.ops.drill import drill_handlers
from reconciler.ops.rollup import roll_up
from reconciler.outbox.publisher import publishers
from reconciler.reconcile.run import Reconciler
from reconciler.reconcile.sweep import nightly_names, reconcile_one
from reconciler.schedule import snapshot
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.types import clock_override, utcnow

log = logging.getLogger(__name__)

__all__ = ["DEMO_ENV", "DemoOptions", "DemoResult", "run_demo"]

FAULTS = DeliveryFaults(drop=0.03, duplicate=0.05, reorder=0.05, delay=0.03)
# a list of a few dozen events: one surely dropped, more repeated and swapped
LISTED_FAULTS = replace(FAULTS, duplicate=0.15, reorder=0.2, drop_first=1)


@dataclass(frozen=True)
class DemoOptions:
    directory: Path
    seed: int = 1
    events: int = 3000
    dashboard: bool = True
    dashboard_port: int | None = None
    console: Console | None = None


@dataclass(frozen=True)
class DemoResult:
    directory: Path
    config_path: Path
    expected: dict[str, dict[str, int]]
    found: dict[str, dict[str, int]]
    differences: list[str]
    receipts: frozenset[str] = frozenset()  # the keys the mailer must have: one per paid invoice


def _webhooks(world: World, settings: Settings, seed: int) -> dict[str, list[Webhook]]:
    secrets = {s.name: s.signing_secrets()[0] for s in settings.sources}
    twilio_url = f"http://{settings.receiver.host}:{settings.receiver.port}/webhooks/twilio"
    return {
        "stripe": stripe_webhooks(world.stripe_events, secrets["stripe"]),
        "github": github_webhooks(world.github_attempts, secrets["github"]),
        "shopify": shopify_webhooks(world, secrets["shopify"], seed=seed),
        "twilio": twilio_webhooks(world, secrets["twilio"], twilio_url),
    }


# sources the demo's day delivers to but does not reconcile (Slack lists no events): their faults
# are only the sender's, and the ground truth leaves them out


def _receive_only_webhooks(settings: Settings, seed: int, n: int) -> dict[str, list[Webhook]]:
    secrets = {s.name: s.signing_secrets()[0] for s in settings.sources}
    return {"slack": slack_webhooks(seed, max(10, n // 20), secrets["slack"])}


class DayLines:
    """The day's progress where no terminal shows a bar (a CI log, a pipe, a service's journal): a
    line each tenth of the webhooks, with the time of the day reached."""

    def __init__(self, console: Console, total: int, clock: SteppedClock) -> None:
        self.console, self.total, self.clock = console, total, clock
        self.done = 0
        self.step = max(1, -(-total // 10))

    def advance(self, task: Any) -> None:
        self.done += 1
        if self.done % self.step == 0 or self.done == self.total:
            share = self.done * 100 // max(self.total, 1)
            self.console.print(
                f"delivering a day of webhooks: {share}% ({self.done:,}/{self.total:,}), the day's "
                f"clock at {self.clock():%H:%M} UTC"
            )


def _deliver_day(
    engine: Engine,
    settings: Settings,
    day: Day,
    clock: SteppedClock,
    arrivals: list[tuple[datetime, str, Webhook]],
    client: httpx.Client,
    base: str,
    reports: dict[str, Report],
    progress: Progress | DayLines,
    task: Any,
) -> None:
    """Slot by slot through the day: set the clock, deliver the slot's webhooks, record the queue
    (what the slot built up), then let the worker and the publisher finish what is due before the
    clock moves on. The incident hour fails every handler; its retries come due in later slots."""
    i = 0
    for slot in day.slots():
        clock.jump(slot)
        if day.in_incident(slot):
            handlers.OUTAGE.set()
        else:
            handlers.OUTAGE.clear()
        while i < len(arrivals) and arrivals[i][0] < slot + SLOT:
            _, name, hook = arrivals[i]
            send(client, f"{base}/webhooks/{name}", [hook], reports[name])
            progress.advance(task)
            i += 1
        snapshot(engine, settings)
        waits.wait_quiet(engine, clock)
    handlers.OUTAGE.clear()
    # what the last slots still had to retry (none should be left: the tail is there for them)
    waits.wait_quiet(engine, clock)


def _redeliver_changed(
    client: httpx.Client, url: str, world: World, event_id: str, settings: Settings
) -> None:
    """Deliver a received Stripe event once more with another amount: the receiver must answer
    ``conflict`` (kept, flagged, not applied)."""
    source = settings.source("stripe")
    assert source is not None
    event = next(e for e in world.stripe_events if e["id"] == event_id)
    [hook] = stripe_webhooks([truth.conflicting_copy(event)], source.signing_secrets()[0])
    answer = client.post(url, content=hook.body, headers=hook.headers)
    if answer.status_code != 200 or answer.json().get("status") != "conflict":
        raise HookledgerError(f"a conflicting redelivery was answered {answer.text[:200]}")


def _drill(
    console: Console, engine: Engine, settings: Settings, expected: dict[str, int]
) -> list[str]:
    """``hookledger drill --handlers`` over the day's Stripe events (each twice, shuffled), compared
    with the ground truth: the ledger's double credits, nothing else. Lines that differ."""
    source = settings.source("stripe")
    assert source is not None
    with console.status("drill: every Stripe event delivered twice, shuffled"):
        result = drill_handlers(
            engine, settings, handlers.registry(), source, since=utcnow() - timedelta(days=3)
        )
    found: dict[str, int] = {}
    for d in result.differences:
        found[d.kind] = found.get(d.kind, 0) + 1
    console.print(
        f"drill: {result.events} Stripe events delivered {result.deliveries} times, shuffled, "
        f"against a scratch copy of the business tables: "
        + (", ".join(f"{k} {n}" for k, n in sorted(found.items())) or "equal")
        + " (the ledger credit is not idempotent: each paid invoice, replayed, credited twice)"
    )
    return [
        f"drill {kind}: expected {expected.get(kind, 0)}, found {found.get(kind, 0)}"
        for kind in sorted(set(expected) | set(found))
        if expected.get(kind, 0) != found.get(kind, 0)
    ]


def _tamper(business: Engine, tampering: truth.Tampering) -> None:
    with business.begin() as conn:
        if tampering.invoice_status:
            conn.execute(
                update(invoices)
                .where(invoices.c.stripe_invoice_id.in_(tampering.invoice_status))
                .values(status="uncollectible")
            )
        if tampering.invoice_deleted:
            conn.execute(
                delete(invoices).where(invoices.c.stripe_invoice_id.in_(tampering.invoice_deleted))
            )
        if tampering.order_status:
            conn.execute(
                update(orders)
                .where(orders.c.order_id.in_(tampering.order_status))
                .values(financial_status="voided")
            )
        if tampering.order_deleted:
            conn.execute(delete(orders).where(orders.c.order_id.in_(tampering.order_deleted)))
        for invoice in tampering.ledger_doubled:
            conn.execute(
                insert(ledger).from_select(
                    ["stripe_invoice_id", "amount", "event_id", "correlation_id"],
                    select(
                        ledger.c.stripe_invoice_id,
                        ledger.c.amount,
                        ledger.c.event_id,
                        ledger.c.correlation_id,
                    )
                    .where(ledger.c.stripe_invoice_id == invoice)
                    .limit(1),
                )
            )


# The planted handler failures and conflicting redeliveries are the point of the demo, and each
# delivery and notification is the day itself: the dashboard and the summary show them, on the
# console they would only scroll past the progress bar and between the summary's lines.
QUIET_LOGGERS = {
    "reconciler.inbox.worker": logging.ERROR,
    "reconciler.outbox.publisher": logging.ERROR,
    "reconciler.inbox.receiver": logging.ERROR,
    "reconciler.notify": logging.WARNING,
}


def run_demo(opts: DemoOptions) -> DemoResult:
    loggers = {name: logging.getLogger(name) for name in QUIET_LOGGERS}
    before = {name: logger.level for name, logger in loggers.items()}
    for name, logger in loggers.items():
        logger.setLevel(QUIET_LOGGERS[name])
    try:
        return _run_demo(opts)
    finally:  # the process may go on (tests, an embedding caller): its logging as it was
        for name, logger in loggers.items():
            logger.setLevel(before[name])


def _run_demo(opts: DemoOptions) -> DemoResult:
    console = opts.console or Console(stderr=True)
    directory = opts.directory.resolve()
    os.environ.update(DEMO_ENV)
    os.environ["HOOKLEDGER_DEMO_DIR"] = directory.as_posix()
    handlers.reset()
    dashboard_port = opts.dashboard_port or 8501
    if opts.dashboard:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", dashboard_port))
        except OSError:
            raise HookledgerError(
                f"port {dashboard_port} on 127.0.0.1 is in use (another dashboard?): "
                "choose another with --port, or use --no-dashboard"
            ) from None
    sandbox_sock, receiver_sock, mailer_sock = serving.bind(), serving.bind(), serving.bind()
    sandbox_url = f"http://127.0.0.1:{sandbox_sock.getsockname()[1]}"
    mailer_url = f"http://127.0.0.1:{mailer_sock.getsockname()[1]}"
    config_path = prepare_workspace(
        directory, sandbox_url, receiver_sock.getsockname()[1], dashboard_port, mailer_url
    )
    mailer = Mailer(DEMO_ENV["HOOKLEDGER_DEMO_MAILER_SECRET"], seed=opts.seed)
    ops = OpsChannel(DEMO_ENV["HOOKLEDGER_DEMO_NOTIFY_SECRET"])
    settings = load_config(config_path).settings

    n = max(30, opts.events)
    world = build_world(
        opts.seed,
        now=utcnow()
        - timedelta(minutes=15),  # every event is past the reconciliation's grace period
        stripe_events=n * 55 // 100,
        github_deliveries=n * 30 // 100,
        shopify_orders=n * 15 // 100,
        github_failure_rate=0.0,  # GitHub's log will record exactly what the sender dropped
        twilio_messages=max(5, n // 40),
        listed={kind: max(20, n // 40) for kind in LISTED},
    )
    hooks = _webhooks(world, settings, opts.seed)
    hooks |= listed_webhooks(
        world, settings, f"http://{settings.receiver.host}:{settings.receiver.port}"
    )
    plans: dict[str, tuple[list[Webhook], Report]] = {
        name: plan(h, LISTED_FAULTS if name in LISTED else FAULTS, seed=opts.seed * 31 + i)
        for i, (name, h) in enumerate(hooks.items())
    }
    reports = {name: r for name, (_, r) in plans.items()}  # what the reconciliation must find
    extra = _receive_only_webhooks(settings, opts.seed, n)
    for i, (name, h) in enumerate(extra.items()):
        plans[name] = plan(h, FAULTS, seed=opts.seed * 37 + i)
    delivered = {name: r for name, (_, r) in plans.items()}  # every source the day delivers to
    faults = truth.choose_handler_faults(world, reports, opts.seed)
    (directory / "faults.json").write_text(
        json.dumps(
            {
                "transient": faults.transient,
                "permanent": faults.permanent,
                "ambiguous": faults.ambiguous,
            }
        )
    )

    engine = make_engine(settings.database.url)
    business = make_engine(f"sqlite:///{directory / 'business.db'}")
    upgrade(engine)
    metadata.create_all(business)
    worker = Worker(engine, settings, handlers.registry())
    senders = publishers(engine, settings, settings.outbox.concurrency)

    day = day_ending(utcnow())
    clock = SteppedClock(day.start)

    try:
        with contextlib.ExitStack() as running:
            # every time the receiver, the worker and the publisher store is the day's clock
            running.enter_context(clock_override(clock))
            running.enter_context(serving.serving(Sandbox(world).app, sandbox_sock))
            # the mailer and the ops channel: the outbox's receipts and the notifications
            running.enter_context(
                serving.serving(Starlette(routes=mailer.routes + ops.routes), mailer_sock)
            )
            running.enter_context(serving.serving(create_app(settings, engine), receiver_sock))
            running.enter_context(serving.background(worker.run))
            for sender in senders:
                running.enter_context(serving.background(sender.run))
            dispatch(engine, settings)  # the ops channel hears about what happens from now on
            console.print(
                f"[bold]hookledger demo[/bold] in {directory} (seed {opts.seed}): sandbox provider on "
                f"{sandbox_url}, receiver on {settings.receiver.host}:{settings.receiver.port}"
            )
            arrivals = arrival_times({name: ordered for name, (ordered, _) in plans.items()}, day)
            bar = Progress(
                TextColumn("delivering a day of webhooks"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            with (
                bar if console.is_terminal else contextlib.nullcontext(),
                httpx.Client(timeout=30) as client,
            ):
                progress: Progress | DayLines = (
                    bar if console.is_terminal else DayLines(console, len(arrivals), clock)
                )
                task = bar.add_task("send", total=len(arrivals))
                base = f"http://{settings.receiver.host}:{settings.receiver.port}"
                _deliver_day(
                    engine, settings, day, clock, arrivals, client, base, delivered, progress, task
                )
                conflict = truth.choose_conflict(world, reports, faults, opts.seed)
                if conflict is not None:
                    _redeliver_changed(client, f"{base}/webhooks/stripe", world, conflict, settings)
            record_github_outcomes(world, reports["github"])
            bad = {
                n: dict(r.responses) for n, r in delivered.items() if set(r.responses) != {"200"}
            }
            if bad:
                raise HookledgerError(f"the receiver refused demo deliveries: {bad}")
            waits.wait_drained(engine)
            waits.wait_sent(engine)
            clock.jump(datetime.now(UTC))  # the day is over: the reconciliation runs now
            snapshot(engine, settings)
            receipts = truth.expected_receipts(world, reports)
            tampering = truth.choose_tampering(world, reports, faults, opts.seed)
            _tamper(business, tampering)
            expected = truth.expected_counts(world, reports, faults, tampering, conflict)
            drill_expected = truth.expected_drill(world, reports)
            (directory / "truth.json").write_text(
                json.dumps(
                    truth.ground_truth(
                        reports, faults, tampering, expected, conflict, drill_expected, receipts
                    ),
                    indent=2,
                )
            )
            reader = make_engine(f"sqlite:///{directory / 'business.db'}", readonly=True)
            try:
                reconciler = Reconciler(engine, settings, business_engine=reader)
                for name in nightly_names(engine, settings):  # the sources, then the outbox
                    with console.status(f"reconciling {name}"):
                        reconcile_one(reconciler, name, trigger="cli")
            finally:
                reader.dispose()
            snapshot(engine, settings)
            roll_up(engine, utcnow())
            dispatch(engine, settings)  # what the runs found, and the day's dead letters
            found = report.found_counts(engine)
            report.summary(console, expected, found)
            report.received_only(console, engine)
            differences = truth.compare(expected, found)
            differences += report.notifications(console, ops, found, engine)
            differences += report.receipts(console, mailer, receipts)
            differences += _drill(console, engine, settings, drill_expected)
            if differences:
                console.print("[red]The reconciliation differs from the ground truth:[/red]")
                for line in differences:
                    console.print(f"  {line}")
            else:
                console.print(
                    "[green]The reconciliation found exactly what the sandbox did[/green] "
                    f"(ground truth: {directory / 'truth.json'})."
                )
            if opts.dashboard:
                serving.dashboard_until_interrupted(console, config_path, dashboard_port)
    finally:
        worker.close()
        for sender in senders:
            sender.close()
        engine.dispose()
        business.dispose()
    return DemoResult(directory, config_path, expected, found, differences, frozenset(receipts))
