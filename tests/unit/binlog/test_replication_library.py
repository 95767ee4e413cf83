"""python-mysql-replication's private attributes stay behind `cdc_lib.binlog.replication_library`, which refuses a
library release other than the one they were checked against."""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

import pymysql.protocol
import pymysqlreplication
import pytest

from cdc_lib.binlog import replication_library
from cdc_lib.binlog.replication_library import VERIFIED_VERSION, ReplicationLibraryError, check_version
from cdc_lib.binlog.stream import open_stream
from cdc_lib.config.model import SourceConfig
from cdc_lib.model.positions import BinlogPosition

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ROOT / "cdc_lib" / "binlog" / "replication_library.py"


@cache
def library_private_names() -> tuple[frozenset[str], frozenset[str]]:
    """The private attributes the library's classes (and PyMySQL's packet, which its wrapper holds) keep on `self`,
    name-mangled as Python stores them, and the names of those classes."""
    attributes: set[str] = set()
    classes: set[str] = set()
    package = Path(pymysqlreplication.__file__).parent
    paths = [path for path in package.rglob("*.py") if "tests" not in path.relative_to(package).parts]
    for path in [*paths, Path(pymysql.protocol.__file__)]:
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef):
                continue
            classes.add(cls.name)
            for node in ast.walk(cls):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                        and node.attr.startswith("_") and not node.attr.endswith("__")):
                    mangled = node.attr.startswith("__")
                    attributes.add(f"_{cls.name.lstrip('_')}{node.attr}" if mangled else node.attr)
    return frozenset(attributes), frozenset(classes)


def private_reads(path: Path) -> list[str]:
    """Where a module reads one of the library's private attributes: `x._name` (on anything but its own `self`),
    or the name as a string (`getattr(x, "_name")`, a name-mangled `_Class__name`, also inside an f-string)."""
    attributes, classes = library_private_names()
    mangled = re.compile(r"_(?:" + "|".join(sorted(classes)) + r")__\w*")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in attributes and not (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_") and (
            node.value in attributes or mangled.match(node.value)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    return found


def test_only_the_adapter_reads_the_librarys_private_attributes() -> None:
    modules = [path for path in sorted((ROOT / "cdc_lib").rglob("*.py")) if path != ADAPTER]
    outside = [use for path in modules for use in private_reads(path)]
    assert outside == []


def test_the_scan_sees_the_private_attributes_the_adapter_reads() -> None:
    # Without this, a scan that matched nothing would pass the test above for any code.
    found = " ".join(private_reads(ADAPTER))
    for name in ("'_BinLogPacketWrapper__data_buffer'", "'_RowsEvent__rows'", "'_data'", "'_position'",
                 "'_BinLogStreamReader__'", "._ctl_connection"):
        assert name in found


def test_the_installed_library_is_the_verified_one_and_the_one_pyproject_pins() -> None:
    check_version()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"mysql-replication=={VERIFIED_VERSION}" in dependencies


@pytest.mark.parametrize("installed", ["1.0.18", "1.1.0", "0.45.1", None])
def test_another_library_version_is_refused_with_a_remedy(monkeypatch: pytest.MonkeyPatch, installed: str | None
                                                          ) -> None:
    monkeypatch.setattr(replication_library, "installed_version", lambda: installed)
    with pytest.raises(ReplicationLibraryError) as refused:
        check_version()
    assert refused.value.remedy == f"install the pinned release: pip install mysql-replication=={VERIFIED_VERSION}"
    assert (installed or "(version unknown)") in refused.value.cause and not refused.value.retryable


def test_a_binlog_reader_is_not_opened_on_another_library_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replication_library, "installed_version", lambda: "1.0.18")
    source = SourceConfig(host="127.0.0.1", port=1, user="u", password="p", server_id=1, tables=("db.*",))
    with pytest.raises(ReplicationLibraryError):
        open_stream(source, BinlogPosition("mysql-bin.000001", 4), events=None, tables=[])


def test_the_librarys_advice_to_set_full_row_metadata_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """binlake reads MINIMAL table maps by position; the library's advice, repeated at every stream it opens (each
    batch in follow mode), would tell users to change a setting binlake handles. Other library warnings pass."""
    import logging

    import cdc_lib.binlog.replication_library  # noqa: F401  (installs the filter)

    library = logging.getLogger("pymysqlreplication")
    with caplog.at_level(logging.WARNING, logger="pymysqlreplication"):
        library.warning("\n   Setting The Variable Value BINLOG_ROW_METADATA = FULL, BINLOG_ROW_IMAGE = FULL.\n")
        library.warning("another warning")
    assert [record.getMessage() for record in caplog.records] == ["another warning"]
