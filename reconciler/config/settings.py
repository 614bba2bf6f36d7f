"""The whole configuration: :class:`Settings`, read and checked once (:func:`load_config`)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
    field_validator,
    model_validator,
)

from reconciler.config.base import DEFAULT_CONFIG_PATH, _Table
from reconciler.config.dashboard import DashboardSettings
from reconciler.config.issues import IssuesSettings
from reconciler.config.notify import NotifySettings
from reconciler.config.outbox import OutboxSettings
from reconciler.config.service import (
    BusinessSettings,
    DatabaseSettings,
    LoggingSettings,
    PruneSettings,
    ReceiverSettings,
    ReconcileSettings,
    RetentionSettings,
    WorkerSettings,
)
from reconciler.config.sources import SourceSettings
from reconciler.errors import ConfigError
from reconciler.logs import escape_control


class Settings(_Table):
    database: DatabaseSettings = DatabaseSettings()
    receiver: ReceiverSettings = ReceiverSettings()
    worker: WorkerSettings = WorkerSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    business: BusinessSettings = BusinessSettings()
    logging: LoggingSettings = LoggingSettings()
    dashboard: DashboardSettings = DashboardSettings()
    retention: RetentionSettings = RetentionSettings()
    prune: PruneSettings = PruneSettings()
    outbox: OutboxSettings = OutboxSettings()
    issues: IssuesSettings = IssuesSettings()
    sources: tuple[SourceSettings, ...] = ()
    notify: tuple[NotifySettings, ...] = ()

    @field_validator("sources", "notify", mode="before")
    @classmethod
    def _sources_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _unique_names(self) -> Settings:
        seen: set[str] = set()
        for source in self.sources:
            if source.name in seen:
                raise ValueError(f"source name '{source.name}' is used twice")
            seen.add(source.name)
        targets: set[str] = set()
        for target in self.notify:
            if target.name in targets:
                raise ValueError(f"notify target name '{target.name}' is used twice")
            targets.add(target.name)
            known = {src.name for src in self.sources} | {
                f"outbox:{t.name}" for t in self.outbox.targets
            }
            for name in target.sources:
                if name not in known:
                    raise ValueError(
                        f"notify target '{target.name}': source '{name}' is not configured"
                    )
        return self

    def source(self, name: str) -> SourceSettings | None:
        for source in self.sources:
            if source.name == name:
                return source
        return None


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    path: Path | None  # None: built-in defaults


def _describe_location(loc: tuple[int | str, ...], data: Mapping[str, Any]) -> str:
    """Turn a pydantic error location into ``table [sources][1] (name 'x'), key 'y'`` wording."""
    table = ""
    note = ""
    node: Any = data
    for i, item in enumerate(loc):
        if isinstance(item, int):
            table += f"[{item}]"
            node = node[item] if isinstance(node, list) and item < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            note = f" (name '{name}')" if isinstance(name, str) else ""
            continue
        child = node.get(item) if isinstance(node, dict) else None
        if i == len(loc) - 1 or not isinstance(child, dict | list):
            return f"table {table or 'top level'}{note}, key '{item}'"
        table += f"[{item}]"
        note = ""
        node = child
    return f"table {table or 'top level'}{note}"


def parse_settings(data: Mapping[str, Any], origin: str) -> Settings:
    try:
        return Settings.model_validate(dict(data))
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = _describe_location(tuple(err["loc"]), data)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required key is missing"
            lines.append(escape_control(f"{origin}: {where}: {msg}"))  # a value may hold controls
        raise ConfigError("\n".join(lines)) from None


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> LoadedConfig:
    env = os.environ if environ is None else environ
    explicit = path or env.get("HOOKLEDGER_CONFIG")
    cfg_path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    data: dict[str, Any] = {}
    used: Path | None = None
    if cfg_path.exists():
        try:
            with cfg_path.open("rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{cfg_path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: cannot be read: {exc.strerror}") from None
        used = cfg_path
    elif explicit:
        raise ConfigError(f"{cfg_path}: configuration file not found")
    settings = parse_settings(data, str(cfg_path))
    if used is not None and settings.worker.import_paths:  # relative to the file, not the cwd
        settings = settings.model_copy(update={"worker": settings.worker.anchored(used.parent)})
    override = env.get("HOOKLEDGER_DATABASE_URL")
    if override:
        settings = settings.model_copy(
            update={"database": settings.database.model_copy(update={"url": override})}
        )
    return LoadedConfig(settings=settings, path=used)
