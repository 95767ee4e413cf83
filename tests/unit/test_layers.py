"""Imports point one way, and the package table below says which way.

Between the project's layers: orchestration → assets → cdc_lib. Inside `cdc_lib`, each package may import only
the packages its row of `MAY_IMPORT` names (and `cdc_lib.errors`, which every package may import); the CLI
(`cdc_lib.cli`) may import anything. Inside `cdc_lib.sink`, the two writer engines (`sink.spark`,
`sink.delta_rs`) never import each other, and the shared sink modules import neither engine except the few that
choose between them (`SINK_ABOVE_ENGINES`). No module uses another module's private (`_`-prefixed) names, and no
test file imports another test file (shared helpers live in helper modules).

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

# The package table (docs/architecture.md): the packages of `cdc_lib` in data-flow order, each with the packages
# it may import. Each package's `__init__` docstring repeats its row.
_BELOW_PIPELINE = ("common", "model", "config", "source", "changes", "binlog", "sink", "state", "snapshot", "status",
                   "maintenance")
MAY_IMPORT: dict[str, frozenset[str]] = {
    "common": frozenset(),
    "model": frozenset({"common"}),
    "config": frozenset({"common", "model"}),
    "source": frozenset({"common", "model", "config"}),
    "changes": frozenset({"common", "model", "config"}),
    "binlog": frozenset({"common", "model", "config", "source", "changes"}),
    "sink": frozenset({"common", "model", "config", "changes"}),
    "state": frozenset({"common", "model", "config", "source", "changes", "sink"}),
    "snapshot": frozenset({"common", "model", "config", "source", "changes", "binlog", "sink", "state"}),
    "status": frozenset({"common", "model", "config", "source", "changes", "sink", "state"}),
    "maintenance": frozenset({"common", "model", "config", "changes", "sink", "state"}),
    "pipeline": frozenset(_BELOW_PIPELINE),
    "reconcile": frozenset({*_BELOW_PIPELINE, "pipeline"}),
    "display": frozenset({*_BELOW_PIPELINE, "pipeline", "reconcile"}),
}
# Modules directly under `cdc_lib`: `errors` imports nothing of binlake, the CLI anything.
TOP_MODULES = {"cdc_lib.errors": frozenset(), "cdc_lib.cli": frozenset(MAY_IMPORT)}
ENGINES = ("cdc_lib.sink.spark", "cdc_lib.sink.delta_rs")
# The sink modules above both engines: they choose an engine or act on a table whichever engine wrote it.
SINK_ABOVE_ENGINES = {"cdc_lib.sink.merge", "cdc_lib.sink.fencing", "cdc_lib.sink.catalog", "cdc_lib.sink.change_feed",
                      "cdc_lib.sink.iceberg.convert"}


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


def package_of(module: str) -> str | None:
    """`cdc_lib.sink.spark.writer` → `sink`; None for `cdc_lib` itself, its top modules and the dev helpers."""
    parts = module.split(".")
    if parts[0] != "cdc_lib" or len(parts) < 2 or module in TOP_MODULES or is_dev(module):
        return None
    return parts[1]


def engine_of(module: str) -> str | None:
    return next((engine for engine in ENGINES if module == engine or module.startswith(f"{engine}.")), None)


def engine_modules() -> list[str]:
    return [module for module in sources() if module.startswith("cdc_lib.") and not is_dev(module)]


def test_every_engine_module_is_in_a_package_of_the_table() -> None:
    stray = [
        module for module in engine_modules()
        if module != "cdc_lib" and module not in TOP_MODULES and package_of(module) not in MAY_IMPORT
    ]
    assert stray == []


def test_every_package_docstring_names_its_job_and_what_it_may_import() -> None:
    missing = []
    for package in MAY_IMPORT:
        docstring = ast.get_docstring(ast.parse((ROOT / "cdc_lib" / package / "__init__.py").read_text())) or ""
        if "May import" not in docstring:
            missing.append(package)
    assert missing == []


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_package_imports_only_what_its_row_allows(package: str) -> None:
    against = [
        f"{module} imports {target}"
        for module in engine_modules()
        if package_of(module) == package
        for target in imports()[module]
        if target.startswith("cdc_lib.") and target not in ("cdc_lib.errors",)
        and package_of(target) not in (package, None)
        and package_of(target) not in MAY_IMPORT[package]
    ]
    assert against == []


def test_top_modules_import_only_what_their_row_allows() -> None:
    against = [
        f"{module} imports {target}"
        for module, allowed in TOP_MODULES.items()
        for target in imports()[module]
        if package_of(target) is not None and package_of(target) not in allowed
    ]
    assert against == []


def test_the_writer_engines_never_import_each_other_and_the_shared_sink_imports_neither() -> None:
    against = []
    for module in engine_modules():
        if package_of(module) != "sink" or module in SINK_ABOVE_ENGINES:
            continue
        own = engine_of(module)
        for target in imports()[module]:
            other = engine_of(target)
            if other is not None and other != own:
                against.append(f"{module} imports {target}")
    assert against == []


def private_uses(module: str) -> list[str]:
    """Private names of other project modules that `module` imports or reaches through an imported module."""
    tree = ast.parse(sources()[module].read_text())
    module_aliases: dict[str, str] = {}
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LAYERS:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in sources():
                    module_aliases[alias.asname or alias.name] = target
                elif alias.name.startswith("_") and node.module != module:
                    uses.append(f"line {node.lineno}: {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LAYERS and alias.asname:
                    module_aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_")
                and not node.attr.startswith("__") and node.value.id in module_aliases):
            uses.append(f"line {node.lineno}: {module_aliases[node.value.id]}.{node.attr}")
    return uses


def test_no_module_uses_another_modules_private_names() -> None:
    found = [f"{module} {use}" for module in sorted(sources()) for use in private_uses(module)]
    assert found == []


def test_no_test_file_imports_another_test_file() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""] if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            )
            found += [
                f"{path.relative_to(ROOT)} imports {name}"
                for name in names
                if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
            ]
    assert found == []


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
