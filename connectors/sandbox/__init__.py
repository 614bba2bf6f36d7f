"""A local provider that speaks the subsets of the Stripe, GitHub and Shopify APIs the connectors use.

Deterministic data from a seed (:mod:`connectors.sandbox.world`), an HTTP server with fault switches
(:mod:`connectors.sandbox.app`, serving the routes each provider package keeps in its ``sandbox``
module), and a webhook sender that delivers with realistic faults and reports
exactly what it did (:mod:`connectors.sandbox.sender`).
"""
