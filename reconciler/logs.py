"""Logging setup: one line per record, as text with the structured ``extra=`` fields appended as
key=value, or as one JSON object (``[logging] format = "json"``); the same failure repeated is logged
once, then with a count (:class:`RepeatFilter`)."""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from reconciler.payment_text import mask_payment_text

FIELDS = (
    "source",
    "target",
    "event_id",
    "event_type",
    "outcome",
    "ms",
    "correlation_id",
    "run_id",
    "error_class",
    "reason",
    "status",
    "repeated",
)
REPEAT_EVERY_SECONDS = 60.0  # a repeated failure is logged again, with its count, this often

# C0/C1 controls, DEL and the Unicode line and paragraph separators: anything that could end a log
# line or move the cursor, shown as an escape instead. Also lone surrogates (no encoder writes
# them: a stored rejection or a log line would fail) and the bidirectional and zero-width format
# characters, which make a value display as another.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


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
        record.msg, record.args = escape_control(mask_payment_text(record.getMessage())), None
        try:
            line = super().format(record)
        finally:
            record.msg, record.args = msg, args
        extras = [
            f"{k}={escape_control(_masked(getattr(record, k)))}"
            for k in FIELDS
            if hasattr(record, k)
        ]
        return f"{line} {' '.join(extras)}" if extras else line


def _masked(value: object) -> object:
    """A field's value with card numbers and IBANs masked: a source name from the URL path or an
    id a stranger chose may be one (numbers, ids from the code, are left as they are)."""
    return mask_payment_text(value) if isinstance(value, str) else value


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (it may be replaced after set-up)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class RepeatFilter(logging.Filter):
    """Lets a warning or error through once, then holds back the same one (same logger, message
    template and exception type) for ``every`` seconds and counts it; the first after that goes out
    with the count and without its traceback. A database outage then logs a few lines a minute,
    not a traceback per request."""

    def __init__(
        self,
        every: float = REPEAT_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        keep: int = 1000,
    ) -> None:
        super().__init__()
        self.every, self.clock, self.keep = every, clock, keep
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[Any, ...], list[float]] = OrderedDict()  # [last out, held]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        key = (record.name, record.levelno, str(record.msg), kind)
        now = self.clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is None:
                self._seen[key] = [now, 0]
                while len(self._seen) > self.keep:  # the oldest forgotten: memory stays bounded
                    self._seen.popitem(last=False)
                return True
            if now - entry[0] < self.every:
                entry[1] += 1
                return False
            held = int(entry[1])
            self._seen.move_to_end(key)
            entry[0], entry[1] = now, 0
        if held:
            record.repeated = held
            record.msg = f"{record.msg} (and {held} more like it in the last {self.every:g} s)"
            record.exc_info, record.exc_text = None, None  # its traceback was logged the first time
        return True


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.json import JsonFormatter

    class _MaskingJsonFormatter(JsonFormatter):
        """The message and the structured fields with card numbers and IBANs masked, as in text."""

        def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
            for key in ("message", *FIELDS):
                if key in log_data:
                    log_data[key] = _masked(log_data[key])
            return log_data

    # every attribute a record carries beyond the standard ones (the extra= fields) is a key, but
    # uvicorn's ``color_message``: the message again with ANSI colour codes, noise in a log store
    return _MaskingJsonFormatter(
        "%(levelname)s %(name)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
        json_ensure_ascii=False,
        reserved_attrs=[*RESERVED_ATTRS, "color_message"],
    )


def log_delivery(
    log: logging.Logger,
    fields: dict[str, Any],
    event_type: str | None,
    outcome: str,
    seconds: float,
) -> None:
    """One INFO line per stored delivery: ``delivery accepted source=… event_id=… event_type=…
    outcome=accepted ms=3.1``. Only names, ids and the outcome: never a header or a body (secrets,
    signatures, payment data), and the formatters escape and mask the fields as every other's."""
    extra = {
        **fields,
        "event_type": event_type or "-",
        "outcome": outcome,
        "ms": round(seconds * 1000, 1),
    }
    log.info("delivery %s", outcome, extra=extra)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = _StderrHandler()
    handler.addFilter(RepeatFilter())
    if fmt == "json":
        handler.setFormatter(_json_formatter())
    else:
        handler.setFormatter(_FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Migrations are reported by 'hookledger init' itself.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, root.level))
    # httpx logs every request at INFO: a reconcile of 100k events would print 1,000 lines.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
