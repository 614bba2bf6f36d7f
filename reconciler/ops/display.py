"""Values as an operator reads them: money in major units with its currency, ages in hours and
minutes, datetimes in ISO form with their zone. Pure functions, no I/O; the dashboard and the CLI
share them."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from typing import Any

from babel.numbers import (
    UnknownCurrencyError,
    format_currency,
    get_currency_precision,
    list_currencies,
)

NOTHING = "-"


def money(amount_minor: int | None, currency: str | None) -> str:
    """``1163061, "eur"`` → ``€11,630.61``; the currency's own exponent (JPY has none, KWD three).

    Babel holds the ISO 4217 exponents and symbols; an unknown code is shown as the code itself."""
    if amount_minor is None:
        return NOTHING
    code = (currency or "").upper()
    if not code:
        return f"{amount_minor:,} (minor units, no currency)"
    try:
        digits = get_currency_precision(code)
        major = Decimal(amount_minor).scaleb(-digits)
        return str(format_currency(major, code, locale="en_US"))
    except (UnknownCurrencyError, ValueError):
        return f"{amount_minor:,} {code} (minor units)"


def major_units(amount_minor: int, currency: str | None) -> tuple[float | int, str]:
    """``1163061, "eur"`` → ``(11630.61, "EUR")``: a number a table sorts, in the currency's own
    units, and the code beside it; an unknown or absent currency keeps the minor units and says so."""
    code = (currency or "").upper()
    # (Babel gives an unknown code the default precision: asked whether it knows the code first)
    digits = get_currency_precision(code) if code in list_currencies() else None
    if digits is None:
        return amount_minor, f"{code or 'no currency'} (minor units)"
    return round(float(Decimal(amount_minor).scaleb(-digits)), digits), code


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 event``, ``1,000 events``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def age(seconds: float | None) -> str:
    """``8040`` → ``2 h 14 min``; two units at most, the larger first."""
    if seconds is None:
        return NOTHING
    s = max(0, int(seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def when(at: datetime | None, tz: tzinfo = UTC) -> str:
    """ISO 8601 to the second with the zone's offset (``2026-12-02T03:41:07+00:00``); naive
    datetimes are UTC, as the database stores them."""
    if at is None:
        return NOTHING
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(tz).isoformat(timespec="seconds")


def cell(value: Any, tz: tzinfo = UTC) -> Any:
    """A table cell: datetimes as :func:`when`, bytes decoded, None as ``-``; the rest unchanged."""
    if value is None:
        return NOTHING
    if isinstance(value, datetime):
        return when(value, tz)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
