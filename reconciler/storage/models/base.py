"""The models' common ground: the declarative base, its naming convention, and the column helpers.

Statuses and outcomes are Enums stored as short strings (no native enum types), so migrations are
identical on SQLite and PostgreSQL.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Enum,
    Integer,
    MetaData,
)
from sqlalchemy.orm import DeclarativeBase

from reconciler.storage.types import UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BIGINT primary keys on PostgreSQL, INTEGER (rowid alias, autoincrementing) on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def _same_as(column: str) -> Any:
    """An insert default: the value given for another column of the same row."""
    return lambda context: context.get_current_parameters()[column]


def _enum(cls: type[enum.Enum], length: int = 16) -> Enum:
    return Enum(
        cls,
        native_enum=False,
        length=length,
        values_callable=lambda e: [m.value for m in e],
        validate_strings=True,
        create_constraint=False,
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}
