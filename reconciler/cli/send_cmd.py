"""``hookledger send``: a signed sample event to the running receiver (the development loop)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reconciler.cli.common import Command, bounded_int
from reconciler.errors import ConfigError

EXIT_OK, EXIT_REFUSED = 0, 1
MAX_COUNT = 1000
MAX_WAIT = 600
DEFAULT_WAIT = 10  # a receiver started with `serve &` a line before listens within a few seconds


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "send",
        parents=[parent],
        help="send a signed sample event of a source's kind to the receiver",
    )
    p.add_argument("source_name", metavar="SOURCE", help="a configured source's name")
    p.add_argument("--type", help="the event type (default: the provider's commonest)")
    p.add_argument("--file", type=Path, metavar="BODY", help="send this body instead of a sample")
    p.add_argument(
        "--to",
        metavar="URL",
        help="where (default: this configuration's receiver); a provider that signs the URL "
        "(Twilio) signs this one",
    )
    p.add_argument(
        "--count", type=bounded_int(1, MAX_COUNT), default=1, help=f"how many (1-{MAX_COUNT})"
    )
    p.add_argument(
        "--wait",
        type=bounded_int(0, MAX_WAIT),
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="keep trying a receiver that is not listening yet for this long "
        f"(0-{MAX_WAIT}, default {DEFAULT_WAIT})",
    )
    p.set_defaults(func=cmd_send)


def cmd_send(args: argparse.Namespace) -> int:
    from reconciler.ops.send import send_samples

    body = None
    if args.file is not None:
        try:
            body = args.file.read_bytes()
        except OSError as exc:
            raise ConfigError(f"--file {args.file}: {exc.strerror or exc}") from None
        except ValueError:  # a NUL in the path
            raise ConfigError(f"--file {str(args.file)!r}: not a usable path") from None
    with Command(args, require_schema=False) as cmd:
        sent = send_samples(
            cmd.settings,
            args.source_name,
            event_type=args.type,
            body=body,
            to=args.to,
            count=args.count,
            wait=args.wait,
        )
    for s in sent:
        print(f"{s.event_id}: HTTP {s.status} {s.said}")
    refused = [s for s in sent if not 200 <= s.status < 300]
    if refused:
        print(f"{len(refused)} of {len(sent)} refused by the receiver")
    return EXIT_REFUSED if refused else EXIT_OK
