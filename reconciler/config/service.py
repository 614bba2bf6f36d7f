"""The services' own tables: [database], [receiver], [worker], [reconcile], [business], [logging],
[retention], [prune]."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from reconciler.config.base import DEFAULT_DATABASE_URL, DEFAULT_SCHEDULE, _Table


class DatabaseSettings(_Table):
    url: str = DEFAULT_DATABASE_URL
    echo: bool = False
    # PostgreSQL: how long a connection attempt may take before the command fails
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=600)


class ReceiverSettings(_Table):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1)
    # Group commit: requests waiting at the same moment are stored in one transaction.
    batch_max_size: int = Field(default=256, ge=1, le=10_000)
    # Concurrent group-commit writers (SQLite always uses one: it has a single writer).
    writers: int = Field(default=2, ge=1, le=64)
    # Rejections for source names that are not configured, stored per client address and minute
    # (the rest are only counted): strangers cannot grow the deliveries table without bound.
    unknown_source_log_per_minute: int = Field(default=10, ge=0, le=100_000)
    # where providers reach the receiver (behind a proxy, say): `hookledger doctor` checks that its
    # /healthz answers there
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s?#]+$")
    # a body not received in full within this long is answered 408: a half-sent body cannot hold a
    # request open for ever
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    # webhook requests at once; beyond, 503 with Retry-After (health checks and metrics still answer)
    limit_concurrency: int = Field(default=256, ge=1, le=100_000)
    # open connections the receiver keeps (uvicorn's limit: beyond it, a request gets 503); `serve`
    # raises its open-file limit to fit them, up to the hard limit (LimitNOFILE)
    max_connections: int = Field(default=10_000, ge=16, le=1_000_000)
    # an idle keep-alive connection is closed after this long
    keep_alive_seconds: int = Field(default=5, ge=1, le=600)
    # Rejections for a configured source stored per client address and minute (the rest are only
    # counted): an unsigned request costs a stranger nothing, so it must not cost a row each.
    rejected_log_per_minute: int = Field(default=60, ge=0, le=100_000)
    # Sources confirmed through the provider's API (GoPay), each apart from the shared slots:
    # requests waiting for a confirmation (beyond, 503 with Retry-After at once) ...
    confirm_queue: int = Field(default=32, ge=1, le=10_000)
    # ... calls to the provider at once ...
    confirm_concurrency: int = Field(default=4, ge=1, le=64)
    # ... and how long one id's answer is remembered: at most one call per id in this window
    confirm_window_seconds: float = Field(default=10.0, ge=0, le=3600)


class WorkerSettings(_Table):
    handlers: tuple[str, ...] = ()
    # directories put first on the import path before the handlers are imported (a relative one is
    # relative to the configuration file's directory): how a service finds code that is not installed
    import_paths: tuple[str, ...] = ()
    forward_url: str | None = None
    forward_timeout_seconds: float = Field(default=10.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_seconds: float = Field(default=2.0, gt=0)
    backoff_max_seconds: float = Field(default=3600.0, gt=0)
    lease_seconds: float = Field(default=60.0, gt=0)
    # an attempt running longer is abandoned: its process killed, its transaction rolled back, the
    # event failed as transient (handler_timeout) and retried
    handler_timeout_seconds: float = Field(default=120.0, gt=0)
    # attempts of one event that timed out or lost their worker before it is dead with class hung
    max_hangs: int = Field(default=3, ge=1)
    # SIGTERM: how long running attempts may take to finish before their processes are killed
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    batch_size: int = Field(default=100, ge=1, le=10_000)
    poll_interval_seconds: float = Field(default=1.0, gt=0)
    concurrency: int = Field(default=1, ge=1, le=64)
    # GET /metrics of the worker process (handler durations, outcomes): off unless a port is set
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "127.0.0.1"
    # SQLite: a handler holding the write lock longer than this is warned about, once per handler
    sqlite_lock_warn_seconds: float = Field(default=2.0, gt=0)

    @field_validator("handlers", "import_paths", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("import_paths")
    @classmethod
    def _usable_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not path.strip() or "\0" in path:
                raise ValueError(f"{path!r} is not a directory path")
        return value

    def anchored(self, directory: Path) -> WorkerSettings:
        """These settings with each relative ``import_paths`` entry made absolute from
        ``directory`` (the configuration file's), so that no working directory changes them."""
        paths = tuple(str((directory / p).resolve()) for p in self.import_paths)
        return self.model_copy(update={"import_paths": paths})


class ReconcileSettings(_Table):
    grace_seconds: int = Field(default=300, ge=0)
    stuck_after_seconds: int = Field(default=3600, ge=1)
    overlap_seconds: int = Field(default=300, ge=0)
    # renewed every few seconds by the running run: a dead run frees the source this long after
    lease_seconds: int = Field(default=120, ge=10)
    timezone: str = "UTC"  # before schedule: the schedule's validator reads it
    schedule: str = DEFAULT_SCHEDULE
    misfire_grace_seconds: int = Field(default=3600, ge=1)
    snapshot_interval_seconds: int = Field(default=60, ge=5)
    # how long one request of a run keeps waiting out 429s and retrying 5xx, a proxy's HTML page or
    # a body cut short before the run fails (its cursor kept)
    max_wait_seconds: float = Field(default=300.0, ge=1, le=86_400)

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone '{value}'") from None
        return value

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str, info: ValidationInfo) -> str:
        """Every command rejects a schedule the scheduler would refuse, not only ``schedule``."""
        if value == DEFAULT_SCHEDULE:
            return value  # known valid: skips importing APScheduler's cron parser at start-up
        from reconciler.crontab import crontab_trigger

        tz = info.data.get("timezone", "UTC")  # validated before: it is declared first
        try:
            crontab_trigger(value, ZoneInfo(tz))
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a valid cron expression ({exc})") from None
        return value


class BusinessSettings(_Table):
    url: str | None = None  # default: the inbox database
    # PostgreSQL: each business read is READ ONLY and may take this long at most
    statement_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)


class LoggingSettings(_Table):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # "json": one JSON object a line (level, logger, message, time and the structured fields)
    format: Literal["text", "json"] = "text"


class RetentionSettings(_Table):
    keep_days: int = Field(default=7, ge=1, le=3650)  # hookledger prune's default


DEFAULT_PRUNE_SCHEDULE = "15 4 * * *"


class PruneSettings(_Table):
    # when `hookledger schedule` prunes (cron, in [reconcile] timezone), by [retention] keep_days;
    # "" leaves pruning to a timer or cron running `hookledger prune`
    schedule: str = DEFAULT_PRUNE_SCHEDULE

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str) -> str:
        """Refused by every command, as the scheduler would refuse it."""
        if value in (DEFAULT_PRUNE_SCHEDULE, "") or not value.strip():
            return value
        from reconciler.crontab import crontab_trigger

        try:
            crontab_trigger(value, ZoneInfo("UTC"))
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a valid cron expression ({exc})") from None
        return value
