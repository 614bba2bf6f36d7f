"""A provider's list API as the sandbox stands in for it: strict, as the provider is.

Each provider whose events hookledger reconciles by its event list has a stand-in
(``STAND_IN`` in ``connectors/providers/<kind>/standin.py``, found there) mounted under ``/<kind>/``:
a source's ``base_url`` is ``<sandbox>/<kind>``. A stand-in answers as the provider documents, and
refuses what the provider refuses: an unknown query parameter, a page size beyond its limit, a
cursor it never gave, the wrong credentials, and calls beyond the rate limit (``Faults.rate_limit``)
with the provider's own 429. Its history is a list of :class:`Sent`: each event as the list shows it
and as its webhook delivered it, so tests and the demo deliver exactly what the list holds.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from connectors.sandbox.common import SandboxState

Endpoint = Callable[[Request], Awaitable[Response]]

PROVIDERS = Path(__file__).resolve().parents[1] / "providers"


@dataclass(frozen=True)
class Sent:
    """One event the provider sent: as its list shows it, and as its webhook delivered it."""

    event_id: str
    at: datetime
    item: dict[str, Any]  # as the list API shows it
    body: bytes  # the webhook's body (signed when delivered: ``Provider.sign``)
    headers: dict[str, str] = field(default_factory=dict)  # the delivery's unsigned headers
    object_type: str | None = None
    object_id: str | None = None
    status: str | None = None  # the object's state this event reports (a business check's field)


class Refused(Exception):
    """A request the provider would refuse, carrying its answer."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class StandIn:
    """One provider's API in the sandbox (a subclass per provider)."""

    kind: ClassVar[str]
    list_path: ClassVar[str]  # the list's route (under /<kind>/), for the strictness tests
    # the [[sources]] keys a source of this kind needs to read the stand-in, besides base_url and
    # its secrets' environment variables (``credentials``)
    source_keys: ClassVar[dict[str, Any]] = {}
    # source key ending in ``_env`` -> the secret the stand-in accepts (what a test's environment holds)
    credentials: ClassVar[dict[str, str]] = {}
    # the business check a scenario plants faults in: the record's object type, and the path of
    # the object's state in the record's object
    object_type: ClassVar[str]
    status_path: ClassVar[str] = "status"
    # its records are object states without an event id (Recurly's accounts and subscriptions):
    # reconciled by object, ``<object_type>:<object_id>``
    by_object: ClassVar[bool] = False

    def __init__(self, box: SandboxState) -> None:
        self.box = box

    @property
    def sent(self) -> list[Sent]:
        """The provider's history, oldest first."""
        return self.box.world.listed.get(self.kind, [])

    def routes(self) -> list[BaseRoute]:
        raise NotImplementedError

    def route(self, path: str, endpoint: Endpoint, methods: tuple[str, ...] = ("GET",)) -> Route:
        """A route admitted first (faults, rate limit, authentication), its refusals answered."""

        async def answer(request: Request) -> Response:
            try:
                await self.admit(request)
                return await endpoint(request)
            except Refused as refused:
                return refused.response

        return Route(path, answer, methods=list(methods))

    def app(self) -> Starlette:
        """The stand-in alone at the root of a server, where an official SDK that joins absolute
        paths to its base URL reads it (the sandbox mounts it under ``/<kind>/``)."""
        return Starlette(routes=self.routes())

    def error(self, status: int, message: str) -> Response:
        """An error in the provider's own shape."""
        return JSONResponse({"error": message}, status_code=status)

    def throttled(self, wait: float) -> Response:
        """A call beyond the rate limit, answered as the provider answers it."""
        return self.error(429, "Too many requests")

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        """``count`` events between ``start`` and ``start + span``, oldest first (deterministic for
        one ``rng`` seed)."""
        raise NotImplementedError

    async def admit(self, request: Request) -> None:
        """The sandbox's fault switches (rate limit included) and the provider's authentication,
        before anything is read; raises :class:`Refused`."""
        if denied := await self.box._fault(request):
            raise Refused(denied)
        if not self.authorised(request):
            raise Refused(self.error(401, "authentication failed"))

    def authorised(self, request: Request) -> bool:
        raise NotImplementedError

    def query(self, request: Request, known: Iterable[str]) -> dict[str, str]:
        """The query's parameters, refused as the provider refuses one it does not know (and one
        given twice)."""
        allowed = set(known)
        seen: dict[str, str] = {}
        for name, value in request.query_params.multi_items():
            if name not in allowed:
                raise Refused(self.error(400, f"unknown parameter: {name}"))
            if name in seen:
                raise Refused(self.error(400, f"parameter given twice: {name}"))
            seen[name] = value
        return seen

    def size(self, params: Mapping[str, str], name: str, default: int, most: int) -> int:
        """A page size within the provider's limits (1..``most``), refused outside them."""
        raw = params.get(name)
        if raw is None:
            return default
        if not raw.isdigit() or not 1 <= int(raw) <= most:
            raise Refused(self.error(400, f"{name} must be between 1 and {most}"))
        return int(raw)


def stand_in_kinds() -> list[str]:
    """The kinds with a stand-in: a ``standin.py`` in their package (read, not imported)."""
    return sorted(path.parent.name for path in PROVIDERS.glob("*/standin.py"))


def stand_in_class(kind: str) -> type[StandIn]:
    found: type[StandIn] = importlib.import_module(f"connectors.providers.{kind}.standin").STAND_IN
    return found
