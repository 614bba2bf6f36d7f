"""The one boundary where a database driver's error becomes hookledger's: SQLAlchemy's
``handle_error`` event, registered on every engine :func:`reconciler.storage.engine.make_engine`
builds, raises one of the classes below in place of SQLAlchemy's wrapper of the driver's error.

* :class:`DatabaseUnavailable`: the database cannot be reached or the connection broke (SQLAlchemy's
  own disconnect check, or a failure while connecting). Nothing the data did; retrying later can help.
* :class:`DatabaseBusy`: SQLite's write lock stayed held by another writer past the busy timeout.
* :class:`DatabaseRefused`: the database refused a statement (a constraint, a missing table, a
  permission, a statement timeout).

Each is a :class:`reconciler.errors.DatabaseError` whose message is one line naming the database
(password masked) and the driver's reason, chained to the driver's error. Each is also the SQLAlchemy
class it replaces (``OperationalError`` for the first two, ``DBAPIError`` for a refusal), so code
written against SQLAlchemy's classes keeps catching it; ``requests.JSONDecodeError`` is built the same
way for the same reason.

Statements on a connection carrying the :data:`HANDLER_STATEMENTS` execution option (the worker's
handler transactions, ``hookledger.testing``) keep SQLAlchemy's refusals as they are: a handler's
``except IntegrityError`` is the everyday way to make a write idempotent. Being unavailable or busy is
still translated there; both stay ``OperationalError``.

A site that only has to survive any trouble with the database (metrics, a lease's heartbeat, the
dashboard) catches ``SQLAlchemyError``: these classes are among them, and so are SQLAlchemy's errors no
statement raised (a pool that timed out).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from reconciler.errors import DatabaseError

HANDLER_STATEMENTS = "hookledger_handler_statements"  # execution option, see the module


def masked_url(url: str) -> str:
    """The URL as it may be shown: the password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparsable database URL>"


def reason_of(exc: BaseException) -> str:
    """The driver's reason in one line (psycopg's "connection failed:" keeps its cause)."""
    orig = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    if not lines:
        return orig.__class__.__name__
    if len(lines) > 1 and lines[0].startswith("connection failed:"):
        return "; ".join(lines[:2])
    return lines[0]


class _Translated(DatabaseError, DBAPIError):
    """A driver's error as hookledger raises it: one line, and still SQLAlchemy's class."""

    def __init__(self, message: str, reason: str, cause: DBAPIError) -> None:
        DBAPIError.__init__(
            self,
            cause.statement,
            None,  # statement parameters hold payloads and personal data: never kept
            cause.orig if cause.orig is not None else cause,
            hide_parameters=True,
            connection_invalidated=cause.connection_invalidated,
        )
        self.message = message
        self.reason = (
            reason  # the driver's reason alone, for a message that names the database itself
        )

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.__class__, self.message, self.reason, self.statement, self.orig))


def _rebuild(
    cls: type[_Translated], message: str, reason: str, statement: str | None, orig: BaseException
) -> _Translated:
    return cls(message, reason, DBAPIError(statement, None, orig))


class DatabaseUnavailable(_Translated, OperationalError):
    """The database cannot be reached, or the connection to it broke."""


class DatabaseBusy(_Translated, OperationalError):
    """Another writer held the database's write lock past the busy timeout."""


class DatabaseRefused(_Translated):
    """The database refused a statement."""


def database_error(url: str, exc: BaseException) -> DatabaseError:
    """``exc`` as one line naming the database: as it is when the boundary already translated it;
    worded here for what no engine raised (a pool that timed out, a connection SQLAlchemy closed)."""
    if isinstance(exc, DatabaseError):
        return exc
    return DatabaseError(f"database {masked_url(url)}: {reason_of(exc)}")


def translate_errors(engine: Engine) -> None:
    """Register the boundary on ``engine`` (once, by ``make_engine``)."""
    event.listen(engine, "handle_error", _translate)


def _translate(context: ExceptionContext) -> None:
    error = context.sqlalchemy_exception
    if context.is_pre_ping or not isinstance(error, DBAPIError):
        return  # the pool's liveness probe, or not the driver's error (a missing bind value)
    kind: type[_Translated]
    if context.is_disconnect or context.connection is None:  # broke, or failed to connect
        kind = DatabaseUnavailable
    elif _sqlite_busy(error):
        kind = DatabaseBusy
    elif context.connection.get_execution_options().get(HANDLER_STATEMENTS):
        return
    else:
        kind = DatabaseRefused
    url = context.engine.url if context.engine is not None else None
    where = url.render_as_string(hide_password=True) if url is not None else context.dialect.name
    reason = reason_of(error)
    raise kind(f"database {where}: {reason}", reason, error)


def _sqlite_busy(error: DBAPIError) -> bool:
    return str(getattr(error.orig, "sqlite_errorname", "")).startswith("SQLITE_BUSY")
