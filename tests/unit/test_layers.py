"""Layers point one way: orchestration → assets → cdc_lib, and no module imports one that imports it back.

The development helpers (`cdc_lib.dev`) sit beside the layers: only the tests, the bench and the CLI's
`binlake demo` (lazily, inside the command) may import them, so no pipeline ever runs their code.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"cdc_lib": 0, "assets": 1, "orchestration": 2}
KNOWN_CYCLES: set[frozenset[str]] = set()


@cache
def sources() -> dict[str, Path]:
    """Every project module (sub-packages included) and its file."""
    found: dict[str, Path] = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(node: ast.AST) -> set[str]:
    """The project modules one import statement names (`from pkg import module` names `pkg.module`)."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LAYERS:
        return {
            f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in sources() else node.module
            for alias in node.names
        }
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name.split(".")[0] in LAYERS}
    return set()


@cache
def imports() -> dict[str, set[str]]:
    """Every project module and the project modules it imports anywhere (also inside functions and TYPE_CHECKING)."""
    return {
        module: {target for node in ast.walk(ast.parse(path.read_text())) for target in imported(node)}
        for module, path in sources().items()
    }


DEV = "cdc_lib.dev"
# The one engine module allowed to import a development helper: `binlake demo` is a command users run.
DEV_IMPORTERS = {"cdc_lib.cli"}


def is_dev(module: str) -> bool:
    return module == DEV or module.startswith(f"{DEV}.")


def test_no_layer_imports_the_one_above_it() -> None:
    upward = [
        f"{module} imports {target}"
        for module, targets in imports().items()
        for target in targets
        if LAYERS[target.split(".")[0]] > LAYERS[module.split(".")[0]]
    ]
    assert upward == []


@pytest.mark.parametrize("module", sorted(imports()))
def test_no_import_cycle_through(module: str) -> None:
    graph = imports()
    seen: set[str] = set()
    stack = [(target, [module, target]) for target in graph[module]]
    while stack:
        current, path = stack.pop()
        if current == module:
            assert frozenset(path[:-1]) in KNOWN_CYCLES, " → ".join(path)
            continue
        if current in seen or current not in graph:
            continue
        seen.add(current)
        stack += [(target, [*path, target]) for target in graph[current]]


def test_engine_modules_do_not_import_the_development_helpers() -> None:
    reaching = [
        f"{module} imports {target}"
        for module, targets in imports().items()
        if not is_dev(module) and module not in DEV_IMPORTERS
        for target in targets
        if is_dev(target)
    ]
    assert reaching == []


@pytest.mark.parametrize("module", sorted(DEV_IMPORTERS))
def test_the_cli_imports_the_development_helpers_only_inside_a_command(module: str) -> None:
    """Importing the CLI (every `binlake` command) must not load the demo or the private MariaDB."""
    tree = ast.parse(sources()[module].read_text())
    in_functions = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    eager = [
        f"line {node.lineno} imports {target}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in in_functions
        for target in imported(node)
        if is_dev(target)
    ]
    assert eager == []
    assert any(is_dev(target) for target in imports()[module]), f"{module} no longer imports {DEV}: drop it here"
