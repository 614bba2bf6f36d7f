"""``[worker] handlers = ["reconciler.demo.worker_handlers"]``: the demo's handlers on the
process-wide registry, for ``hookledger worker --config var/demo/config.toml``."""

from reconciler.demo.handlers import register
from reconciler.inbox.handlers import default_registry

register(default_registry)
