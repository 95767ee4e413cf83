"""Layers point one way: orchestration → assets → cdc_lib, and no module imports one that imports it back."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"cdc_lib": 0, "assets": 1, "orchestration": 2}
KNOWN_CYCLES: set[frozenset[str]] = set()


@cache
def imports() -> dict[str, set[str]]:
    """Every project module and the project modules it imports anywhere (also inside functions and TYPE_CHECKING)."""
    graph: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).glob("*.py")):
            module = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LAYERS:
                    if node.module in LAYERS:
                        found |= {f"{node.module}.{alias.name}" for alias in node.names}
                    else:
                        found.add(node.module)
                elif isinstance(node, ast.Import):
                    found |= {alias.name for alias in node.names if alias.name.split(".")[0] in LAYERS}
            graph[module] = found
    return graph


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
