"""Logging setup: one line per record, structured ``extra=`` fields appended as key=value."""

from __future__ import annotations

import logging
import re
import sys

FIELDS = (
    "source",
    "target",
    "event_id",
    "correlation_id",
    "run_id",
    "error_class",
    "reason",
    "status",
)

# C0/C1 controls, DEL and the Unicode line and paragraph separators: anything that could end a log
# line or move the cursor, shown as an escape instead.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(value: object, limit: int | None = None) -> str:
    """``value`` as one line of text: control characters escaped, then cut to ``limit`` characters.

    Values a stranger chose (source names from the URL, ids, header values) go through this before
    they reach a log line or a stored rejection, so a ``%0a`` cannot forge a log line and a NUL
    cannot make PostgreSQL refuse the row.
    """
    text = _CONTROL.sub(_escape_char, str(value))
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "\u2026"
    return text


class _FieldsFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # The message and the fields are escaped; a traceback (exc_text) keeps its own lines.
        msg, args = record.msg, record.args
        record.msg, record.args = escape_control(record.getMessage()), None
        try:
            line = super().format(record)
        finally:
            record.msg, record.args = msg, args
        extras = [f"{k}={escape_control(getattr(record, k))}" for k in FIELDS if hasattr(record, k)]
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
