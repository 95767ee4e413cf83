"""What the installed wheel ships: the engine (with `cdc_lib.dev`, for `binlake demo`) and the Dagster layers.

Never the tests or the bench, and never a jar (they are fetched into a cache). The wheel is built as
tests/built_wheel.py builds it (from a copy of the sources, offline, without build isolation); what it does once
installed with no extras is tests/integration/test_wheel.py's.
"""

from __future__ import annotations

import configparser
import zipfile

import pytest

from tests.built_wheel import NOT_SHIPPED, ROOT, SHIPPED, build_wheel, copy_sources


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    source = copy_sources(tmp_path_factory.mktemp("source"))
    # A jar left beside the code (BINLAKE_JAR_CACHE pointed into the checkout) must not ride along.
    (source / "cdc_lib" / "stray-delta-spark.jar").write_bytes(b"PK")
    wheel = build_wheel(source, tmp_path_factory.mktemp("wheel"))
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_wheel_ships_every_module_of_the_engine_and_the_dagster_layers(wheel_files: dict[str, bytes]) -> None:
    sources = {
        path.relative_to(ROOT).as_posix()
        for package in SHIPPED
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sources - set(wheel_files) == set()
    assert {"cdc_lib/dev/__init__.py", "cdc_lib/dev/demo.py", "cdc_lib/dev/local_mariadb.py"} <= set(wheel_files)


def test_the_wheel_ships_no_tests_bench_or_jars(wheel_files: dict[str, bytes]) -> None:
    unwanted = [name for name in wheel_files if name.split("/")[0] in NOT_SHIPPED or name.endswith(".jar")]
    assert unwanted == []
    top_level = {name.split("/")[0] for name in wheel_files if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == set(SHIPPED)


def test_the_wheel_installs_the_binlake_command(wheel_files: dict[str, bytes]) -> None:
    [entry_points] = [name for name in wheel_files if name.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel_files[entry_points].decode())
    assert dict(parser["console_scripts"]) == {"binlake": "cdc_lib.cli:main"}


def test_the_wheel_registers_binlakes_dagster_component(wheel_files: dict[str, bytes]) -> None:
    # `dg list components` and `dg scaffold defs` find `orchestration.component.BinlakeComponent` through this.
    [entry_points] = [name for name in wheel_files if name.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel_files[entry_points].decode())
    assert dict(parser["dagster_dg_cli.registry_modules"]) == {"binlake": "orchestration.component"}
