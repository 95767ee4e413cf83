"""Every distribution the shipped packages import is one `pip install binlake` brings: declared in `[project]
dependencies` of pyproject.toml, or required by one of those (with the extras they ask for).

CI installs `.[test]`, so an import satisfied only by a test extra would pass every other test and fail for a
user at run time (issue 25: `deltalake` was declared only in `[test]`). Imports are read with `ast`, anywhere in
a module (lazy imports inside functions too); only imports under `if TYPE_CHECKING:` are left out (stub packages
for the type checker, never imported when binlake runs).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("cdc_lib", "assets", "orchestration")


def type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_top_levels(tree: ast.AST) -> set[str]:
    """The top-level names of every absolute import in `tree`, skipping `if TYPE_CHECKING:` bodies."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and type_checking_only(node):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def third_party_imports() -> dict[str, set[str]]:
    """Third-party top-level import name → the shipped modules that import it."""
    importers: dict[str, set[str]] = {}
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for name in imported_top_levels(ast.parse(path.read_text(), filename=str(path))):
                if name in SHIPPED or name in sys.stdlib_module_names or name == "__future__":
                    continue
                importers.setdefault(name, set()).add(module)
    return importers


#: Imports that may come from a user-facing extra instead (`pip install binlake[iceberg]`), each only in the
#: modules named: the config refuses the feature that loads them, naming the extra, when it is not installed.
OPTIONAL_EXTRAS = {"pyiceberg": ("iceberg", {"cdc_lib.sink.iceberg.convert"})}


def declared_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def extra_requirements(extra: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["optional-dependencies"][extra]]


@cache
def requirements_of(distribution: str, extras: frozenset[str]) -> tuple[Requirement, ...]:
    """What an installed distribution requires with `extras` (markers evaluated for this interpreter)."""
    found = []
    for text in metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is None:
            found.append(requirement)
            continue
        # `evaluate` fills in this interpreter's environment (python_version, sys_platform, ...) itself.
        if any(requirement.marker.evaluate({"extra": extra}) for extra in sorted(extras) or [""]):
            found.append(requirement)
    return tuple(found)


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """The canonical names of `requirements` and of everything they require, transitively."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    pending = [(requirement.name, frozenset(requirement.extras)) for requirement in requirements]
    while pending:
        name, extras = pending.pop()
        if (canonicalize_name(name), extras) in seen:
            continue
        seen.add((canonicalize_name(name), extras))
        names.add(canonicalize_name(name))
        try:
            required = requirements_of(name, extras)
        except metadata.PackageNotFoundError:
            # Required but not installed here (a platform marker this interpreter does not meet): it cannot be
            # what a module imports on this machine either.
            continue
        pending.extend((requirement.name, frozenset(requirement.extras)) for requirement in required)
    return names


def undeclared_imports() -> list[str]:
    """One line per (module, import) whose distribution `pip install binlake` would not install."""
    providers = metadata.packages_distributions()
    available = installed_closure(declared_requirements())
    problems = []
    for name, modules in sorted(third_party_imports().items()):
        distributions = {canonicalize_name(distribution) for distribution in providers.get(name, [])}
        if name in OPTIONAL_EXTRAS:
            extra, allowed = OPTIONAL_EXTRAS[name]
            if modules <= allowed and distributions & installed_closure(extra_requirements(extra)):
                continue
        if not distributions:
            problems.append(f"{', '.join(sorted(modules))}: imports '{name}', which no installed distribution "
                            f"provides")
        elif not distributions & available:
            problems.append(
                f"{', '.join(sorted(modules))}: imports '{name}' from distribution "
                f"{' or '.join(sorted(distributions))}, which [project] dependencies in pyproject.toml neither "
                f"declare nor require"
            )
    return problems


def test_lazy_and_type_checking_imports_are_told_apart() -> None:
    tree = ast.parse(
        "import a.b\nfrom c import d\nfrom . import e\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import stubs_only\nelse:\n    import at_run_time\n"
        "def f():\n    import lazy\n"
    )
    assert imported_top_levels(tree) == {"a", "c", "typing", "lazy", "at_run_time"}


def test_the_closure_follows_requested_extras() -> None:
    # moto[server] pulls in flask only through its `server` extra (moto is installed by the test extra).
    assert "flask" in installed_closure([Requirement("moto[server]")])
    assert "flask" not in installed_closure([Requirement("moto")])


def test_every_distribution_the_shipped_packages_import_is_a_declared_dependency() -> None:
    problems = undeclared_imports()
    assert problems == [], "pip install binlake would not bring what these imports need (add each distribution "\
        "to [project] dependencies in pyproject.toml):\n  " + "\n  ".join(problems)
