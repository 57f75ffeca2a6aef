"""The one-way dependency rule of ARCHITECTURE.md §2, checked on every module's imports.

    storage <- protocol <- {broker, client};  security <- {broker, client};
    admin, operator, cli and spark <- client — never broker internals.

Every ``import`` / ``from ... import`` of every module below the fixed roots is parsed (``ast``:
also the ones inside functions and ``TYPE_CHECKING`` blocks, which are dependencies all the
same) and reduced to an edge between top-level packages (``strata.<package>``). An edge not in
``ALLOWED`` fails, naming the module and the import. ``ALLOWED`` is what the architecture
permits (an edge may be allowed and unused, e.g. protocol -> storage); it must have no cycle.

``EXCEPTIONS`` lists the module-level imports that cross the rule on purpose, each with its
reason; there are only launchers there (a process entry point starting another package's server),
never a client reaching into a broker. An exception that no longer occurs fails, so the list only
shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ROOTS = ("storage", "services", "operator", "spark")

# package -> the packages it may import (besides itself). Lower layers first.
ALLOWED: dict[str, frozenset[str]] = {
    "storage": frozenset(),
    "metadata": frozenset(),
    "protocol": frozenset({"storage"}),
    "security": frozenset({"metadata", "storage"}),
    "client": frozenset({"protocol", "security", "storage"}),
    "broker": frozenset({"storage", "protocol", "metadata", "security", "client"}),
    "admin": frozenset({"client", "security"}),
    "cli": frozenset({"client", "security", "protocol", "metadata", "storage", "admin", "spark"}),
    "operator": frozenset({"client", "protocol"}),
    "spark": frozenset({"client", "protocol", "storage"}),
}

# (importing module, imported package) -> why this one import may cross the rule.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("strata.cli.main", "broker"):
        "`strata broker` starts a broker in this process (strata.broker.server.run): the "
        "launcher of the broker, not a client of it; every other command uses strata.client",
    ("strata.broker.__main__", "cli"):
        "`python -m strata.broker` is the `strata broker` command: one argument parser",
    ("strata.admin.__main__", "cli"):
        "`python -m strata.admin` is the `strata admin` command: one argument parser",
}


def modules() -> Iterator[tuple[str, Path]]:
    for root in ROOTS:
        for path in sorted((ROOT / root / "strata").rglob("*.py")):
            parts = path.relative_to(ROOT / root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), path


def imported(module: str, path: Path) -> Iterator[str]:
    """Every absolute module name ``module`` imports (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module:
                yield node.module


def package_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "strata" else None


def edges() -> Iterator[tuple[str, str, str]]:
    """(importing module, its package, imported package) for every cross-package import."""
    for module, path in modules():
        source = package_of(module)
        assert source is not None, module
        for name in imported(module, path):
            target = package_of(name)
            if target is not None and target != source:
                yield module, source, target


def test_every_package_is_in_the_table() -> None:
    packages = {package_of(module) for module, _ in modules()}
    assert packages == set(ALLOWED)


def test_dependencies_point_one_way() -> None:
    wrong = sorted({f"{module} ({source}) imports strata.{target}"
                    for module, source, target in edges()
                    if target not in ALLOWED[source] and (module, target) not in EXCEPTIONS})
    assert wrong == []


def test_every_exception_still_occurs() -> None:
    crossing = {(module, target) for module, _, target in edges()}
    assert sorted(set(EXCEPTIONS) - crossing) == []


def test_the_allowed_edges_have_no_cycle() -> None:
    state: dict[str, str] = {}

    def visit(package: str, trail: tuple[str, ...]) -> None:
        assert state.get(package) != "open", " -> ".join((*trail, package))
        if state.get(package) == "done":
            return
        state[package] = "open"
        for target in ALLOWED[package]:
            visit(target, (*trail, package))
        state[package] = "done"

    for package in ALLOWED:
        visit(package, ())


def test_clients_never_import_broker_internals() -> None:
    # The rule the table encodes, stated directly (and its exceptions are launchers only).
    clients = {"client", "security", "admin", "operator", "cli", "spark", "protocol", "storage"}
    reaching = sorted(f"{module} imports strata.broker" for module, source, target in edges()
                      if source in clients and target == "broker"
                      and (module, target) not in EXCEPTIONS)
    assert reaching == []
