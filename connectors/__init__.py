"""The providers, the bottom floor: one module per provider (its connector, signature scheme, delivery
parsing and config keys, registered in ``connectors.registry``), the exception root, the one retry
policy, the sandbox provider and in-memory test connectors. Imports nothing of ``reconciler``."""
