"""The inbox: signed receiver, deduplicating store and the worker that applies events."""
