"""``hookledger publish`` and ``hookledger outbox list|show|replay|recover|pause|resume``: the
outgoing side."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.audit import default_actor
from reconciler.cli.common import Command, iso_time, run_loops, summarise
from reconciler.errors import ConfigError, HookledgerError
from reconciler.states import OutboxStatus

EXIT_OK = 0
STATUSES = tuple(s.value for s in OutboxStatus)


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "publish", parents=[parent], help="send the outbox's messages to their targets"
    )
    p.add_argument("--once", action="store_true", help="send what is due, then exit")
    p.add_argument(
        "--concurrency", type=int, help="messages in flight at once (default: [outbox] concurrency)"
    )
    p.set_defaults(func=cmd_publish)

    outbox = sub.add_parser("outbox", parents=[parent], help="inspect and replay outgoing messages")
    osub = outbox.add_subparsers(dest="outbox_command", required=True, metavar="SUBCOMMAND")
    p = osub.add_parser("list", parents=[parent], help="messages, newest first")
    p.add_argument("--target", action="append", default=[], help="target name (repeatable)")
    p.add_argument(
        "--status", action="append", default=[], choices=STATUSES, help="status (repeatable)"
    )
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.add_argument("--before", type=int, metavar="ID", help="only messages older than this id")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_outbox_list)

    p = osub.add_parser("show", parents=[parent], help="one message and its attempts")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--raw", action="store_true", help="the payload as stored (default: masked)")
    p.set_defaults(func=cmd_outbox_show)

    p = osub.add_parser(
        "replay", parents=[parent], help="put dead messages back to pending, keeping their keys"
    )
    p.add_argument("ids", type=int, nargs="+", metavar="ID")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    p.add_argument("--actor", help="who (default: the OS user)")
    p.set_defaults(func=cmd_outbox_replay)

    p = osub.add_parser(
        "recover",
        parents=[parent],
        help="every dead message of a target since a time back to pending (Svix's 'recover')",
    )
    p.add_argument("--target", required=True, help="target name")
    p.add_argument("--since", required=True, type=iso_time, help="went dead at or after (ISO-8601)")
    p.add_argument("--dry-run", action="store_true", help="count them, change nothing")
    p.add_argument("--yes", action="store_true", help="recover them")
    p.add_argument(
        "--expect", type=int, metavar="N", help="the dry run's count: refused if it moved"
    )
    p.add_argument("--reason", help="why (kept in the audit log; required with --yes)")
    p.add_argument("--actor", help="who (default: the OS user)")
    p.set_defaults(func=cmd_outbox_recover)

    for name, what in (
        ("pause", "stop sending a target's messages (they stay pending) until it is resumed"),
        ("resume", "send a paused target's messages again"),
    ):
        p = osub.add_parser(name, parents=[parent], help=what)
        p.add_argument("target", metavar="TARGET", help="target name")
        p.add_argument("--reason", required=True, help="why (kept in the audit log)")
        p.add_argument("--actor", help="who (default: the OS user)")
        p.set_defaults(func=cmd_outbox_pause if name == "pause" else cmd_outbox_resume)


def publishers_for(cmd: Command, concurrency: int) -> list[Any]:
    """``concurrency`` publishers (the targets' secrets resolved: a missing one stops the command
    before anything is claimed); the caller closes them."""
    from reconciler.outbox.publisher import publishers

    if not cmd.settings.outbox.targets:
        where = cmd.loaded.path or "the built-in defaults"
        raise ConfigError(f"{where}: no [[outbox.targets]]: there is nothing to publish to")
    if concurrency < 1:
        raise HookledgerError("--concurrency must be at least 1")
    return publishers(cmd.engine, cmd.settings, concurrency)


def cmd_publish(args: argparse.Namespace) -> int:
    with Command(args) as cmd:
        concurrency = (
            cmd.settings.outbox.concurrency if args.concurrency is None else args.concurrency
        )
        loops = publishers_for(cmd, concurrency)
        try:
            run_loops([loops], once=args.once)
        finally:
            for loop in loops:
                loop.close()
    print(f"claimed {sum(p.stats.claimed for p in loops)}: {summarise(loops)}")
    return EXIT_OK


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if hasattr(value, "value") else value


def cmd_outbox_list(args: argparse.Namespace) -> int:
    from reconciler.ops.outbox import list_messages

    if not 1 <= args.limit <= 1000:
        raise HookledgerError("--limit must be between 1 and 1000")
    with Command(args) as cmd, cmd.engine.connect() as conn:
        rows = list_messages(
            conn,
            targets=args.target,
            statuses=args.status,
            before_id=args.before,
            limit=args.limit,
        )
    if args.json:
        print(json.dumps([_plain(r) for r in rows], indent=2))
        return EXIT_OK
    for r in rows:
        error = (r["last_error"] or "").splitlines()[0][:100] if r["last_error"] else ""
        print(
            f"{r['id']:>8}  {r['target']:<12} {r['status']!s:<8} {r['attempts']:>2}  "
            f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['key']}  {error}"
        )
    if not rows:
        print("no outbox message matches")
    return EXIT_OK


def cmd_outbox_show(args: argparse.Namespace) -> int:
    from reconciler.ops.masking import Masker
    from reconciler.ops.outbox import message_detail

    with Command(args) as cmd:
        with cmd.engine.connect() as conn:
            detail = message_detail(conn, args.id)
        masker = Masker(cmd.settings.dashboard.mask_fields)
    msg = dict(detail.message)
    payload = msg.pop("payload")
    msg["payload"] = (
        payload.decode("utf-8", errors="replace") if args.raw else masker.mask_body(payload)
    )
    msg["headers"] = msg["headers"] if args.raw else masker.mask(msg["headers"] or {})
    if not args.raw:  # an error may quote what the target answered
        msg["last_error"] = masker.mask(msg["last_error"])
    data = _plain({"message": msg, "attempts": detail.attempts})
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    shown = data["message"]
    for key in (
        "id",
        "target",
        "key",
        "status",
        "attempts",
        "created_at",
        "queued_at",
        "next_attempt_at",
        "sent_at",
        "dead_at",
        "last_status_code",
        "error_class",
        "last_error",
        "source",
        "event_id",
        "correlation_id",
        "object_key",
        "content_type",
    ):
        print(f"{key:>16}: {shown.get(key)}")
    print(f"\npayload{' (as stored)' if args.raw else ' (masked)'}:\n{shown['payload']}")
    print(f"\nattempts ({len(data['attempts'])}):")
    for a in data["attempts"]:
        err = (a["error"] or "").splitlines()[0] if a["error"] else ""
        print(
            f"  #{a['attempt']}  {a['finished_at']}  {a['outcome']:<6} "
            f"{a['status_code'] or '-'}  {a['error_class'] or ''}  {err}"
        )
    return EXIT_OK


def cmd_outbox_replay(args: argparse.Namespace) -> int:
    from reconciler.ops.outbox import replay

    with Command(args) as cmd:
        message = replay(
            cmd.engine, args.ids, actor=args.actor or default_actor(), reason=args.reason
        )
    print(message)
    return EXIT_OK


def cmd_outbox_recover(args: argparse.Namespace) -> int:
    from reconciler.ops.outbox import recover
    from reconciler.outbox.store import count_dead_since

    if not (args.dry_run or args.yes):
        raise ConfigError("outbox recover needs --dry-run (count) or --yes (recover)")
    with Command(args) as cmd:
        if cmd.settings.outbox.target(args.target) is None:
            known = ", ".join(t.name for t in cmd.settings.outbox.targets) or "none"
            raise ConfigError(f"--target {args.target!r}: no such target (configured: {known})")
        with cmd.engine.connect() as conn:
            total = count_dead_since(conn, args.target, args.since)
        if args.dry_run:
            print(f"{total:,} dead messages of {args.target} since {args.since.isoformat()}")
            if total:
                print(f"recover them with the same options and --yes --expect {total} --reason …")
            return EXIT_OK
        if not args.reason:
            raise ConfigError("--reason: required to recover messages (kept in the audit log)")
        message = recover(
            cmd.engine,
            args.target,
            args.since,
            actor=args.actor or default_actor(),
            reason=args.reason,
            expected=total if args.expect is None else args.expect,
        )
    print(message)
    return EXIT_OK


def cmd_outbox_pause(args: argparse.Namespace) -> int:
    from reconciler.ops.outbox import pause

    with Command(args) as cmd:
        if cmd.settings.outbox.target(args.target) is None:
            known = ", ".join(t.name for t in cmd.settings.outbox.targets) or "none"
            raise ConfigError(f"TARGET {args.target!r}: no such target (configured: {known})")
        message = pause(
            cmd.engine, args.target, actor=args.actor or default_actor(), reason=args.reason
        )
    print(message)
    return EXIT_OK


def cmd_outbox_resume(args: argparse.Namespace) -> int:
    from reconciler.ops.outbox import resume

    # (a target no longer configured can still be resumed: the refusal names what is paused)
    with Command(args) as cmd:
        message = resume(
            cmd.engine, args.target, actor=args.actor or default_actor(), reason=args.reason
        )
    print(message)
    return EXIT_OK
