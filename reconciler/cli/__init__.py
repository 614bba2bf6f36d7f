"""The ``hookledger`` command line."""
