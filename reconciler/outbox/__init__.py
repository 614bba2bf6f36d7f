"""The outgoing side: the transactional outbox and its publisher.

- ``writer``: a message written in the caller's transaction (``event.outbox.add`` in a handler,
  :func:`add_message` elsewhere), its arguments checked first; one row per target and key.
- ``store``: the statements: claims with a lease, outcomes, an operator's replay.
- ``request``: what one attempt sends (pure): the key, the correlation id, the signature.
- ``publisher``: claim, POST, record; ``hookledger publish`` and ``hookledger worker --publish``.
"""

from reconciler.outbox.writer import InvalidMessage as InvalidMessage
from reconciler.outbox.writer import Outbox as Outbox
from reconciler.outbox.writer import add_message as add_message
