"""Provider connectors: page each provider's own API from a persisted cursor (see issue #3)."""
