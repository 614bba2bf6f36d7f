"""``hookledger doctor``: a pass/fail line for everything an installation needs, exit 0 or 2."""

from __future__ import annotations

import argparse
from typing import Any

EXIT_OK, EXIT_FAILED = 0, 2


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "doctor",
        parents=[parent],
        help="check the configuration, its environment variables, the database, each source's "
        "API key, the business tables, the schedule and the dashboard's sign-in",
    )
    p.add_argument("--json", action="store_true", help="print the checks as one JSON document")
    p.add_argument(
        "--offline",
        action="store_true",
        help="skip the checks that call out: providers' APIs, the identity provider, the "
        "receiver's public URL",
    )
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from reconciler.ops.doctor import as_json, diagnose, failed, render

    verdicts = diagnose(getattr(args, "config", None), offline=args.offline)
    if args.json:
        print(as_json(verdicts))
    else:
        for line in render(verdicts):
            print(line)
    return EXIT_FAILED if failed(verdicts) else EXIT_OK
