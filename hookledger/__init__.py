"""hookledger's public API: the names an application imports to handle events, send its own
calls through the outbox and make its API idempotent.

Everything in ``__all__`` here and in :mod:`hookledger.providers` (the contract a provider package
builds on) is a promise: it stays importable from here across minor versions, and
``tests/unit/test_public_api.py`` fails when one disappears. Everything else (``reconciler.*``,
``connectors.*``, ``dashboard.*``) is hookledger's own inside and may move; the names below keep
working from their old homes too. The reference is docs/api.md.
"""

from reconciler import __version__
from reconciler.errors import (
    AmbiguousError,
    ConfigError,
    DatabaseError,
    HandlerError,
    HandlerTimeout,
    HookledgerError,
    PermanentError,
    TransientError,
)
from reconciler.idempotency import (
    IdempotencyMiddleware,
    IdempotentTransaction,
    RoutePolicy,
    TransactionError,
    idempotent_transaction,
)
from reconciler.inbox.handlers import Business, Event, Verdict, handler, upsert_if_newer
from reconciler.outbox import InvalidMessage, Outbox, add_message
from reconciler.storage.engine import make_engine
from reconciler.storage.failures import DatabaseBusy, DatabaseRefused, DatabaseUnavailable

__all__ = [
    "AmbiguousError",
    "Business",
    "ConfigError",
    "DatabaseBusy",
    "DatabaseError",
    "DatabaseRefused",
    "DatabaseUnavailable",
    "Event",
    "HandlerError",
    "HandlerTimeout",
    "HookledgerError",
    "IdempotencyMiddleware",
    "IdempotentTransaction",
    "InvalidMessage",
    "Outbox",
    "PermanentError",
    "RoutePolicy",
    "TransactionError",
    "TransientError",
    "Verdict",
    "__version__",
    "add_message",
    "handler",
    "idempotent_transaction",
    "make_engine",
    "upsert_if_newer",
]
