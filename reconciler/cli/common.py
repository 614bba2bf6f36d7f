"""What every command shares: the configuration loaded once and the database opened once
(:class:`Command`), and the checks of its options.

Light to import: building the parser (``--help``, ``--version``, a wrong option) imports this
module, so the configuration's models, SQLAlchemy and the migrations are imported by the functions
that use them, when a command runs."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.errors import ConfigError, DatabaseError
from reconciler.states import OUTBOX_SOURCE_PREFIX

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from reconciler.config import LoadedConfig, Settings


def iso_time(value: str) -> datetime:
    """An option's ISO-8601 time (UTC when it names no zone); argparse's one-line error otherwise."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An option's whole number within ``low``..``high``; argparse's one-line error otherwise."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{n}: must be between {low} and {high}")
        return n

    return parse


def load(args: argparse.Namespace) -> LoadedConfig:
    from reconciler.config import load_config

    return load_config(getattr(args, "config", None))


def unknown_source_error(settings: Settings, name: str) -> ConfigError:
    """The one message every command gives for a --source that is not configured."""
    names = [s.name for s in settings.sources]
    names += [f"{OUTBOX_SOURCE_PREFIX}{t.name}" for t in settings.outbox.targets]
    return ConfigError(
        f"--source {name!r}: no source of that name in the configuration (configured: "
        f"{', '.join(names) or 'none'})"
    )


def check_sources(settings: Settings, names: str | Sequence[str] | None) -> None:
    for name in [names] if isinstance(names, str) else list(names or ()):
        target = (
            name[len(OUTBOX_SOURCE_PREFIX) :] if name.startswith(OUTBOX_SOURCE_PREFIX) else None
        )
        known = settings.outbox.target(target) if target else settings.source(name)
        if known is None:
            raise unknown_source_error(settings, name)


def check_port(host: str, port: int, option: str = "--port") -> None:
    """Refuse at once, naming the option, when the address cannot be listened on."""
    if port == 0:
        return
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host!r}: cannot be resolved ({exc.strerror})") from None
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"{option} {port}: cannot listen on {host}:{port} ({exc.strerror}); "
                f"choose another with {option}"
            ) from None


def missing_sqlite_file(url: str) -> str | None:
    """The path of a SQLite database file that does not exist (SQLite would create it empty)."""
    from pathlib import Path

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # make_engine says what is wrong with it
    file = parsed.database or ""
    if (
        parsed.get_backend_name() != "sqlite"
        or file in ("", ":memory:")
        or file.startswith("file:")
    ):
        return None
    return None if Path(file).expanduser().exists() else file


def open_engine(loaded: LoadedConfig, *, require_schema: bool = True) -> Engine:
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import current_revision, head_revision, known_revisions

    settings = loaded.settings
    db = settings.database
    if require_schema:  # a command that needs the schema creates no database file on the way
        missing = missing_sqlite_file(db.url)
        if missing is not None:
            raise ConfigError(
                f"the database {missing} does not exist: run 'hookledger init' first (or check "
                "[database] url, HOOKLEDGER_DATABASE_URL and the working directory)"
            )
    engine = make_engine(db.url, echo=db.echo, connect_timeout=db.connect_timeout_seconds)
    if require_schema:
        try:
            current = current_revision(engine)
        except DatabaseError:
            engine.dispose()
            raise
        if (current != head_revision() and current in known_revisions()) or current is None:
            engine.dispose()
            raise ConfigError(
                f"the database schema is at revision {current or 'none'}, not the current one: "
                "run 'hookledger init' first"
            )
        if current != head_revision():  # a newer release migrated it: a rolling upgrade
            logging.getLogger("hookledger").warning(
                "the database schema is newer than this release (%s > %s): upgrade this host",
                current,
                head_revision(),
            )
    return engine


class Command:
    """One command's configuration, loaded once, and its database engine, opened on first use (so
    that the options are checked before the database is asked) and disposed when the command ends::

        with Command(args) as cmd:
            snapshot(cmd.engine, cmd.settings)
    """

    def __init__(self, args: argparse.Namespace, *, require_schema: bool = True) -> None:
        self.loaded = load(args)
        self.settings = self.loaded.settings
        self._require_schema = require_schema
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = open_engine(self.loaded, require_schema=self._require_schema)
        return self._engine

    def check_database(self) -> None:
        """Open the database now: an unreachable one is one line at once, not a failure later."""
        self.engine.connect().close()

    def __enter__(self) -> Command:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


class Loop(Protocol):
    """A worker or a publisher: ``drain`` what is due, or ``run`` until stopped."""

    def drain(self) -> int: ...

    def run(self, stop: threading.Event) -> None: ...


def run_loops(phases: Sequence[Sequence[Loop]], *, once: bool) -> None:
    """One thread per loop. ``once``: each phase drained in turn (the worker's events, then the
    messages their handlers wrote); else every loop runs until SIGINT or SIGTERM, which let each
    finish what it holds."""
    if once:
        for loops in phases:
            _threads([threading.Thread(target=loop.drain) for loop in loops])
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threads = [threading.Thread(target=loop.run, args=(stop,)) for ph in phases for loop in ph]
    logging.getLogger("hookledger").info("%d thread(s) started", len(threads))
    _threads(threads)


def _threads(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def summarise(loops: Sequence[Any]) -> str:
    """``processed 3, dead 1``: the loops' outcomes added up (their ``stats.outcomes``)."""
    totals: dict[str, int] = {}
    for loop in loops:
        for key, n in loop.stats.outcomes.items():
            totals[key] = totals.get(key, 0) + n
    return ", ".join(f"{k} {v}" for k, v in sorted(totals.items())) or "nothing due"
