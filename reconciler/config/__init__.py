"""Typed settings loaded once from ``config.toml``.

Resolution: ``--config PATH`` > ``$HOOKLEDGER_CONFIG`` > ``./config.toml`` (built-in defaults if that
default file does not exist). ``$HOOKLEDGER_DATABASE_URL`` overrides ``[database] url``.

Every unknown key, wrong type or missing required value raises :class:`ConfigError` naming the file,
the table and the key. Secrets are never read from the file: a source names the environment variables
that hold them (``signing_secret_env``, ``api_key_env``).
"""

from reconciler.config.base import (
    DEFAULT_CONFIG_PATH as DEFAULT_CONFIG_PATH,
)
from reconciler.config.base import DEFAULT_DATABASE_URL as DEFAULT_DATABASE_URL
from reconciler.config.base import DEFAULT_SCHEDULE as DEFAULT_SCHEDULE
from reconciler.config.dashboard import DEFAULT_MASK_FIELDS as DEFAULT_MASK_FIELDS
from reconciler.config.dashboard import DashboardAuthSettings as DashboardAuthSettings
from reconciler.config.dashboard import DashboardSettings as DashboardSettings
from reconciler.config.notify import NOTIFY_ON as NOTIFY_ON
from reconciler.config.notify import NotifySettings as NotifySettings
from reconciler.config.outbox import OutboxSettings as OutboxSettings
from reconciler.config.outbox import OutboxTargetSettings as OutboxTargetSettings
from reconciler.config.service import BusinessSettings as BusinessSettings
from reconciler.config.service import DatabaseSettings as DatabaseSettings
from reconciler.config.service import LoggingSettings as LoggingSettings
from reconciler.config.service import PruneSettings as PruneSettings
from reconciler.config.service import ReceiverSettings as ReceiverSettings
from reconciler.config.service import ReconcileSettings as ReconcileSettings
from reconciler.config.service import RetentionSettings as RetentionSettings
from reconciler.config.service import WorkerSettings as WorkerSettings
from reconciler.config.settings import LoadedConfig as LoadedConfig
from reconciler.config.settings import Settings as Settings
from reconciler.config.settings import load_config as load_config
from reconciler.config.settings import parse_settings as parse_settings
from reconciler.config.sources import CheckSettings as CheckSettings
from reconciler.config.sources import SourceSettings as SourceSettings
