"""Idempotency keys for the team's own API: an ASGI middleware (``middleware``) over keys kept in
the hookledger database (``store``), and the transaction an app writes its effect in so that the
effect and the stored response commit together (``transaction``)."""

from reconciler.idempotency.keys import RoutePolicy as RoutePolicy
from reconciler.idempotency.middleware import IdempotencyMiddleware as IdempotencyMiddleware
from reconciler.idempotency.middleware import default_owner as default_owner
from reconciler.idempotency.transaction import IdempotentTransaction as IdempotentTransaction
from reconciler.idempotency.transaction import TransactionError as TransactionError
from reconciler.idempotency.transaction import idempotent_transaction as idempotent_transaction
