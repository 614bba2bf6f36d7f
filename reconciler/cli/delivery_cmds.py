"""``hookledger deliveries list|resend``: the delivery log from the terminal, and one stored delivery
sent again, signed afresh, to a URL (a handler's idempotency, tested with real bytes)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.cli.common import Command, bounded_int, check_sources, iso_time
from reconciler.errors import ConfigError
from reconciler.states import DeliveryOutcome

EXIT_OK = 0
OUTCOMES = tuple(o.value for o in DeliveryOutcome)
MAX_TIMES = 100


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    deliveries = sub.add_parser(
        "deliveries", parents=[parent], help="the delivery log: list it, re-send a delivery"
    )
    dsub = deliveries.add_subparsers(dest="deliveries_command", required=True, metavar="SUBCOMMAND")
    p = dsub.add_parser("list", parents=[parent], help="deliveries, newest first")
    p.add_argument("--source", action="append", default=[], help="source name (repeatable)")
    p.add_argument(
        "--outcome", action="append", default=[], choices=OUTCOMES, help="outcome (repeatable)"
    )
    p.add_argument("--since", type=iso_time, help="received at or after this ISO-8601 time")
    p.add_argument("--until", type=iso_time, help="received before this ISO-8601 time")
    p.add_argument(
        "--limit",
        type=bounded_int(1, 1000),
        default=50,
        help="at most this many (1-1000, default 50)",
    )
    p.add_argument(
        "--before", type=int, metavar="ID", help="the next page: deliveries older than ID"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_deliveries_list)

    p = dsub.add_parser(
        "resend",
        parents=[parent],
        help="send a stored delivery again, its exact bytes, signed afresh",
    )
    p.add_argument("delivery_id", type=int, metavar="DELIVERY_ID")
    p.add_argument(
        "--to", required=True, metavar="URL", help="where: a receiver's /webhooks/<source> URL"
    )
    p.add_argument(
        "--times", type=bounded_int(1, MAX_TIMES), default=1, help=f"how many times (1-{MAX_TIMES})"
    )
    p.set_defaults(func=cmd_deliveries_resend)


def cmd_deliveries_list(args: argparse.Namespace) -> int:
    from reconciler.cli.event_cmds import _jsonable
    from reconciler.ops.deliveries import DeliveryFilter, list_deliveries

    if args.until is not None and args.since is not None and args.until <= args.since:
        raise ConfigError("--until: must be after --since")
    with Command(args) as cmd:
        check_sources(cmd.settings, args.source)
        flt = DeliveryFilter(
            sources=tuple(args.source),
            outcomes=tuple(args.outcome),
            received_from=args.since,
            received_to=args.until,
        )
        with cmd.engine.connect() as conn:
            page = list_deliveries(conn, flt, before_id=args.before, limit=args.limit)
    if args.json:
        document = {"deliveries": page.rows, "total": page.total, "next_before": page.next_before}
        print(json.dumps(_jsonable(document), indent=2, default=str))
        return EXIT_OK
    if page.rows:  # the columns named: DELIVERY is the id 'deliveries resend' takes
        print(
            f"{'DELIVERY':>8}  {'RECEIVED (UTC)':<19}  {'SOURCE':<10} {'OUTCOME':<9} HTTP  "
            "EVENT ID  REASON"
        )
    for r in page.rows:
        print(
            f"{r['id']:>8}  {r['received_at']:%Y-%m-%d %H:%M:%S}  {r['source']:<10} "
            f"{r['outcome']!s:<9} {r['status_code']:<4}  {r['event_id'] or '-'}  "
            f"{r['reason'] or ''}".rstrip()
        )
    shown = f"{len(page.rows):,} of {page.total:,}" if page.rows else "no delivery matches"
    print(shown + (f"; next page: --before {page.next_before}" if page.next_before else ""))
    return EXIT_OK


def cmd_deliveries_resend(args: argparse.Namespace) -> int:
    from reconciler.ops.deliveries import resend, stored_delivery
    from reconciler.ops.send import check_http_url

    check_http_url(args.to)
    with Command(args) as cmd:
        with cmd.engine.connect() as conn:
            stored = stored_delivery(conn, args.delivery_id)
        answers = resend(cmd.settings, stored, to=args.to, times=args.times)
    print(
        f"delivery {stored.id} ({stored.source} {stored.event_id}, {len(stored.body):,} bytes) "
        f"sent {len(answers)} time(s) to {args.to}:"
    )
    for a in answers:
        print(f"  {a.n:>3}: HTTP {a.status} {a.said}")
    return EXIT_OK
