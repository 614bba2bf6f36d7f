"""``hookledger drill``: deliver stored events again, shuffled, and compare the business state."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from reconciler.cli.common import Command, bounded_int, iso_time, unknown_source_error

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "drill",
        parents=[parent],
        help="deliver stored events again (twice, shuffled) and compare the business state",
    )
    p.add_argument("--source", required=True, help="source name")
    p.add_argument("--since", required=True, type=iso_time, help="events received from (ISO-8601)")
    p.add_argument("--until", type=iso_time, help="events received before (ISO-8601; default now)")
    p.add_argument(
        "--times", type=bounded_int(1, 100), default=2, help="deliveries per event (default 2)"
    )
    p.add_argument(
        "--shuffle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="shuffle the deliveries (default) or keep provider order",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle (default 0)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--handlers", action="store_true", help="run the configured handlers in process"
    )
    mode.add_argument("--target", metavar="URL", help="POST re-signed deliveries to this receiver")
    p.add_argument(
        "--business-url",
        help="the drilled business database (--handlers: default a temporary SQLite one; "
        "--target: the staging receiver's, required)",
    )
    p.add_argument(
        "--reference-url", help="--target: the reference business database ([business] url)"
    )
    p.add_argument(
        "--wait-seconds",
        type=float,
        default=60.0,
        help="--target: how long the staging worker may take to apply them (default 60)",
    )
    p.add_argument("--json", action="store_true", help="print a machine-readable result")
    p.set_defaults(func=cmd_drill)


def cmd_drill(args: argparse.Namespace) -> int:
    from reconciler.errors import ConfigError
    from reconciler.inbox.handlers import default_registry, load_handler_modules
    from reconciler.ops.drill import drill_handlers, drill_target

    with Command(args) as cmd:
        settings = cmd.settings
        source = settings.source(args.source)
        if source is None:
            raise unknown_source_error(settings, args.source)
        if args.until is not None and args.until <= args.since:
            raise ConfigError("--until: must be after --since")
        progress, update = _progress(not args.json and sys.stderr.isatty())
        try:
            if args.handlers:
                if args.reference_url:
                    raise ConfigError("--reference-url: only with --target")
                load_handler_modules(settings.worker.handlers, settings.worker.import_paths)
                result = drill_handlers(
                    cmd.engine,
                    settings,
                    default_registry,
                    source,
                    since=args.since,
                    until=args.until,
                    times=args.times,
                    shuffle=args.shuffle,
                    seed=args.seed,
                    business_url=args.business_url,
                    progress=update,
                )
            else:
                if not args.business_url:
                    raise ConfigError("--business-url: required with --target (staging's)")
                result = drill_target(
                    cmd.engine,
                    settings,
                    source,
                    target=args.target,
                    business_url=args.business_url,
                    reference_url=args.reference_url,
                    since=args.since,
                    until=args.until,
                    times=args.times,
                    shuffle=args.shuffle,
                    seed=args.seed,
                    wait_seconds=args.wait_seconds,
                    progress=update,
                )
        finally:
            if progress is not None:
                progress.stop()
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        verdict = "equal" if result.equal else f"{len(result.differences)} differences"
        print(
            f"{args.source}: {result.events} events delivered {result.deliveries} times"
            f"{' (shuffled)' if args.shuffle else ''}: {verdict}"
            + (f"; {result.failed} applications failed" if result.failed else "")
        )
        for d in result.differences[:200]:
            where = f"{d.table} {d.key}" + (f" {d.field}" if d.field else "")
            print(f"  {d.kind:<9} {where}: reference {d.expected!r}, drilled {d.actual!r}")
        if len(result.differences) > 200:
            print(f"  ... {len(result.differences) - 200} more (--json lists all)")
    return EXIT_EQUAL if result.equal else EXIT_DIFFERENT


def _progress(enabled: bool) -> tuple[Any, Any]:
    if not enabled:
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(TextColumn("drill"), BarColumn(), MofNCompleteColumn())
    progress.start()
    task = progress.add_task("drill", total=None)
    return progress, lambda done, total: progress.update(task, completed=done, total=total)
