"""``hookledger notify``: one pass over the notification targets (what the scheduler does every
minute, for installations that run commands from cron instead), or ``--test`` to send each target
a test message now."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import Any

from reconciler.cli.common import Command
from reconciler.errors import ConfigError

EXIT_OK, EXIT_FAILED = 0, 2


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "notify",
        parents=[parent],
        help="tell the [[notify]] targets what is new (dead letters, runs, a missed slot), "
        "or send each a test message",
    )
    p.add_argument("--target", action="append", default=[], help="only this target (repeatable)")
    p.add_argument(
        "--test",
        action="store_true",
        help="send each target a test message now (nothing recorded)",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
    p.set_defaults(func=cmd_notify)


def cmd_notify(args: argparse.Namespace) -> int:
    with Command(args, require_schema=not args.test) as cmd:
        settings = cmd.settings
        known = [t.name for t in settings.notify]
        if not known:
            raise ConfigError("no [[notify]] target is configured")
        for name in args.target:
            if name not in known:
                raise ConfigError(
                    f"--target '{name}': no such [[notify]] target (configured: {', '.join(known)})"
                )
        if args.target:
            settings = settings.model_copy(
                update={"notify": tuple(t for t in settings.notify if t.name in args.target)}
            )
        results = _test(settings) if args.test else _dispatch(cmd, settings)
    if args.json:
        print(json.dumps({"targets": results}, indent=2))
    else:
        for name, result in results.items():
            print(f"{name}: {result['summary']}")
            for error in result["errors"]:
                print(f"  error: {error}", file=sys.stderr)
    return EXIT_FAILED if any(r["errors"] for r in results.values()) else EXIT_OK


def _test(settings: Any) -> dict[str, dict[str, Any]]:
    from reconciler.notify.notices import render
    from reconciler.notify.send import Sender
    from reconciler.storage.types import utcnow

    now = utcnow()
    data = {"at": now.isoformat(timespec="seconds")}
    message = render("test", data, settings.dashboard.base_url)
    results: dict[str, dict[str, Any]] = {}
    with Sender() as sender:
        for target in settings.notify:
            outcome = sender.send(target, f"test:{data['at']}", "test", data, message, now)
            results[target.name] = {
                "summary": "test sent" if outcome.ok else "test NOT sent",
                "sent": outcome.ok,
                "errors": [outcome.error] if outcome.error else [],
            }
    return results


def _dispatch(cmd: Command, settings: Any) -> dict[str, dict[str, Any]]:
    from reconciler.notify.dispatch import dispatch
    from reconciler.notify.store import unsent
    from reconciler.reconcile.sweep import nightly_names

    cmd.check_database()
    reports = dispatch(cmd.engine, settings, scheduled=partial(nightly_names, cmd.engine, settings))
    with cmd.engine.connect() as conn:
        waiting = unsent(conn)
    results: dict[str, dict[str, Any]] = {}
    for name, report in reports.items():
        outcomes = (
            ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items())) or "nothing due"
        )
        left = waiting.get(name, {})
        results[name] = {
            "summary": f"{report.recorded} new; {outcomes}"
            + (f"; pending {left['pending']}" if left.get("pending") else "")
            + (f"; failed so far {left['failed']}" if left.get("failed") else ""),
            "recorded": report.recorded,
            "outcomes": report.outcomes,
            "unsent": left,
            "errors": report.errors,
        }
    return results
