"""Built-in providers, one package each: found through the ``hookledger.providers`` entry points
(``connectors.registry``), imported only when a source or a command needs one."""
