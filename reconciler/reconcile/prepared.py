"""A source's connector, built on a thread of its own from the moment a run starts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from connectors.base import Connector
from reconciler.config import SourceSettings


class PreparedConnector:
    """What a connector costs to build (an HTTP client, its SSL context, a GitHub App's key)
    overlaps the run's first database work instead of coming after it. :meth:`get` waits for it
    (raising what its build raised); leaving the ``with`` block waits and closes whatever was
    built, used or not."""

    def __init__(
        self, factory: Callable[[SourceSettings], Connector], source: SourceSettings
    ) -> None:
        self._connector: Connector | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._build, args=(factory, source), name="connector-build", daemon=True
        )
        self._thread.start()

    def _build(
        self, factory: Callable[[SourceSettings], Connector], source: SourceSettings
    ) -> None:
        try:
            self._connector = factory(source)
        except BaseException as exc:  # raised to the run by get()
            self._error = exc

    def get(self) -> Connector:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._connector is not None
        return self._connector

    def __enter__(self) -> PreparedConnector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._thread.join()
        connector, self._connector = self._connector, None
        if connector is not None:
            connector.close()
