"""Pure comparison rules: values in, verdicts out (no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from connectors.base import DeliveryAttempt
from connectors.parsing import json_path_get

PROVIDER_FAILED = "provider_failed"  # the provider itself recorded the delivery as failed
LOST_AFTER_ACK = "lost_after_ack"  # the provider says delivered, the inbox never stored it
NOT_RECEIVED = "not_received"  # the provider keeps no delivery record we can read


@dataclass(frozen=True)
class FieldDiff:
    column: str
    source_value: Any
    local_value: Any


def normalize(value: Any) -> Any:
    """A comparable form: numbers as Decimal (minor units stay integers), enum-like strings lower-cased,
    timestamps (ISO-8601 or epoch seconds in a date column) as UTC datetimes."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value))
    if isinstance(value, str):
        text = value.strip()
        if len(text) >= 10 and text[4:5] == "-" and text[7:8] == "-":
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
                return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            except ValueError:
                pass
        try:
            return Decimal(text)
        except InvalidOperation:
            return text.lower()
    return value


def equal(source_value: Any, local_value: Any) -> bool:
    if type(source_value) is type(local_value) and source_value == local_value:
        return True  # (the same value normalises the same: most fields of most rows)
    a, b = normalize(source_value), normalize(local_value)
    if isinstance(a, datetime) and isinstance(b, Decimal):
        return int(a.timestamp()) == b
    if isinstance(b, datetime) and isinstance(a, Decimal):
        return int(b.timestamp()) == a
    return bool(a == b)


def diff_fields(
    source_object: Mapping[str, Any], local_row: Mapping[str, Any], fields: Mapping[str, str]
) -> list[FieldDiff]:
    """Mapped fields (local column = source JSON path) whose normalised values differ."""
    out = []
    for column, path in fields.items():
        source_value = json_path_get(source_object, path)
        local_value = local_row.get(column)
        if not equal(source_value, local_value):
            out.append(FieldDiff(column, source_value, local_value))
    return out


def missing_cause(attempts: Iterable[DeliveryAttempt], has_delivery_log: bool) -> str:
    """Why a source record is not in the inbox, from the provider's own delivery log."""
    attempts = list(attempts)
    if not has_delivery_log or not attempts:
        return NOT_RECEIVED
    return LOST_AFTER_ACK if any(a.ok for a in attempts) else PROVIDER_FAILED


def recover_by(occurred_at: datetime | None, retention: timedelta | None) -> datetime | None:
    """After this time the provider no longer lets the record be fetched or redelivered."""
    if occurred_at is None or retention is None:
        return None
    return occurred_at + retention


def amount_of(obj: Mapping[str, Any], path: str | None) -> int | None:
    """A money amount in minor units, when the configured path holds an integer."""
    if not path:
        return None
    value = json_path_get(obj, path)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        return int(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return None


# Their full-width forms too (U+FF1D, U+FF0B, U+FF0D, U+FF20): spreadsheets fold them to ASCII.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value: Any) -> str:
    """A CSV cell safe to open in a spreadsheet: ISO-8601 UTC times, NUL bytes dropped, and a leading
    ``'`` on anything a spreadsheet would read as a formula (=, +, -, @, tab, CR, and their
    full-width forms)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    else:
        text = str(value).replace("\x00", "")
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text
