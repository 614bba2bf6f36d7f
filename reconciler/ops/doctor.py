"""``hookledger doctor``: is this installation ready to run? One verdict per thing to check.

Each check returns pass, warn, fail or skip with one line that says what it found; none writes
anything anywhere (the provider calls are the read-only ones a scan makes). Secrets never appear:
variables are reported set or not, URLs with their passwords masked. The CLI prints the verdicts
(or JSON) and exits 2 when any failed.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from connectors.base import Connector
from connectors.errors import ConnectorError, UnavailableError
from connectors.http import RetryPolicy
from reconciler.config import LoadedConfig, Settings, SourceSettings, load_config
from reconciler.errors import DatabaseError, HookledgerError
from reconciler.storage.engine import make_engine
from reconciler.storage.failures import masked_url
from reconciler.storage.migrate import HEAD_REVISION, current_revision, known_revisions
from reconciler.storage.types import utcnow

Status = Literal["pass", "warn", "fail", "skip"]
# The provider calls' patience: a doctor answers within seconds, it does not ride out an outage.
DOCTOR_POLICY = RetryPolicy(max_attempts=2, base_delay=0.2, max_delay=1.0, max_total_wait=2.0)
DOCTOR_TIMEOUT = 10.0


@dataclass(frozen=True)
class Verdict:
    check: str  # what was checked: "config", "env STRIPE_KEY", "source 'stripe'", ...
    status: Status
    detail: str


def failed(verdicts: list[Verdict]) -> bool:
    return any(v.status == "fail" for v in verdicts)


def as_json(verdicts: list[Verdict]) -> str:
    counts = {s: sum(v.status == s for v in verdicts) for s in ("pass", "warn", "fail", "skip")}
    return json.dumps(
        {"ok": not failed(verdicts), "counts": counts, "checks": [asdict(v) for v in verdicts]},
        indent=2,
    )


class _Get:
    """An HTTP GET for the checks that ask a URL (the OIDC provider, the receiver's /healthz)."""

    def __call__(self, url: str) -> tuple[int, bytes]:
        import httpx

        response = httpx.get(url, timeout=DOCTOR_TIMEOUT, follow_redirects=False)
        return response.status_code, response.content


def diagnose(
    config_path: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    offline: bool = False,
    connector_factory: Callable[[SourceSettings], Connector] | None = None,
    http_get: Callable[[str], tuple[int, bytes]] | None = None,
    now: Callable[[], datetime] = utcnow,
) -> list[Verdict]:
    """Every check, in the order an operator fixes things (``offline``: no provider or URL asked)."""
    try:
        loaded = load_config(config_path, environ)
    except HookledgerError as exc:
        return [Verdict("config", "fail", str(exc))]
    verdicts = [_config(loaded)]
    settings = loaded.settings
    verdicts += list(_variables(settings, environ))
    engine, database = _open_database(settings.database.url, settings)
    verdicts += database
    if settings.dashboard.database_url:  # the dashboard's read replica
        replica, replica_verdicts = _open_database(
            settings.dashboard.database_url, settings, "dashboard database"
        )
        verdicts += replica_verdicts
        if replica is not None:
            replica.dispose()
    try:
        verdicts += list(_checks(engine, settings))
    finally:
        if engine is not None:
            engine.dispose()
    if offline:
        verdicts.append(Verdict("sources", "skip", "--offline: no provider asked"))
    else:
        verdicts += list(_sources(settings, connector_factory, environ))
    verdicts += list(_handlers(settings))
    verdicts.append(_schedule(settings, now()))
    verdicts += list(_sign_in(settings, None if offline else (http_get or _Get())))
    verdicts.append(_receiver(settings, None if offline else (http_get or _Get())))
    return verdicts


# -- the checks ------------------------------------------------------------------------------------


def _config(loaded: LoadedConfig) -> Verdict:
    s = loaded.settings
    where = str(loaded.path) if loaded.path else "no file: the built-in defaults"
    enabled = sum(source.enabled for source in s.sources)
    return Verdict("config", "pass", f"{where} ({enabled} enabled source(s) of {len(s.sources)})")


def named_variables(settings: Settings) -> list[tuple[str, str]]:
    """Every environment variable the configuration names (``…_env`` keys), with where: disabled
    sources' left out."""
    out: list[tuple[str, str]] = []

    def walk(model: BaseModel, table: str, label: str) -> None:
        for key in type(model).model_fields:
            value = getattr(model, key)
            inner = f"{table}.{key}" if table else key
            if key.endswith("_env") and isinstance(value, str) and value:
                out.append((value, f"{label} {key}"))
            elif isinstance(value, BaseModel):
                walk(value, inner, f"[{inner}]")
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, BaseModel) and getattr(item, "enabled", True):
                        name = getattr(item, "name", None)
                        walk(item, inner, f"[{inner}] '{name}'" if name else f"[{inner}]")
        own = getattr(model, "keys", None)  # a source's kind's own keys (SourceSettings.keys)
        if isinstance(own, BaseModel):
            walk(own, table, label)

    walk(settings, "", "")
    return out


def _set(variable: str, env: Mapping[str, str]) -> bool:
    return bool(env.get(variable, "").strip())


def _variables(settings: Settings, environ: Mapping[str, str] | None) -> Iterator[Verdict]:
    env = os.environ if environ is None else environ
    for variable, where in named_variables(settings):
        if _set(variable, env):
            yield Verdict(f"env {variable}", "pass", f"set (named by {where})")
        else:
            yield Verdict(f"env {variable}", "fail", f"not set (named by {where})")


def _open_database(
    url: str, settings: Settings, name: str = "database"
) -> tuple[Engine | None, list[Verdict]]:
    """A database read-only, with its verdicts (None: it cannot be used; nothing is created)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None, [Verdict(name, "fail", "not a valid database URL")]
    if parsed.get_backend_name() == "sqlite":
        file = parsed.database or ""
        on_disk = file and file != ":memory:" and not file.startswith("file:")
        if on_disk and not Path(file).expanduser().is_file():
            problem = f"no SQLite file at {file}: run 'hookledger init'"
            return None, [Verdict(name, "fail", problem)]
    try:
        engine = make_engine(
            url, readonly=True, connect_timeout=settings.database.connect_timeout_seconds
        )
    except HookledgerError as exc:
        return None, [Verdict(name, "fail", str(exc))]
    verdicts = _database(engine, url, name)
    if failed(verdicts[:1]):
        engine.dispose()
        return None, verdicts
    return engine, verdicts


def _database(engine: Engine, url: str, name: str = "database") -> list[Verdict]:
    schema = "schema" if name == "database" else f"{name} schema"
    try:
        current = current_revision(engine)
    except DatabaseError as exc:
        return [Verdict(name, "fail", str(exc))]
    reached = Verdict(name, "pass", f"reachable: {masked_url(url)}")
    if current == HEAD_REVISION:
        return [reached, Verdict(schema, "pass", f"at revision {current}, the current one")]
    known = known_revisions()
    if current is None:
        problem = "not initialised: run 'hookledger init'"
    elif current in known:
        problem = f"at revision {current}, behind {HEAD_REVISION}: run 'hookledger init'"
    else:  # a newer release migrated it: this host is next in a rolling upgrade, not broken
        return [
            reached,
            Verdict(
                schema,
                "warn",
                f"schema is newer than this release ({current} > {HEAD_REVISION}): upgrade this "
                'host (docs/operations.md, "Upgrading")',
            ),
        ]
    return [reached, Verdict(schema, "fail", problem)]


def _checks(engine: Engine | None, settings: Settings) -> Iterator[Verdict]:
    """The business tables and columns each check names, read from the business database."""
    from reconciler.reconcile.business import bind_checks

    with_checks = [s for s in settings.sources if s.enabled and s.checks]
    if not with_checks:
        return
    url = settings.business.url
    if engine is None and url is None:
        for source in with_checks:
            yield Verdict(f"checks of '{source.name}'", "skip", "the database is not reachable")
        return
    business = make_engine(url, readonly=True) if url else engine
    assert business is not None
    timeout = settings.business.statement_timeout_seconds
    try:
        for source in with_checks:
            try:
                bound = bind_checks(business, source, timeout)
            except HookledgerError as exc:  # a check's table or column, or the database itself
                yield Verdict(f"checks of '{source.name}'", "fail", str(exc))
            else:
                tables = "; ".join(
                    f"{b.check.table} ({', '.join([b.check.key, *b.check.fields])})" for b in bound
                )
                yield Verdict(f"checks of '{source.name}'", "pass", f"tables found: {tables}")
    finally:
        if url:
            business.dispose()


def _sources(
    settings: Settings,
    factory: Callable[[SourceSettings], Connector] | None,
    environ: Mapping[str, str] | None,
) -> Iterator[Verdict]:
    from reconciler.sources import build_connector, provider

    env = os.environ if environ is None else environ
    for source in settings.sources:
        name = f"source '{source.name}'"
        if not source.enabled:
            yield Verdict(name, "skip", "disabled")
            continue
        if provider(source.kind).build is None:
            yield Verdict(name, "skip", f"kind '{source.kind}' has no list API to read")
            continue
        named = source.credential_keys()
        if not named:
            yield Verdict(name, "skip", "receives webhooks only: no API key to reconcile with")
            continue
        unset = [v for v in named.values() if not _set(v, env)]
        if unset:
            yield Verdict(name, "skip", f"not asked: {', '.join(unset)} is not set")
            continue
        try:
            connector = (
                factory(source)
                if factory
                else build_connector(
                    source, environ=environ, policy=DOCTOR_POLICY, timeout=DOCTOR_TIMEOUT
                )
            )
            try:
                access = connector.check_access()
            finally:
                connector.close()
        except (HookledgerError, ConnectorError) as exc:
            unreachable = isinstance(exc, UnavailableError) and source.base_url
            where = f" (base_url {source.base_url})" if unreachable else ""
            yield Verdict(name, "fail", _one_line(str(exc)).removeprefix(f"{name}: ") + where)
            continue
        yield Verdict(name, "pass", access.detail)
        for warning in access.warnings:
            yield Verdict(name, "warn", warning)


def _handlers(settings: Settings) -> Iterator[Verdict]:
    """What the worker will do with each source's events: its handler modules import, a source
    with neither a handler nor a forward_url has its events marked ignored, and SQLite's one writer
    is held by a handler from its first write to its commit."""
    from reconciler.inbox.handlers import default_registry, load_handler_modules

    modules = settings.worker.handlers
    for directory in settings.worker.import_paths if modules else ():  # none: nothing is looked up
        if not os.path.isdir(directory):
            yield Verdict(
                "handlers", "warn", f"[worker] import_paths: {directory} is not a directory"
            )
    try:  # a module that raises on import is a HookledgerError too: the worker would fail the same
        load_handler_modules(modules, settings.worker.import_paths)
    except HookledgerError as exc:
        yield Verdict("handlers", "fail", _one_line(str(exc)))
        return
    handled = default_registry.sources()
    for source in settings.sources:
        if not source.enabled or source.name in handled:
            continue
        if source.forward_url or settings.worker.forward_url:
            continue
        yield Verdict(
            f"handlers of '{source.name}'",
            "warn",
            "no handler and no forward_url: the worker marks its events ignored",
        )
    if modules and settings.database.url.startswith("sqlite"):
        yield Verdict(
            "handlers",
            "warn",
            "SQLite with handlers: a handler holds the one write lock from its first write to its "
            "commit and the receiver waits meanwhile; write after any waiting, or use PostgreSQL "
            "(the worker warns past [worker] sqlite_lock_warn_seconds)",
        )
    elif modules:
        yield Verdict(
            "handlers", "pass", f"{len(modules)} module(s) imported: {', '.join(modules)}"
        )


def _schedule(settings: Settings, now: datetime) -> Verdict:
    from reconciler.crontab import crontab_trigger

    cfg = settings.reconcile
    zone = ZoneInfo(cfg.timezone)
    trigger = crontab_trigger(cfg.schedule, zone)  # (validated with the config)
    upcoming = trigger.get_next_fire_time(None, now.astimezone(zone))
    when = upcoming.strftime("%Y-%m-%d %H:%M %Z") if upcoming else "never"
    return Verdict("schedule", "pass", f"'{cfg.schedule}' in {cfg.timezone}: next run {when}")


def _sign_in(
    settings: Settings, get: Callable[[str], tuple[int, bytes]] | None
) -> Iterator[Verdict]:
    dash = settings.dashboard
    auth = dash.auth
    if not auth.enabled:
        if _loopback(dash.host):
            yield Verdict("dashboard sign-in", "pass", f"off; the dashboard listens on {dash.host}")
        else:
            yield Verdict(
                "dashboard sign-in",
                "warn",
                f"off, and the dashboard listens on {dash.host}: anyone who reaches it can "
                "replay, resolve and backfill ([dashboard.auth] enabled = true)",
            )
        return
    if importlib.util.find_spec("authlib") is None:
        yield Verdict(
            "dashboard sign-in",
            "fail",
            "sign-in needs Authlib, which is not installed: pip install 'hookledger[auth]'",
        )
    if not auth.operators:
        yield Verdict(
            "dashboard sign-in", "warn", "no [dashboard.auth] operators: everyone reads only"
        )
    metadata = auth.server_metadata_url or ""
    if get is None:
        yield Verdict("dashboard sign-in", "skip", "--offline: the identity provider not asked")
        return
    try:
        status, body = get(metadata)
    except Exception as exc:  # any failure to reach it is the verdict
        yield Verdict("dashboard sign-in", "fail", f"{metadata}: {_reason(exc)}")
        return
    try:
        document = json.loads(body) if status == 200 else None
    except ValueError:
        document = None
    needed = ("issuer", "authorization_endpoint", "token_endpoint")
    if not isinstance(document, dict) or not all(isinstance(document.get(k), str) for k in needed):
        yield Verdict(
            "dashboard sign-in",
            "fail",
            f"{metadata} answered {status} without an OpenID configuration ({', '.join(needed)})",
        )
        return
    yield Verdict("dashboard sign-in", "pass", f"identity provider {document['issuer']}")


def _receiver(settings: Settings, get: Callable[[str], tuple[int, bytes]] | None) -> Verdict:
    public = settings.receiver.public_url
    if not public:
        return Verdict("receiver", "skip", "no [receiver] public_url to check")
    if get is None:
        return Verdict("receiver", "skip", f"--offline: {public} not asked")
    url = public.rstrip("/") + "/healthz"
    try:
        status, _ = get(url)
    except Exception as exc:  # any failure to reach it is the verdict
        return Verdict("receiver", "fail", f"GET {url}: {_reason(exc)}")
    if status != 200:
        return Verdict("receiver", "fail", f"GET {url} answered {status}, not 200")
    return Verdict("receiver", "pass", f"GET {url} answered 200")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _reason(exc: Exception) -> str:
    return _one_line(str(exc)) or exc.__class__.__name__


def render(verdicts: list[Verdict]) -> Iterator[str]:
    """The verdicts as text lines, then a summary line."""
    for v in verdicts:
        yield f"{v.status.upper():4}  {v.check}: {v.detail}"
    fresh = ("no SQLite file at ", "not initialised: ")
    if any(v.status == "fail" and v.detail.startswith(fresh) for v in verdicts):
        # a fresh install: the checks after the database's say little until it exists
        yield "doctor: the database is not initialised: run 'hookledger init' first, then doctor"
    counts = {s: sum(v.status == s for v in verdicts) for s in ("pass", "warn", "fail", "skip")}
    yield (
        f"doctor: {counts['pass']} passed, {counts['warn']} warning(s), {counts['fail']} failed, "
        f"{counts['skip']} skipped"
    )
