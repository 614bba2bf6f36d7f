"""``hookledger replay`` and ``hookledger events show``: one inbox event, put back to pending or
shown with its deliveries, attempts and audit trail."""

from __future__ import annotations

import argparse
import json
from typing import Any

from reconciler.audit import default_actor
from reconciler.cli.common import Command

EXIT_OK = 0


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "replay", parents=[parent], help="put an event back to pending, keeping its event id"
    )
    p.add_argument("event_id", metavar="EVENT_ID")
    p.add_argument("--source", required=True, help="source name")
    p.add_argument("--reason", help="why (kept in the audit log)")
    p.add_argument("--actor", default=None, help="who (default: the OS user)")
    p.set_defaults(func=cmd_replay)

    events = sub.add_parser("events", parents=[parent], help="inspect inbox events")
    esub = events.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    p = esub.add_parser(
        "show", parents=[parent], help="an event with its deliveries, attempts and audit trail"
    )
    p.add_argument("event_id", metavar="EVENT_ID")
    p.add_argument("--source", required=True, help="source name")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--raw",
        action="store_true",
        help="show the payload as stored (default: secrets, mask_fields and payment data masked)",
    )
    p.set_defaults(func=cmd_events_show)


def cmd_replay(args: argparse.Namespace) -> int:
    from reconciler.inbox.replay import replay_event

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
    from reconciler.ops.masking import Masker

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
    masker = Masker(cmd.settings.dashboard.mask_fields)
    if not args.raw:  # masked as the dashboard's Events page masks it
        detail.event["body"] = masker.mask_body(detail.event["body"], detail.event["content_type"])
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
