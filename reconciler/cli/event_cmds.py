"""``hookledger replay``, ``hookledger events list``, ``events show`` and ``events tail``: triage
from the terminal. One event (or every dead event of a selection, as the dashboard's bulk replay)
put back to pending; events listed by status, type, time and error, a page at a time; one shown
with its deliveries, attempts and audit trail; new deliveries and their outcomes followed."""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import json
import sys
from datetime import UTC, datetime
from typing import Any

from reconciler.audit import default_actor
from reconciler.cli.common import Command, bounded_int, check_sources, iso_time
from reconciler.errors import ConfigError
from reconciler.states import EventStatus

EXIT_OK = 0


STATUSES = tuple(s.value for s in EventStatus)
BULK_REASON = "bulk replay from the command line"
SHOWN_IDS = 10  # the ids a dry run prints


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "replay",
        parents=[parent],
        help="put an event (or every dead event of a selection) back to pending, same event ids",
    )
    p.add_argument("event_id", metavar="EVENT_ID", nargs="?", help="one event (else --status)")
    p.add_argument("--source", required=True, help="source name")
    p.add_argument(
        "--status",
        choices=("dead",),
        help="a bulk replay: every event of the source in this status (and the filters below)",
    )
    p.add_argument("--type", action="append", default=[], help="event type (repeatable)")
    p.add_argument("--since", type=iso_time, help="received at or after this ISO-8601 time")
    p.add_argument("--until", type=iso_time, help="received before this ISO-8601 time")
    p.add_argument("--error", default="", metavar="TEXT", help="the last error contains TEXT")
    p.add_argument(
        "--dry-run", action="store_true", help="count the selection and show its first ids"
    )
    p.add_argument("--yes", action="store_true", help="replay the selection (a bulk replay)")
    p.add_argument(
        "--expect",
        type=int,
        metavar="N",
        help="the count the dry run showed: refused if the selection holds another number now",
    )
    p.add_argument("--reason", help="why (kept in the audit log)")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_replay)

    events = sub.add_parser("events", parents=[parent], help="inspect inbox events")
    esub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    p = esub.add_parser("list", parents=[parent], help="events, newest first, a page at a time")
    p.add_argument("--source", action="append", default=[], help="source name (repeatable)")
    p.add_argument(
        "--status", action="append", default=[], choices=STATUSES, help="status (repeatable)"
    )
    p.add_argument("--type", action="append", default=[], help="event type (repeatable)")
    p.add_argument("--since", type=iso_time, help="received at or after this ISO-8601 time")
    p.add_argument("--until", type=iso_time, help="received before this ISO-8601 time")
    p.add_argument("--error", default="", metavar="TEXT", help="the last error contains TEXT")
    p.add_argument(
        "--limit",
        type=bounded_int(1, 1000),
        default=50,
        help="at most this many (1-1000, default 50)",
    )
    p.add_argument("--cursor", help="the next page: the cursor the previous page printed")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_events_list)
    p = esub.add_parser(
        "show", parents=[parent], help="an event with its deliveries, attempts and audit trail"
    )
    p.add_argument("event_id", metavar="EVENT_ID")
    p.add_argument("--source", required=True, help="source name")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--raw",
        action="store_true",
        help="show the payload and headers as stored (default: secrets, mask_fields, providers' "
        "personal fields and payment data masked)",
    )
    p.set_defaults(func=cmd_events_show)
    p = esub.add_parser(
        "tail", parents=[parent], help="follow new deliveries and their events' outcomes"
    )
    p.add_argument("--source", action="append", default=[], help="source name (repeatable)")
    p.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        metavar="SECONDS",
        help=f"how often to look (0.1-{MAX_INTERVAL:g}, default 1)",
    )
    p.set_defaults(func=cmd_events_tail)


MAX_INTERVAL = 3600.0


def _interval(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0.1 <= seconds <= MAX_INTERVAL:  # (NaN fails this too)
        raise argparse.ArgumentTypeError(f"{value}: must be between 0.1 and {MAX_INTERVAL:g}")
    return seconds


def _bulk_options(args: argparse.Namespace) -> list[str]:
    given = [
        ("--status", args.status),
        ("--type", args.type),
        ("--since", args.since),
        ("--until", args.until),
        ("--error", args.error),
        ("--dry-run", args.dry_run),
        ("--yes", args.yes),
        ("--expect", args.expect),
    ]
    return [name for name, value in given if value]


def cmd_replay(args: argparse.Namespace) -> int:
    from reconciler.inbox.replay import replay_event

    if args.event_id is None:
        return _bulk_replay(args)
    if bulk := _bulk_options(args):
        raise ConfigError(
            f"{', '.join(bulk)}: a bulk replay's options; give them without EVENT_ID (one event "
            "is replayed by its id alone)"
        )
    with Command(args) as cmd, cmd.engine.begin() as conn:
        result = replay_event(
            conn,
            source=args.source,
            event_id=args.event_id,
            actor=args.actor or default_actor(),
            reason=args.reason,
        )
    print(
        f"event {result.event_id} from {result.source}: {result.previous_status} -> pending "
        "(replay recorded in the audit log)"
    )
    return EXIT_OK


def _bulk_replay(args: argparse.Namespace) -> int:
    """Every dead event of the selection back to pending, as the dashboard's bulk replay does (one
    transaction, one audit entry): counted first, refused if the count moved."""
    from reconciler.ops.dead_letters import DeadFilter, count_dead, list_dead
    from reconciler.ops.operator_actions import replay_dead_matching

    if args.status is None:
        raise ConfigError("give an EVENT_ID, or --status dead for a bulk replay of a selection")
    if args.until is not None and args.since is not None and args.until <= args.since:
        raise ConfigError("--until: must be after --since")
    if not (args.dry_run or args.yes):
        raise ConfigError(
            "a bulk replay needs --yes (count the selection first with --dry-run; --expect N "
            "then refuses it if the count moved)"
        )
    with Command(args) as cmd:
        check_sources(cmd.settings, args.source)
        flt = DeadFilter(
            sources=(args.source,),
            types=tuple(args.type),
            error_contains=args.error,
            received_from=args.since,
            received_to=args.until,
        )
        with cmd.engine.connect() as conn:
            total = count_dead(conn, flt)
            first = list_dead(conn, flt, limit=SHOWN_IDS) if args.dry_run else []
        if args.dry_run:
            print(f"{total:,} {flt.describe()}")
            for row in first:
                print(f"  {row['event_id']}  {row['event_type'] or '-'}  {row['received_at']}")
            if total > len(first):
                print(f"  … and {total - len(first):,} more")
            if total:
                print(f"replay them with the same options and --yes --expect {total}")
            return EXIT_OK
        expected = total if args.expect is None else args.expect
        message = replay_dead_matching(
            cmd.engine,
            flt,
            actor=args.actor or default_actor(),
            reason=args.reason or BULK_REASON,
            expected=expected,
        )
    print(message)
    return EXIT_OK


def _encode_cursor(after: tuple[Any, int]) -> str:
    text = json.dumps([after[0].isoformat(), after[1]])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode_cursor(token: str) -> tuple[datetime, int]:
    try:
        at, last_id = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        when = datetime.fromisoformat(at)
        if not isinstance(last_id, int):
            raise TypeError
    except (ValueError, TypeError, UnicodeDecodeError, binascii.Error):
        raise ConfigError(f"--cursor {token[:40]!r}: not a cursor 'events list' printed") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)), last_id


def cmd_events_list(args: argparse.Namespace) -> int:
    from reconciler.ops.events import EventFilter, list_events
    from reconciler.ops.masking import masker_for

    if args.until is not None and args.since is not None and args.until <= args.since:
        raise ConfigError("--until: must be after --since")
    after = _decode_cursor(args.cursor) if args.cursor else None
    with Command(args) as cmd:
        check_sources(cmd.settings, args.source)
        flt = EventFilter(
            sources=tuple(args.source),
            types=tuple(args.type),
            statuses=tuple(args.status),
            received_from=args.since,
            received_to=args.until,
            error_contains=args.error,
        )
        with cmd.engine.connect() as conn:
            page = list_events(conn, flt, after=after, limit=args.limit)
        masker = masker_for(cmd.settings, *args.source)
    for row in page.rows:  # an error may quote the payload
        row["last_error"] = masker.mask(row["last_error"])
        row.pop("id", None)
    cursor = _encode_cursor(page.next_after) if page.next_after else None
    if args.json:
        print(
            json.dumps(
                {"events": _jsonable(page.rows), "total": page.total, "next_cursor": cursor},
                indent=2,
                default=str,
            )
        )
        return EXIT_OK
    if page.rows:  # the columns named, as the rows lay them out
        print(
            f"{'RECEIVED (UTC)':<19}  {'SOURCE':<10} {'STATUS':<10} {'TRIES':>5}  "
            f"{'TYPE':<28} EVENT ID  LAST ERROR"
        )
    for r in page.rows:
        error = (r["last_error"] or "").splitlines()[0][:80] if r["last_error"] else ""
        print(
            f"{r['received_at']:%Y-%m-%d %H:%M:%S}  {r['source']:<10} {r['status']!s:<10} "
            f"{r['attempts']:>5}  {r['event_type'] or '-':<28} {r['event_id']}  {error}".rstrip()
        )
    shown = f"{len(page.rows):,} of {page.total:,}" if page.rows else "no event matches"
    print(shown + (f"; next page: --cursor {cursor}" if cursor else ""))
    return EXIT_OK


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def cmd_events_show(args: argparse.Namespace) -> int:
    from reconciler.inbox.replay import event_detail
    from reconciler.ops.chain import business_rows
    from reconciler.ops.links import event_url
    from reconciler.ops.masking import masker_for

    with Command(args) as cmd:
        with cmd.engine.connect() as conn:
            detail = event_detail(conn, source=args.source, event_id=args.event_id)
        ev = detail.event
        chain = business_rows(
            cmd.engine,
            cmd.settings,
            source=args.source,
            event_type=ev["event_type"],
            object_type=ev["object_type"],
            object_id=ev["object_id"],
        )
    masker = masker_for(cmd.settings, args.source)
    if not args.raw:  # masked as the dashboard's Events page masks it
        detail.event["body"] = masker.mask_body(detail.event["body"], detail.event["content_type"])
        # headers as received: a card number may come in any of them
        detail.event["headers"] = masker.mask(detail.event["headers"] or {})
        detail.event["last_error"] = masker.mask(detail.event["last_error"])
        for attempt in detail.attempts:  # an error may quote the payload
            attempt["error"] = masker.mask(attempt.get("error"))
    data = _jsonable(
        {
            "event": detail.event,
            "deliveries": detail.deliveries,
            "attempts": detail.attempts,
            "audit": detail.audit,
            "outgoing": detail.messages,
            "business_rows": [
                {
                    "table": b.table,
                    "key": b.key,
                    "rows": b.rows if args.raw else [masker.mask(r) for r in b.rows],
                    "error": b.error,
                }
                for b in chain
            ],
        }
    )
    data["link"] = event_url(args.source, args.event_id, cmd.settings.dashboard.base_url)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return EXIT_OK
    ev = data["event"]
    body = ev.pop("body")
    for key in (
        "source",
        "event_id",
        "event_type",
        "object_type",
        "object_id",
        "status",
        "origin",
        "attempts",
        "received_at",
        "queued_at",
        "occurred_at",
        "next_attempt_at",
        "processed_at",
        "error_class",
        "last_error",
        "correlation_id",
    ):
        print(f"{key:>16}: {ev.get(key)}")
    print(f"{'dashboard':>16}: {data['link']}")
    print(f"\nbody{' (as stored)' if args.raw else ' (masked)'}:\n{body}")
    print(f"\ndeliveries ({len(data['deliveries'])}):")
    for d in data["deliveries"]:
        print(f"  {d['received_at']}  {d['outcome']:<9} {d['status_code']}  {d['reason'] or ''}")
    print(f"\nattempts ({len(data['attempts'])}):")
    for a in data["attempts"]:
        err = (a["error"] or "").splitlines()[0] if a["error"] else ""
        print(
            f"  #{a['attempt']}  {a['finished_at']}  {a['outcome']:<9} "
            f"{a['error_class'] or ''}  {err}"
        )
    print(f"\naudit ({len(data['audit'])}):")
    for entry in data["audit"]:
        print(f"  {entry['at']}  {entry['actor']}  {entry['action']}  {entry['reason'] or ''}")
    for b in data["business_rows"]:
        print(f"\nbusiness rows in {b['table']} for {b['key']} ({b['error'] or len(b['rows'])}):")
        for r in b["rows"]:
            print("  " + "  ".join(f"{k}={v}" for k, v in r.items()))
    if data["outgoing"]:
        print(f"\noutgoing messages ({len(data['outgoing'])}):")
    for m in data["outgoing"]:
        print(
            f"  #{m['id']}  {m['target']}  {m['status']:<7} attempts {m['attempts']}  "
            f"sent {m['sent_at'] or '-'}  key {m['key']}"
        )
    return EXIT_OK


def cmd_events_tail(args: argparse.Namespace) -> int:
    from reconciler.ops.masking import masker_for
    from reconciler.ops.tail import Tail, follow

    with Command(args) as cmd:
        check_sources(cmd.settings, args.source)
        masker = masker_for(cmd.settings, *args.source)
        which = ", ".join(args.source) or "every source"
        said = f"following new deliveries of {which} (Ctrl-C to stop)"
        with contextlib.suppress(KeyboardInterrupt):  # the way to stop it: not an error
            follow(
                cmd.engine,
                Tail(mask=masker.mask),
                lambda line: print(line, flush=True),
                sources=tuple(args.source),
                interval=args.interval,
                ready=lambda: print(said, file=sys.stderr, flush=True),
            )
    return EXIT_OK
