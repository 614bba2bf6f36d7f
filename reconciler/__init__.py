"""hookledger core: inbox, storage, configuration, reconciliation and the actions shared by CLI and UI.

Module map, floor by floor (an import points to its own floor or one below; tests/unit/test_layers.py
holds it):

0. ``connectors/`` (a package of its own): one module per provider (connector, signature scheme,
   delivery parsing, config keys, registered in ``connectors.registry``), the exception root
   (``connectors.errors``), the sandbox provider and in-memory test connectors.
1. ``errors``, ``states`` (stored states and kinds, no SQLAlchemy), ``config``, ``cron``, ``logs``,
   ``process``, ``sources`` (a configured source as its provider's ``SourceOptions``, secrets
   resolved), ``cursors``, ``audit``, ``correlation`` (the id that follows an event),
   ``outgoing`` (an outgoing POST and what its answer means), ``storage/`` (engine, models,
   migrations, dialect pieces).
2. The team's own outgoing calls and API: ``outbox/`` (the transactional outbox: writer, claims,
   publisher) and ``idempotency/`` (Idempotency-Key middleware for the team's ASGI API).
3. ``inbox/``: ``receiver`` (its steps: read the body -> verify -> ``intake``'s items of the verdict
   -> the group-committed store -> the answer), ``store``, ``worker`` (claim -> dispatch -> loop;
   ``attempts`` owns each attempt's start and outcome, ``applying`` a handler's transaction), forwarder,
   metrics.
4. ``reconcile/``: ``run`` (one run of one source: a page goes fetch -> ``lookup`` -> ``page_judge``
   -> the store's write, looked up ahead by ``pipeline``), ``judge`` (pure: findings and fix rules),
   ``compare`` (pure value rules), ``store/`` (one scan store per database and the closing passes),
   ``closing``, ``business`` (the business tables a check reads), ``lease``, ``history``, ``summary``,
   ``export`` (CSV), ``repair`` (backfill, replay, resolve).
5. ``ops/``: read models and actions the CLI, the scheduler and the dashboard share.
6. ``schedule`` (APScheduler), ``demo/``, ``dashboard_process`` (how the dashboard is started),
   ``testkit/`` (what ``hookledger.testing`` hands a handler's tests).
7. ``cli/``: the ``hookledger`` command.
8. ``docs``: the reference pages (docs/configuration.md, docs/cli.md) generated from the settings
   models and the command parser (``python -m reconciler.docs``).
9. ``dashboard/`` (a package of its own): Streamlit pages that only render.

Above them all, ``hookledger/``: the public names an application, its tests and a provider package
import (docs/api.md), re-exported from these floors; everything else here may move.
"""

__version__ = "0.1.0"
