"""Logging setup: one line per record, structured ``extra=`` fields appended as key=value."""

from __future__ import annotations

import logging
import sys

FIELDS = ("source", "event_id", "correlation_id", "run_id", "error_class", "reason", "status")


class _FieldsFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{k}={getattr(record, k)}" for k in FIELDS if hasattr(record, k)]
        return f"{line} {' '.join(extras)}" if extras else line


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (it may be replaced after set-up)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str = "INFO") -> None:
    handler = _StderrHandler()
    handler.setFormatter(_FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Migrations are reported by 'hookledger init' itself.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, root.level))
    # httpx logs every request at INFO: a reconcile of 100k events would print 1,000 lines.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
