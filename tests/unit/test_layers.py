"""The floors of the code point one way: each module imports only its own floor and those below.

connectors/ (the providers) is the bottom floor and imports nothing of hookledger's above it; the
dashboard is the top floor of the product and nothing imports it; `hookledger` (the public names,
re-exported from the floors below) sits above it. The test reads the import statements (no module is
imported), so a new arrow the wrong way fails here, naming both ends.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# bottom to top; a module belongs to the floor of the longest prefix that names it
FLOORS: list[tuple[str, ...]] = [
    ("connectors",),
    (
        "reconciler",  # the package's own __init__
        "reconciler.errors",
        "reconciler.states",
        "reconciler.kinds",
        "reconciler.logs",
        "reconciler.config",
        "reconciler.cron",
        "reconciler.crontab",
        "reconciler.process",
        "reconciler.storage",
        "reconciler.cursors",
        "reconciler.audit",
        "reconciler.sources",
        "reconciler.correlation",
        "reconciler.outgoing",
    ),
    ("reconciler.outbox", "reconciler.idempotency"),
    ("reconciler.inbox",),
    ("reconciler.reconcile",),
    ("reconciler.ops", "reconciler.issues"),  # issues retry dead events through ops' bulk replay
    ("reconciler.notify",),  # reads runs and dead letters, renders with ops' display and links
    (
        "reconciler.schedule",
        "reconciler.demo",
        "reconciler.dashboard_process",
        "reconciler.testkit",
    ),
    ("reconciler.cli",),
    ("reconciler.docs",),  # the reference pages, generated from the settings and the parser
    ("dashboard",),
    ("hookledger",),  # the public names, re-exported from the floors below (docs/api.md)
]


def floor_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, floor)
    for floor, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            named = module == prefix or module.startswith(prefix + ".")
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), floor)
    return None if best is None else best[1]


def modules() -> dict[str, Path]:
    out = {}
    for package in ("connectors", "reconciler", "dashboard", "hookledger"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports(path: Path, module: str, known: Collection[str] = ()) -> set[str]:
    """The modules ``path`` imports, at module level or in a function. With ``known`` (module
    names), ``from package import name`` counts as importing ``package.name`` where that is a known
    module (``from connectors import scheme_check``), and as importing ``package`` otherwise."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = (
                    module.split(".")[: -node.level]
                    if path.name != "__init__.py"
                    else module.split(".")[: len(module.split(".")) - node.level + 1]
                )
                source = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                source = node.module
            else:
                continue
            named = {f"{source}.{alias.name}" for alias in node.names} & set(known)
            found |= named
            if len(named) < len(node.names):
                found.add(source)
    return found


def test_every_module_has_a_floor() -> None:
    assert [m for m in modules() if floor_of(m) is None] == []


def test_imports_point_down_or_sideways_never_up() -> None:
    wrong = []
    for module, path in sorted(modules().items()):
        mine = floor_of(module)
        assert mine is not None
        for target in sorted(imports(path, module)):
            theirs = floor_of(target)
            if theirs is not None and theirs > mine:
                wrong.append(f"{module} (floor {mine}) imports {target} (floor {theirs})")
    assert wrong == []


def test_connectors_import_nothing_of_the_reconciler_or_the_dashboard() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, path in modules().items()
        if module.startswith("connectors")
        for target in imports(path, module)
        if target.split(".")[0] in ("reconciler", "dashboard")
    ]
    assert wrong == []


def test_the_floor_rules_catch_an_arrow_the_wrong_way() -> None:
    assert floor_of("connectors.providers.stripe") == 0 and floor_of("dashboard.views.events") == 10
    assert floor_of("reconciler.reconcile.store.sqlite") == 4
    assert floor_of("reconciler.outbox.writer") < floor_of("reconciler.inbox.handlers")  # type: ignore[operator]
    assert floor_of("reconciler.storage.models") < floor_of("reconciler.inbox.worker")  # type: ignore[operator]


PROVIDERS = "connectors.providers."  # a provider package: connectors.providers.<kind>[.<module>]


def provider_of(module: str) -> str | None:
    """The provider package a module belongs to, or None for connectors' shared machinery."""
    return ".".join(module.split(".")[:3]) if module.startswith(PROVIDERS) else None


def connectors_graph() -> dict[str, set[str]]:
    """Who imports whom inside ``connectors/``, module-level and function-level imports alike."""
    mine = {m: p for m, p in modules().items() if m.split(".")[0] == "connectors"}
    return {
        module: {t for t in imports(path, module, mine) if t in mine and t != module}
        for module, path in mine.items()
    }


def find_cycle(graph: Mapping[str, Collection[str]]) -> list[str]:
    """One cycle of the graph (its modules, the first repeated at the end), or [] when none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_a_provider_package_imports_no_other_provider_nor_the_registry() -> None:
    """A provider is a package (issue 47): its modules import connectors' shared machinery and
    their own package, never another provider's (nor ``connectors.registry``, which finds them)."""
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(connectors_graph().items())
        if (own := provider_of(module)) is not None
        for target in sorted(targets)
        if provider_of(target) not in (None, own) or target == "connectors.registry"
    ]
    assert wrong == []


def test_connectors_shared_modules_import_no_provider() -> None:
    """What every provider uses (the webhooks contract, HTTP, paging, slices, budget, schemes)
    knows no provider: everything in ``connectors/`` outside ``providers/`` and the sandbox."""
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(connectors_graph().items())
        if not module.startswith(("connectors.providers", "connectors.sandbox"))
        for target in sorted(targets)
        if provider_of(target) is not None
    ]
    assert wrong == []


def test_connectors_import_graph_has_no_cycle() -> None:
    assert find_cycle(connectors_graph()) == []


def test_the_provider_rules_catch_a_wrong_arrow() -> None:
    assert provider_of("connectors.providers.stripe.thin") == "connectors.providers.stripe"
    assert provider_of("connectors.providers.stripe") == "connectors.providers.stripe"
    assert provider_of("connectors.providers") is None and provider_of("connectors.http") is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    # ``from package import module`` names the module (a function-level import counts too)
    graph = connectors_graph()
    assert "connectors.scheme_check" in graph["connectors.providers.generic"]
    assert "connectors.providers.twilio.api" in graph["connectors.providers.twilio"]


def test_dialect_choices_are_made_inside_storage() -> None:
    """Which database this is gets asked of ``reconciler.storage.dialect`` (what it can do: one
    writer, row locks, skipping locked rows), never by comparing dialect names elsewhere."""
    import re

    outside = []
    for package in ("reconciler", "connectors", "dashboard"):
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("reconciler/storage/"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bdialect\.name\b", line):
                    outside.append(f"{relative}:{n}")
    assert outside == []


def test_driver_errors_are_translated_inside_storage() -> None:
    """A database driver's error becomes hookledger's in ``reconciler.storage.failures``: nothing
    else reads a driver's error (its ``orig``, codes, invalidation) or catches one of the DB-API's
    classes. (A handler's errors are classified in ``inbox.retry`` by SQLAlchemy's classes, which
    a handler's statements keep: that names them without catching them.)"""
    import re

    reading = re.compile(
        r"\.orig\b|sqlite_errorname|connection_invalidated|\bsqlstate\b|\bpgcode\b"
        r"|except .*\b(DBAPIError|OperationalError|InterfaceError|IntegrityError|ProgrammingError"
        r"|DataError|InternalError|NotSupportedError|sqlite3|psycopg)\b"
    )
    outside = []
    for package in ("reconciler", "connectors", "dashboard", "hookledger"):
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("reconciler/storage/"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if reading.search(line):
                    outside.append(f"{relative}:{n}")
    assert outside == []


MAX_MODULE_LINES = 450  # a module past this holds more than one job: split it by job


def test_no_module_is_longer_than_one_job_needs() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for package in ("reconciler", "connectors", "dashboard")
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def _field_annotations(relative: str, class_name: str) -> dict[str, str]:
    tree = ast.parse((ROOT / relative).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def test_what_travels_with_a_page_between_the_stages_is_typed() -> None:
    """A page goes fetch -> look up -> judge -> write (reconcile.run): neither the connector's page
    nor the facts looked up for it carry an ``Any`` value, and the scan's options carry no hook
    into which a connector would call back."""
    import re

    page = _field_annotations("connectors/base.py", "Page")
    facts = _field_annotations("reconciler/reconcile/lookup.py", "PageFacts")
    options = _field_annotations("connectors/base.py", "ScanOptions")
    assert {"records", "cursor"} <= set(page) and {"business", "current", "stale"} <= set(facts)
    untyped = {
        f"{owner}.{name}": annotation
        for owner, fields in (("Page", page), ("PageFacts", facts))
        for name, annotation in fields.items()
        if re.search(r"\bAny\b", annotation)
    }
    assert untyped == {}
    assert "prepare" not in options
