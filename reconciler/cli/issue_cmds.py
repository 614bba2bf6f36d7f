"""``hookledger issues list|show|ack|resolve|retry``: failures grouped as issues, from the terminal.
``list`` and ``show`` bring the issues up to date first (as the scheduler does every minute), so
what they print is what failed up to now."""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta
from typing import Any

from reconciler.audit import default_actor
from reconciler.cli.common import Command, bounded_int
from reconciler.errors import ConfigError
from reconciler.states import IssueKind, IssueStatus

EXIT_OK = 0
STATUSES = tuple(s.value for s in IssueStatus)
KINDS = tuple(k.value for k in IssueKind)
SIGNATURE_SHOWN = 60  # characters of a signature in the list's table
_ISSUE_ID = re.compile(r"^\s*#?([0-9]{1,18})\s*$")  # ASCII digits: int() takes any script's


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    issues = sub.add_parser(
        "issues", parents=[parent], help="failures grouped by source, type and error signature"
    )
    isub = issues.add_subparsers(dest="issues_command", required=True, metavar="SUBCOMMAND")
    p = isub.add_parser("list", parents=[parent], help="issues, the most recently failing first")
    p.add_argument("--status", action="append", default=[], choices=STATUSES, help="(repeatable)")
    p.add_argument("--kind", action="append", default=[], choices=KINDS, help="(repeatable)")
    p.add_argument(
        "--source",
        dest="sources",
        action="append",
        default=[],
        help="source name, or outbox:<target> (repeatable)",
    )
    p.add_argument(
        "--limit", type=bounded_int(1, 1000), default=50, help="at most this many (default 50)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)

    p = isub.add_parser("show", parents=[parent], help="an issue, its latest failures and trend")
    p.add_argument("issue", metavar="ID")
    p.add_argument(
        "--members", type=bounded_int(1, 1000), default=20, help="failures shown (default 20)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_show)

    p = isub.add_parser("ack", parents=[parent], help="acknowledge an issue (someone is on it)")
    p.add_argument("issue", metavar="ID")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_ack)

    p = isub.add_parser("resolve", parents=[parent], help="resolve an issue")
    p.add_argument("issue", metavar="ID")
    p.add_argument("--reason", help="why (kept on the issue and in the audit log)")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_resolve)

    p = isub.add_parser(
        "retry", parents=[parent], help="put every dead event of an issue back to pending"
    )
    p.add_argument("issue", metavar="ID")
    p.add_argument("--dry-run", action="store_true", help="count them and show the first ids")
    p.add_argument("--yes", action="store_true", help="replay them (a bulk replay)")
    p.add_argument(
        "--expect",
        type=int,
        metavar="N",
        help="the count the dry run showed: refused if the issue holds another number now",
    )
    p.add_argument("--reason", help="why (kept in the audit log)")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_retry)


def issue_id(text: str) -> int:
    """An issue's number as the list prints it (``12`` or ``#12``): one line naming it if not."""
    match = _ISSUE_ID.match(text)
    if match is None or int(match.group(1)) < 1:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise ConfigError(f"issue id {shown!r}: not an issue number (see hookledger issues list)")
    return int(match.group(1))


def _refresh(cmd: Command) -> None:
    from reconciler.issues.refresh import refresh
    from reconciler.storage.types import utcnow

    refresh(cmd.engine, utcnow(), auto_resolve_after=cmd.settings.issues.auto_resolve_delta)


def cmd_list(args: argparse.Namespace) -> int:
    from reconciler.issues.queries import IssueFilter, list_issues

    flt = IssueFilter(
        statuses=tuple(IssueStatus(s) for s in args.status),
        sources=tuple(args.sources),
        kinds=tuple(IssueKind(k) for k in args.kind),
    )
    with Command(args) as cmd:
        _refresh(cmd)
        with cmd.engine.connect() as conn:
            rows = list_issues(conn, flt, limit=args.limit)
    if args.json:
        print(json.dumps([row.as_json() for row in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no issues" + (" match" if flt.where() else ""))
        return EXIT_OK
    print(
        f"{'ID':>6}  {'STATUS':<12}  {'KIND':<17}  {'SOURCE':<16}  {'TYPE':<20}  "
        f"{'COUNT':>7}  {'LAST SEEN':<20}  SIGNATURE"
    )
    for row in rows:
        print(
            f"{row.id:>6}  {row.status.value:<12}  {row.kind.value:<17}  {row.source:<16}  "
            f"{row.event_type or '-':<20}  {row.count:>7,}  "
            f"{row.last_seen.isoformat(timespec='seconds').replace('+00:00', 'Z'):<20}  "
            f"{row.signature[:SIGNATURE_SHOWN]}"
        )
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from reconciler.issues.queries import get_issue, members, trend
    from reconciler.storage.types import utcnow

    wanted = issue_id(args.issue)
    with Command(args) as cmd:
        _refresh(cmd)
        now = utcnow()
        with cmd.engine.connect() as conn:
            issue = get_issue(conn, wanted)
            latest = members(conn, wanted, limit=args.members)
            hours = trend(conn, wanted, now, width=timedelta(hours=1), buckets=24)
            days = trend(conn, wanted, now, width=timedelta(days=1), buckets=30)
    if args.json:
        out = {
            **issue.as_json(),
            "members": [{"item": m.item, "at": m.at.isoformat(), "state": m.state} for m in latest],
            "per_hour": [[at.isoformat(), n] for at, n in hours],
            "per_day": [[at.isoformat(), n] for at, n in days],
        }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"issue {issue.id}: {issue.status.value}, {issue.kind.value.replace('_', ' ')}")
    print(f"  source      {issue.source}")
    if issue.event_type:
        print(f"  type        {issue.event_type}")
    print(f"  signature   {issue.signature}")
    sample = (issue.sample_error or "").strip().splitlines() or ["-"]
    print(f"  sample      {sample[0][:300]}")
    print(f"  count       {issue.count:,} (reopened {issue.reopened_count} times)")
    print(f"  first seen  {issue.first_seen.isoformat(timespec='seconds')}")
    print(f"  last seen   {issue.last_seen.isoformat(timespec='seconds')}")
    if issue.acknowledged_by and issue.acknowledged_at:
        at = issue.acknowledged_at.isoformat(timespec="seconds")
        print(f"  acknowledged by {issue.acknowledged_by} at {at}")
    if issue.resolved_by and issue.resolved_at:
        why = f": {issue.resolved_reason}" if issue.resolved_reason else ""
        at = issue.resolved_at.isoformat(timespec="seconds")
        print(f"  resolved by {issue.resolved_by} at {at}{why}")
    print("  per hour, last 24 h: " + " ".join(str(n) for _, n in hours))
    print("  per day, last 30 days: " + " ".join(str(n) for _, n in days))
    print(f"latest {len(latest)} of {issue.count:,}:")
    for m in latest:
        state = f"  ({m.state})" if m.state else ""
        print(f"  {m.at.isoformat(timespec='seconds')}  {m.item}{state}")
    return EXIT_OK


def cmd_ack(args: argparse.Namespace) -> int:
    from reconciler.issues.actions import acknowledge

    wanted = issue_id(args.issue)
    with Command(args) as cmd:
        print(acknowledge(cmd.engine, wanted, actor=args.actor or default_actor()))
    return EXIT_OK


def cmd_resolve(args: argparse.Namespace) -> int:
    from reconciler.issues.actions import resolve

    wanted = issue_id(args.issue)
    with Command(args) as cmd:
        print(resolve(cmd.engine, wanted, actor=args.actor or default_actor(), reason=args.reason))
    return EXIT_OK


def cmd_retry(args: argparse.Namespace) -> int:
    """Counted first (--dry-run), then replayed with --yes through the bulk replay: one
    transaction, one audit entry, refused if the count moved from --expect."""
    from reconciler.issues.actions import retry_all, retry_selection
    from reconciler.ops.dead_letters import list_dead

    wanted = issue_id(args.issue)
    if not (args.dry_run or args.yes):
        raise ConfigError(
            "issues retry needs --yes (count the events first with --dry-run; --expect N then "
            "refuses the retry if the count moved)"
        )
    with Command(args) as cmd:
        _, flt, total = retry_selection(cmd.engine, wanted)
        if args.dry_run:
            with cmd.engine.connect() as conn:
                first = list_dead(conn, flt, limit=10)
            print(f"{total:,} {flt.describe()}")
            for row in first:
                print(f"  {row['event_id']}  {row['event_type'] or '-'}  {row['received_at']}")
            if total > len(first):
                print(f"  … and {total - len(first):,} more")
            if total:
                print(f"retry them with --yes --expect {total}")
            return EXIT_OK
        message = retry_all(
            cmd.engine,
            wanted,
            actor=args.actor or default_actor(),
            expected=total if args.expect is None else args.expect,
            reason=args.reason,
        )
    print(message)
    return EXIT_OK
