"""CLI commands of the reconciler: reconcile, export, discrepancies, backfill."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from reconciler.audit import default_actor
from reconciler.cli.common import Command, iso_time, open_engine
from reconciler.errors import ConfigError, DatabaseError, HookledgerError
from reconciler.ops.links import page_url
from reconciler.process import freeze_startup_objects
from reconciler.states import DiscrepancyKind, DiscrepancyStatus

EXIT_OK, EXIT_DISCREPANCIES, EXIT_ERROR, EXIT_SKIPPED = 0, 1, 2, 3
KINDS = tuple(kind.value for kind in DiscrepancyKind)


def add_filter_options(p: argparse.ArgumentParser, *, default_status: str = "open") -> None:
    p.add_argument("--source", action="append", default=[], help="source name (repeatable)")
    p.add_argument("--kind", action="append", default=[], choices=KINDS, help="kind (repeatable)")
    p.add_argument(
        "--status", default=default_status, choices=["open", "resolved", "ignored", "all"]
    )
    p.add_argument("--since", type=iso_time, help="last seen at or after this ISO-8601 time")
    p.add_argument("--run", dest="run_id", help="only discrepancies seen by this run")


def _filter(args: argparse.Namespace) -> Any:
    from reconciler.reconcile.export import DiscrepancyFilter

    return DiscrepancyFilter(
        tuple(args.source), tuple(args.kind), args.status, args.since, args.run_id
    )


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "reconcile", parents=[parent], help="compare each source with the inbox and business tables"
    )
    p.add_argument(
        "--source",
        action="append",
        default=[],
        help="source name, or outbox:<target> (repeatable; default: every enabled source with "
        "an API and every outbox target)",
    )
    p.add_argument(
        "--since", type=iso_time, help="rescan from this ISO-8601 time instead of the cursor"
    )
    p.add_argument(
        "--full", action="store_true", help="ignore the cursor and rescan initial_lookback_hours"
    )
    p.add_argument("--dry-run", action="store_true", help="compare, report, write nothing")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.add_argument(
        "--fail-on-discrepancy", action="store_true", help="exit 1 if open discrepancies remain"
    )
    p.add_argument(
        "--no-notify",
        action="store_true",
        help="do not tell the [[notify]] targets what this run finds (now or later)",
    )
    p.set_defaults(func=cmd_reconcile)

    p = sub.add_parser(
        "schedule", parents=[parent], help="run the nightly reconciliation and queue snapshots"
    )
    p.add_argument("--run-now", action="store_true", help="also reconcile once at start")
    p.add_argument(
        "--check-heartbeat",
        type=float,
        metavar="SECONDS",
        help="no scheduler: exit 0 if a scheduler on this host beat within SECONDS, else 1 (a "
        "container's health check)",
    )
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("export", parents=[parent], help="write discrepancies as CSV")
    add_filter_options(p)
    p.add_argument("-o", "--output", required=True, help="file to write, or - for standard output")
    p.set_defaults(func=cmd_export)

    d = sub.add_parser("discrepancies", parents=[parent], help="resolve or ignore discrepancies")
    dsub = d.add_subparsers(dest="discrepancies_command", required=True, metavar="SUBCOMMAND")
    for name in ("resolve", "ignore"):
        p = dsub.add_parser(
            name, parents=[parent], help=f"{name} one discrepancy, or all that match the filters"
        )
        p.add_argument("id", nargs="?", type=int, metavar="ID")
        p.add_argument("--reason", required=True, help="why (kept in the audit log)")
        p.add_argument("--actor", help="who (default: the OS user)")
        p.add_argument("--yes", action="store_true", help="confirm a bulk change")
        add_filter_options(p)
        p.set_defaults(func=cmd_discrepancies, new_status=name)
    for name, what in (
        ("keep-stored", "keep the stored version: resolve every conflicting field of the event"),
        ("apply-later", "replace the stored event with the later delivery's body and replay it"),
    ):
        p = dsub.add_parser(name, parents=[parent], help=f"a conflict: {what}")
        p.add_argument("id", type=int, metavar="ID", help="the conflict discrepancy's id")
        p.add_argument("--reason", required=True, help="why (kept in the audit log)")
        p.add_argument("--actor", help="who (default: the OS user)")
        p.set_defaults(func=cmd_conflict, conflict_action=name)

    p = sub.add_parser(
        "backfill", parents=[parent], help="fetch an event from its source into the inbox"
    )
    p.add_argument("event_id", metavar="EVENT_ID")
    p.add_argument("--source", required=True)
    p.add_argument(
        "--redeliver",
        action="store_true",
        help="ask the provider to send it again instead (GitHub, GitLab, PayPal)",
    )
    p.add_argument("--reason")
    p.add_argument("--actor")
    p.set_defaults(func=cmd_backfill)


def _names(cmd: Command, names: list[str]) -> list[str]:
    """The sources (and ``outbox:<target>`` checks) a run covers: those named (checked against the
    configuration before the command ran), else every source with an API and every outbox target."""
    from reconciler.reconcile.sweep import nightly_names

    return list(names) if names else nightly_names(cmd.engine, cmd.settings)


def _not_reconciled(settings: Any) -> list[str]:
    """Why each enabled source a run of everything leaves out is left out (said, not silent)."""
    from reconciler.reconcile.run import reconcilable_sources
    from reconciler.sources import provider

    covered = {s.name for s in reconcilable_sources(settings)}
    lines = []
    for source in settings.sources:
        if not source.enabled or source.name in covered:
            continue
        own = provider(source.kind)
        if own.build is None:
            why = f"hookledger cannot read a '{source.kind}' API (it only receives)"
        else:
            keys = ["api_key_env", *(k for k in own.keys.model_fields if k.endswith("_env"))]
            why = f"no API credentials: set {' or '.join(keys)} in its [[sources]] entry"
        lines.append(f"{source.name}: skipped, not reconciled: {why}")
    return lines


def cmd_reconcile(args: argparse.Namespace) -> int:
    from reconciler.reconcile.progress import ScanProgress
    from reconciler.reconcile.run import reconcilable_sources
    from reconciler.reconcile.sweep import reconcile_sources, reconciler_for

    cmd = Command(args)
    loaded, settings = cmd.loaded, cmd.settings
    if not (args.source or reconcilable_sources(settings) or settings.outbox.targets):
        raise ConfigError(
            "no source to reconcile: give --source or configure a source with an API key"
        )
    if not args.source:
        for line in _not_reconciled(settings):
            print(f"hookledger: {line}", file=sys.stderr)
    names: list[str] = []
    progress, task_ids = _progress(not args.json and sys.stderr.isatty())

    def progress_for(name: str) -> Any:
        if progress is None:
            return None
        task_ids[name] = progress.add_task(name, total=None, line="starting")

        def update(source: str, now: ScanProgress) -> None:
            progress.update(task_ids[source], completed=now.records, line=now.describe())

        return update

    if args.owns_process:
        freeze_startup_objects()
    try:
        with cmd, reconciler_for(cmd.engine, settings) as reconciler:
            names = _names(cmd, args.source)
            outcomes = reconcile_sources(
                reconciler,
                names,
                trigger="cli",
                full=args.full,
                since=args.since,
                dry_run=args.dry_run,
                progress_for=progress_for,
                quiet=args.no_notify,
            )
            if settings.notify and not args.dry_run and not args.no_notify:
                _notify(cmd.engine, settings)
    finally:
        if progress is not None:
            progress.stop()
    summaries: list[dict[str, Any]] = []
    failed = False
    for outcome in outcomes:
        if outcome.summary is None:
            failed = True
            summaries.append({"source": outcome.source, "status": "failed", "error": outcome.error})
            print(f"hookledger: error: {outcome.error}", file=sys.stderr)
        else:
            summaries.append(outcome.summary.to_json())
    impact = _impact(loaded, names)
    base = settings.dashboard.base_url  # where the discrepancies can be opened
    if args.json:
        print(json.dumps({"runs": summaries, "money_impact": impact}, indent=2, default=str))
    else:
        for s in summaries:
            if s["status"] == "failed":
                continue
            if s["status"] == "skipped":
                print(f"{s['source']}: skipped: {s['error']}")
                continue
            found = ", ".join(f"{k} {v}" for k, v in sorted(s["found"].items())) or "nothing"
            open_now = ", ".join(f"{k} {v}" for k, v in sorted(s["open"].items())) or "none"
            print(
                f"{s['source']}: {s['status']}, {s['records_scanned']} records scanned; found: {found}; resolved {s['resolved']}; open now: {open_now}"
            )
            for gap in s.get("gaps") or ():  # history the provider no longer keeps
                print(f"  not checked ({gap['cause']}): {gap['reason']}")
            if any(s["found"].values()):  # what this run saw, in the dashboard
                link = page_url("discrepancies", base, run=s["run_id"], status="all")
                print(f"  seen by this run: {link}")
            if s["open"]:
                print(f"  open: {page_url('discrepancies', base, source=[s['source']])}")
        if impact:  # the state after the run(s), not what this run found: say so
            print("open money impact (missing / diverged / unapplied, all runs):")
        for row in impact:
            print(
                f"  {row['source']}: {row['kind']} {row['records']} records, "
                f"{row['amount']} {(row['currency'] or '?').upper()} (minor units)"
            )
    if failed:
        return EXIT_ERROR
    if any(s["status"] == "skipped" for s in summaries):
        return EXIT_SKIPPED  # nothing was checked: a script must not read this as success
    if args.fail_on_discrepancy and any(s.get("open") for s in summaries):
        return EXIT_DISCREPANCIES
    return EXIT_OK


def _notify(engine: Any, settings: Any) -> None:
    """Tell the notification targets; a target that cannot be told is a logged warning, never
    the run's failure (its exit status is the reconciliation's)."""
    from reconciler.notify.dispatch import dispatch
    from reconciler.reconcile.sweep import nightly_names

    dispatch(engine, settings, scheduled=partial(nightly_names, engine, settings))


def _impact(loaded: Any, sources: list[str]) -> list[dict[str, Any]]:
    from reconciler.reconcile.export import money_impact

    try:
        engine = open_engine(loaded)
    except HookledgerError as exc:  # the runs' own results are still printed
        print(f"hookledger: error: money impact not computed: {exc}", file=sys.stderr)
        return []
    try:
        with engine.connect() as conn:
            return money_impact(conn, tuple(sources))
    except DatabaseError as exc:
        print(f"hookledger: error: money impact not computed: {exc}", file=sys.stderr)
        return []
    finally:
        engine.dispose()


def _progress(enabled: bool) -> tuple[Any, dict[str, Any]]:
    if not enabled:
        return None, {}
    from rich.progress import (
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f"{task.speed:,.0f} records/s" if task.speed else "")

    # records read, slices done of planned (a sliced scan) and requests a second to the source
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.fields[line]}"),
        RateColumn(),
        TimeElapsedColumn(),
    )
    progress.start()
    return progress, {}


def cmd_export(args: argparse.Namespace) -> int:
    from reconciler.reconcile.export import write_csv

    flt = _filter(args)
    with Command(args) as cmd, cmd.engine.connect() as conn:
        if args.output == "-":
            write_csv(conn, flt, sys.stdout)
        else:
            target = Path(args.output)
            if not target.parent.is_dir():  # a typo in a path must not become a new folder
                raise HookledgerError(
                    f"-o {args.output}: the folder {target.parent} does not exist"
                )
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                    n = write_csv(conn, flt, fh)
                os.replace(tmp, target)  # complete or absent: never half-written
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            print(f"wrote {n} discrepancies to {target}", file=sys.stderr)
    return EXIT_OK


def cmd_discrepancies(args: argparse.Namespace) -> int:
    from reconciler.reconcile.export import count
    from reconciler.reconcile.repair import set_status, set_status_bulk

    status = (
        DiscrepancyStatus.RESOLVED if args.new_status == "resolve" else DiscrepancyStatus.IGNORED
    )
    actor = args.actor or default_actor()
    with Command(args) as cmd, cmd.engine.begin() as conn:
        if args.id is not None:
            set_status(conn, args.id, status, actor=actor, reason=args.reason)
            print(f"discrepancy {args.id}: {status.value}")
            return EXIT_OK
        flt = _filter(args)
        n = count(conn, flt)
        if not args.yes:
            print(f"{n} discrepancies match; add --yes to {args.new_status} them", file=sys.stderr)
            return EXIT_ERROR
        done = set_status_bulk(conn, flt, status, actor=actor, reason=args.reason)
        print(f"{done} discrepancies: {status.value}")
    return EXIT_OK


def cmd_conflict(args: argparse.Namespace) -> int:
    from reconciler.inbox.conflicts import apply_later, keep_stored

    actor = args.actor or default_actor()
    with Command(args) as cmd, cmd.engine.begin() as conn:
        if args.conflict_action == "keep-stored":
            n = keep_stored(conn, args.id, actor=actor, reason=args.reason)
            print(
                f"discrepancy {args.id}: kept the stored version; {n} conflicting fields resolved"
            )
            return EXIT_OK
        result = apply_later(conn, args.id, actor=actor, reason=args.reason)
    print(
        f"{result.source} {result.event_id}: {result.previous_status} -> pending with the later "
        f"delivery's body (same event id); {result.resolved} conflict discrepancies resolved"
    )
    return EXIT_OK


def cmd_backfill(args: argparse.Namespace) -> int:
    from reconciler.reconcile.repair import backfill
    from reconciler.sources import run_connector_factory

    with Command(args) as cmd:
        source = cmd.settings.source(args.source)
        if source is None:
            raise ConfigError(f"no source named '{args.source}' in the configuration")
        engine = cmd.engine
        connector = run_connector_factory(cmd.settings)(source)
        try:
            result = backfill(
                engine,
                source,
                connector,
                args.event_id,
                actor=args.actor or default_actor(),
                reason=args.reason,
                redeliver=args.redeliver,
            )
        finally:
            connector.close()
    closed = "; its missing discrepancy is resolved" if result.missing_resolved else ""
    print(f"{result.source} {result.event_id}: {result.outcome}{closed}")
    return EXIT_OK


def cmd_schedule(args: argparse.Namespace) -> int:
    import signal
    import socket

    from reconciler.reconcile.sweep import reconciler_for, register_targets
    from reconciler.schedule import build_scheduler, heartbeat_age

    if args.check_heartbeat is not None:
        with Command(args) as cmd:
            age = heartbeat_age(cmd.engine, socket.gethostname())
        if age is None or age > args.check_heartbeat:
            said = "no heartbeat" if age is None else f"last heartbeat {age:.0f} s ago"
            print(f"scheduler on {socket.gethostname()}: {said}", file=sys.stderr)
            return EXIT_DISCREPANCIES  # 1: unhealthy
        print(f"scheduler on {socket.gethostname()}: beat {age:.0f} s ago")
        return EXIT_OK

    with Command(args) as cmd:
        settings = cmd.settings
        register_targets(cmd.engine, settings)  # told about what happens from the start on
        with reconciler_for(cmd.engine, settings) as reconciler:
            scheduler = build_scheduler(cmd.engine, settings, reconciler, run_now=args.run_now)
            if args.owns_process:
                freeze_startup_objects()
            signal.signal(signal.SIGTERM, lambda *_: scheduler.shutdown(wait=False))
            print(
                f"scheduler started: reconcile on '{settings.reconcile.schedule}' "
                f"({settings.reconcile.timezone}), queue snapshot every "
                f"{settings.reconcile.snapshot_interval_seconds}s",
                file=sys.stderr,
                flush=True,
            )
            scheduler.start()
    return EXIT_OK
