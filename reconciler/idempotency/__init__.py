"""Idempotency keys for the team's own API: an ASGI middleware (``middleware``) over keys kept in
the hookledger database (``store``)."""

from reconciler.idempotency.keys import RoutePolicy as RoutePolicy
from reconciler.idempotency.middleware import IdempotencyMiddleware as IdempotencyMiddleware
from reconciler.idempotency.middleware import default_owner as default_owner
