"""hookledger core: inbox, storage, configuration, reconciliation and the actions shared by CLI and UI."""

__version__ = "0.1.0"
