"""``hookledger`` entry point. Each command parses options, opens the database and calls one library
function that the dashboard and the scheduler call too. Errors print their message and exit 2."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from reconciler import __version__
from reconciler.audit import default_actor
from reconciler.cli import (
    dashboard_cmd,
    delivery_cmds,
    doctor_cmd,
    drill_cmd,
    event_cmds,
    issue_cmds,
    notify_cmd,
    outbox_cmds,
    reconcile_cmds,
    send_cmd,
)
from reconciler.cli.common import Command, check_port, check_sources, load, run_loops, summarise
from reconciler.cli.help import document
from reconciler.errors import ConfigError, HookledgerError
from reconciler.logs import configure_logging

log = logging.getLogger("hookledger")

EXIT_OK = 0
EXIT_ERROR = 2
# The reader of our standard output went away (``hookledger export -o - | head``): the status a shell
# reports for a process that SIGPIPE ended, without the traceback.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def _config_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="configuration file (default: $HOOKLEDGER_CONFIG, else ./config.toml)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    parent = _config_parent()
    parser = argparse.ArgumentParser(
        prog="hookledger",
        description="Durable webhook inbox, provider reconciliation and an operations dashboard.",
        parents=[parent],
    )
    parser.add_argument("--version", action="version", version=f"hookledger {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", parents=[parent], help="create or upgrade the database schema")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("serve", parents=[parent], help="run the webhook receiver")
    p.add_argument("--host", help="bind address (default: [receiver] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: [receiver] port, 8000)")
    p.add_argument("--access-log", action="store_true", help="log every HTTP request")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker", parents=[parent], help="apply stored events")
    p.add_argument("--once", action="store_true", help="process what is due, then exit")
    p.add_argument(
        "--concurrency", type=int, help="worker processes (default: [worker] concurrency)"
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="also send outbox messages ([outbox] concurrency threads; with --once, after the "
        "events are drained)",
    )
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser(
        "sandbox",
        parents=[parent],
        help="run the local sandbox provider (Stripe, GitHub, Shopify APIs)",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated data (default 1)")
    p.add_argument(
        "--send",
        action="store_true",
        help="deliver the events as signed webhooks to each stripe/github/shopify source on the receiver",
    )
    p.add_argument("--drop", type=float, default=0.0, help="fraction of webhooks never delivered")
    p.add_argument("--duplicate", type=float, default=0.0, help="fraction delivered twice")
    p.add_argument("--reorder", type=float, default=0.0, help="fraction swapped with a later one")
    p.add_argument("--delay", type=float, default=0.0, help="fraction delivered after all others")
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="answer every API call after this many milliseconds, give or take 20%% (a real "
        "provider: about 300)",
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        default=None,
        help="API calls a second; beyond it each provider's own 429 (counted in /_sandbox/stats)",
    )
    p.add_argument(
        "--report",
        default="var/sandbox-report.json",
        help="where --send writes what it did: the ground truth (default var/sandbox-report.json)",
    )
    p.set_defaults(func=cmd_sandbox)

    p = sub.add_parser(
        "demo",
        parents=[parent],
        help="run the whole system on a realistic day of sandbox traffic, then open the dashboard",
    )
    p.add_argument("--dir", default="var/demo", help="demo workspace (default var/demo)")
    p.add_argument("--seed", type=int, default=1, help="seed of the traffic and faults (default 1)")
    p.add_argument(
        "--events", type=int, default=3000, help="events across the three sources (default 3000)"
    )
    p.add_argument(
        "--no-dashboard", action="store_true", help="stop after the reconciliation summary"
    )
    p.add_argument("--port", type=int, help="dashboard port (default 8501)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "snapshot",
        parents=[parent],
        help="record one queue snapshot per source and roll up closed hours (for cron)",
    )
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser(
        "prune",
        parents=[parent],
        help="delete processed inbox rows older than the retention (at least 7 days)",
    )
    p.add_argument("--keep-days", type=int, help="days to keep (default: [retention] keep_days, 7)")
    p.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")
    p.add_argument("--force", action="store_true", help="allow less than the safe minimum")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_prune)

    reconcile_cmds.register(sub, parent)
    event_cmds.register(sub, parent)
    delivery_cmds.register(sub, parent)
    send_cmd.register(sub, parent)
    dashboard_cmd.register(sub, parent)
    drill_cmd.register(sub, parent)
    outbox_cmds.register(sub, parent)
    doctor_cmd.register(sub, parent)
    notify_cmd.register(sub, parent)
    issue_cmds.register(sub, parent)
    document(parser)  # each command's description, examples and exit statuses (cli/help.py)
    return parser


# -- commands ------------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from reconciler.storage.migrate import current_revision, upgrade

    with Command(args, require_schema=False) as cmd:
        upgrade(cmd.engine)
        print(f"database ready at revision {current_revision(cmd.engine)}: {cmd.engine.url!r}")
        if cmd.settings.business.url:
            from reconciler.inbox.applied import ensure_applied_table
            from reconciler.storage.engine import make_engine
            from reconciler.storage.failures import masked_url

            business = make_engine(cmd.settings.business.url)
            try:
                ensure_applied_table(business)
            finally:
                business.dispose()
            print(
                f"business database ready (hookledger_applied): "
                f"{masked_url(cmd.settings.business.url)}"
            )
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from reconciler.inbox.receiver import create_app
    from reconciler.process import fit_open_files

    with Command(args) as cmd:
        settings = cmd.settings
        if not any(s.enabled for s in settings.sources):
            where = cmd.loaded.path or "the built-in defaults"
            raise ConfigError(
                f"{where}: no enabled source in [[sources]]: the receiver would refuse every delivery"
            )
        host = args.host or settings.receiver.host
        port = settings.receiver.port if args.port is None else args.port
        check_port(host, port, "--port" if args.port is not None else "[receiver] port")
        app = create_app(settings, cmd.engine)
        receiver = settings.receiver
        fit_open_files(receiver.max_connections)
        log.info("receiver listening on http://%s:%d", host, port)
        # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal.
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=settings.logging.level.lower(),
            access_log=args.access_log,
            log_config=None,
            limit_concurrency=receiver.max_connections,
            timeout_keep_alive=receiver.keep_alive_seconds,
        )
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from reconciler.inbox.handlers import load_handler_modules
    from reconciler.inbox.supervisor import Supervisor

    with Command(args) as cmd:
        settings = cmd.settings
        # imported here too, so that a module that fails is one line and exit 2 before any process
        load_handler_modules(settings.worker.handlers, settings.worker.import_paths)
        concurrency = settings.worker.concurrency if args.concurrency is None else args.concurrency
        if concurrency < 1:
            raise HookledgerError("--concurrency must be at least 1")
        metrics = None
        if settings.worker.metrics_port is not None:
            from reconciler.inbox.worker_metrics import WorkerMetrics

            check_port(
                settings.worker.metrics_host, settings.worker.metrics_port, "[worker] metrics_port"
            )
            metrics = WorkerMetrics()
            metrics.serve(settings.worker.metrics_host, settings.worker.metrics_port)
        cmd.check_database()
        supervisor = Supervisor(cmd.engine, settings, concurrency, metrics=metrics)
        phases: list[list[Any]] = [[supervisor]]
        if args.publish:
            from reconciler.cli.outbox_cmds import publishers_for

            phases.append(publishers_for(cmd, settings.outbox.concurrency))
        try:
            run_loops(phases, once=args.once)
        finally:
            for loop in (loop for phase in phases for loop in phase):
                loop.close()
    print(f"claimed {supervisor.stats.claimed}: {summarise([supervisor])}")
    if args.publish:
        print(f"outbox: claimed {sum(p.stats.claimed for p in phases[1])}: {summarise(phases[1])}")
    if args.once and supervisor.died_outside:
        raise HookledgerError(
            f"{supervisor.died_outside} worker process(es) exited outside any attempt (see the log)"
        )
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from reconciler.dashboard_process import missing_dashboard_packages
    from reconciler.demo.run import DemoOptions, run_demo

    missing = [] if args.no_dashboard else missing_dashboard_packages()
    if missing:  # said before the day is run, not after it
        raise HookledgerError(
            f"the demo serves the dashboard, which needs {', '.join(missing)}, not installed "
            "here: pip install 'hookledger[dashboard]' (or run hookledger demo --no-dashboard)"
        )

    result = run_demo(
        DemoOptions(
            directory=Path(args.dir),
            seed=args.seed,
            events=args.events,
            dashboard=not args.no_dashboard,
            dashboard_port=args.port,
        )
    )
    return 1 if result.differences else EXIT_OK


def cmd_snapshot(args: argparse.Namespace) -> int:
    from reconciler.schedule import snapshot

    with Command(args) as cmd:
        n = snapshot(cmd.engine, cmd.settings)
    print(f"recorded {n} queue snapshots; hourly counts rolled up")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from reconciler.ops.prune import prune
    from reconciler.storage.types import utcnow

    with Command(args) as cmd:
        keep = args.keep_days if args.keep_days is not None else cmd.settings.retention.keep_days
        result = prune(
            cmd.engine,
            cmd.settings,
            keep=timedelta(days=keep),
            now=utcnow(),
            actor=args.actor or default_actor(),
            dry_run=args.dry_run,
            force=args.force,
        )
    verb = "would delete" if result.dry_run else "deleted"
    print(
        f"{verb} rows older than {result.cutoff.isoformat()}: {result.events} processed events, "
        f"{result.attempts} attempts, {result.deliveries} deliveries, {result.rejected} rejected "
        f"deliveries, {result.snapshots} queue snapshots, {result.outbox_messages} sent outbox "
        f"messages with {result.outbox_attempts} attempts, {result.idempotency_keys} expired "
        f"idempotency keys, {result.notifications} notifications"
    )
    return EXIT_OK


def cmd_sandbox(args: argparse.Namespace) -> int:
    from pathlib import Path

    from connectors.sandbox.run import SENDS, SendPlan, Target, serve
    from connectors.sandbox.sender import DeliveryFaults

    settings = load(args).settings
    for name in ("drop", "duplicate", "reorder", "delay"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise HookledgerError(f"--{name} must be a fraction between 0 and 1")
    if not 0.0 <= args.latency_ms <= 60_000:
        raise HookledgerError("--latency-ms must be between 0 and 60000")
    if args.rate_limit is not None and not 0.0 < args.rate_limit <= 100_000:
        raise HookledgerError("--rate-limit must be a number of calls a second above 0")
    check_port(args.host, args.port)
    send_plan = None
    if args.send:
        faults = DeliveryFaults(args.drop, args.duplicate, args.reorder, args.delay)
        targets = tuple(
            Target(s.name, s.kind, s.signing_secrets()[0])
            for s in settings.sources
            if s.enabled and s.kind in SENDS
        )
        receiver = f"http://{settings.receiver.host}:{settings.receiver.port}"
        send_plan = SendPlan(faults, args.seed, Path(args.report), receiver, targets)
    serve(
        host=args.host,
        port=args.port,
        seed=args.seed,
        send_plan=send_plan,
        log_level=settings.logging.level.lower(),
        latency_ms=args.latency_ms,
        rate_limit=args.rate_limit,
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None, *, owns_process: bool = False) -> int:
    """Run one command. ``owns_process``: the process is this command's alone (the ``hookledger``
    executable), so it may set process-wide state such as the garbage collector's
    (``reconciler/process.py``); callers that embed the CLI, tests among them, leave it off."""
    parser = build_parser()
    if argv is None and "_ARGCOMPLETE" in os.environ:  # the shell asks for completions
        import argcomplete

        argcomplete.autocomplete(parser)  # (prints them and exits)
    args = parser.parse_args(argv)
    args.owns_process = owns_process
    loaded = None
    if args.command == "doctor":  # a configuration that does not load is one of its verdicts
        configure_logging("WARNING")  # (its retries' lines would only repeat its verdicts)
        try:
            doctor: int = args.func(args)
            sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's exit
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:  # ``hookledger doctor | head``
            return EXIT_BROKEN_PIPE
        return doctor
    try:
        loaded = load(args)
        configure_logging(loaded.settings.logging.level, loaded.settings.logging.format)
        if loaded.path is None and args.command not in ("demo", "sandbox"):
            from reconciler.config import DEFAULT_CONFIG_PATH

            print(
                f"hookledger: no configuration file at {DEFAULT_CONFIG_PATH.resolve()} (nor "
                "$HOOKLEDGER_CONFIG): using the built-in defaults",
                file=sys.stderr,
            )
        check_sources(loaded.settings, getattr(args, "source", None))
        result: int = args.func(args)
        sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's exit
        return result
    except HookledgerError as exc:
        print(f"hookledger: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        # SQLAlchemy's own errors that no statement raised (a pool that timed out): one line, never
        # a traceback; a statement's arrive as DatabaseError (reconciler.storage.failures). SQLAlchemy
        # is asked only when it was imported: --help does not pay for importing it.
        sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
        if sqlalchemy_exc is None or not isinstance(exc, sqlalchemy_exc.SQLAlchemyError):
            raise
        from reconciler.storage.failures import database_error

        url = loaded.settings.database.url if loaded is not None else "?"
        print(f"hookledger: error: {database_error(url, exc)}", file=sys.stderr)
        return EXIT_ERROR


def run() -> None:
    code = main(owns_process=True)
    if code == EXIT_BROKEN_PIPE:
        # What is still buffered for the closed pipe would fail again when Python flushes standard
        # output at exit ("Exception ignored ... BrokenPipeError"): let it go nowhere instead.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)


if __name__ == "__main__":
    run()
