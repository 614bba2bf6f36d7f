"""The providers, the bottom floor: one package per provider under ``connectors/providers/`` (its
signature, keys, samples, list API and sandbox routes), found through the ``hookledger.providers``
entry points (``connectors.registry``); and the machinery they share: the webhooks contract, the
signature scheme as data, HTTP with its retry policy and budget, paging and slices, the sandbox
app, in-memory test connectors. Imports nothing of ``reconciler``."""
