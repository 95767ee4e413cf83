"""binlake as users get it: the wheel, installed with no extras into a clean virtualenv, run from outside.

CI installs the checkout with its `test` extra, which hides a runtime import that only a test extra provides
(issue 25: `deltalake`, imported by the default writer, was declared only in `[test]`). Here the wheel goes into a
virtualenv without system site packages (`pip install <wheel>`, from PyPI through the local pip cache; one
virtualenv per test session), and that environment's own `binlake` command validates, snapshots, syncs, reports
and reconciles a table of the suite's MariaDB. Then a fresh `dg` project loads binlake's component from that same
environment, with only what the project itself declares added (`dagster-dg-cli`, its dev dependency), and a
snapshot launched there lands in Delta. Nothing of this checkout is on the path: the process runs from a
temporary folder with no PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cdc_lib.dev.local_mariadb import LocalMariaDB
from tests.built_wheel import ROOT, CleanVenv, build_wheel, clean_venv_with, copy_sources, pip_environment
from tests.conftest import CDC_PASSWORD, CDC_USER, ConfigFactory, scan_rows, source_rows, sql, write_config_file

#: The `dg` CLI a project made by `create-dagster` declares as its own dev dependency (binlake does not need it).
DG_CLI = "dagster-dg-cli==1.13.27"
COMPONENT_TYPE = "orchestration.component.BinlakeComponent"


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> CleanVenv:
    """This checkout's wheel in a new virtualenv, no extras: built and installed once per test session."""
    base = tmp_path_factory.mktemp("installed")
    source = copy_sources(Path(base / "source"))
    (base / "dist").mkdir()
    wheel = build_wheel(source, base / "dist")
    return clean_venv_with(wheel, base / "venv")


@dataclass(frozen=True)
class Outside:
    """Runs commands of the clean virtualenv from a folder outside the checkout."""

    venv: CleanVenv
    cwd: Path
    env: dict[str, str]

    def run(self, command: str, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.venv.bin / command), *arguments], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def ok(self, command: str, *arguments: str) -> str:
        started = time.monotonic()
        done = self.run(command, *arguments)
        print(f"{command} {' '.join(arguments[2:] if arguments[:1] == ('--config',) else arguments)}: "
              f"{time.monotonic() - started:.1f} s")
        assert done.returncode == 0, f"{command} {' '.join(arguments)} exited {done.returncode}:\n" \
            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done.stdout + done.stderr


@pytest.fixture
def outside(installed: CleanVenv, tmp_path: Path) -> Outside:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {**pip_environment(), "PATH": f"{installed.bin}{os.pathsep}{os.environ.get('PATH', '')}",
           "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"}
    return Outside(venv=installed, cwd=cwd, env=env)


def test_the_installed_environment_is_the_wheel_alone(outside: Outside) -> None:
    # binlake from the virtualenv, not from this checkout; the distributions it needs at run time came with it.
    shown = outside.ok("python", "-c", "import cdc_lib, deltalake, orchestration; print(cdc_lib.__file__)")
    assert Path(shown.strip()).is_relative_to(outside.venv.root) and not Path(shown.strip()).is_relative_to(ROOT)
    listing = outside.run("python", "-m", "pip", "list", "--format", "json", "--disable-pip-version-check")
    listed = {package["name"].lower() for package in json.loads(listing.stdout)}
    assert {"binlake", "deltalake", "pyspark", "dagster"} <= listed
    # No test extra came along (prometheus-client among them: binlake writes its metrics text itself).
    assert not {"pytest", "polars", "moto", "hypothesis", "prometheus-client", "prometheus_client"} & listed


def test_the_installed_cli_validates_snapshots_syncs_reports_and_reconciles(
    outside: Outside, mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, tmp_path: Path
) -> None:
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, label VARCHAR(40) NOT NULL, qty INT)",
        f"INSERT INTO {table} SELECT seq, CONCAT('item ', seq), seq FROM {database}.seq_1_to_300")
    config = make_config([table])
    config_path = str(write_config_file(config, tmp_path / "binlake.yaml"))

    assert "offset store writable" in outside.ok("binlake", "--config", config_path, "validate")
    outside.ok("binlake", "--config", config_path, "snapshot")
    path = str(tmp_path / "lake" / database / "items")
    assert sorted(scan_rows(path)) == source_rows(mariadb, table)

    sql(mariadb, f"UPDATE {table} SET qty = -qty WHERE id % 7 = 0", f"DELETE FROM {table} WHERE id > 290",
        f"INSERT INTO {table} VALUES (1000, 'new', NULL)")
    outside.ok("binlake", "--config", config_path, "sync", "--until-caught-up")
    assert sorted(scan_rows(path)) == source_rows(mariadb, table)

    [status] = json.loads(outside.run("binlake", "--config", config_path, "status", "--json").stdout)
    assert status["table"] == table and status["consistent"] is True and status["error"] is None
    # The metrics text comes from the wheel alone; this process parses it with Prometheus's own parser.
    metrics = outside.ok("binlake", "--config", config_path, "-q", "status", "--format", "openmetrics")
    families = {family.name: family for family in text_string_to_metric_families(metrics)}
    assert [sample.value for sample in families["binlake_rows_applied"].samples
            if sample.name.endswith("_total") and sample.labels["operation"] == "insert"] == [1]
    reconciled = outside.run("binlake", "--config", config_path, "reconcile", "--json")
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    [report] = json.loads(reconciled.stdout)
    assert report["table"] == table, report


@pytest.fixture
def dg_project(installed: CleanVenv, tmp_path: Path) -> Iterator[Outside]:
    """A fresh `dg` project whose environment is the clean virtualenv plus what the project declares itself."""
    # What `uv sync` of a project made by `create-dagster` would add: its dev dependency, the `dg` CLI. Installed
    # after the CLI test above (same session), which so ran without it.
    installed.pip_install(DG_CLI)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    root = tmp_path / "lakehouse"
    env = {**pip_environment(), "PATH": f"{installed.bin}{os.pathsep}{os.environ.get('PATH', '')}",
           # The project's own code by path: installing it would fetch hatchling (docs/dagster.md).
           "PYTHONPATH": str(root / "src"), "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0", "DAGSTER_HOME": str(home),
           "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"}
    # `create-dagster` only writes the project's files (a user runs it with uvx): the suite's own serves.
    create_dagster = str(Path(sys.executable).parent / "create-dagster")
    created = subprocess.run([create_dagster, "project", "--no-uv-sync", str(root)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stdout + created.stderr
    yield Outside(venv=installed, cwd=root, env=env)


def test_a_fresh_dg_project_loads_the_installed_component_and_snapshots(
    dg_project: Outside, mariadb: LocalMariaDB, database: str, tmp_path: Path
) -> None:
    listed = dg_project.run("dg", "list", "components", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    components = json.loads(listed.stdout)["items"]
    assert COMPONENT_TYPE in {item["key"] for item in components}

    table = f"{database}.parts"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, label VARCHAR(40))",
        f"INSERT INTO {table} SELECT seq, CONCAT('part ', seq) FROM {database}.seq_1_to_50")
    dg_project.ok("dg", "scaffold", "defs", COMPONENT_TYPE, "shop")
    defs = dg_project.cwd / "src" / "lakehouse" / "defs" / "shop" / "defs.yaml"
    attributes: dict[str, Any] = {
        "pipeline": "shop",
        "source": {"host": "127.0.0.1", "port": mariadb.port, "user": CDC_USER,
                   "password": "${BINLAKE_TEST_PASSWORD}", "server_id": 6977, "tables": [table]},
        "sink": {"path": str(tmp_path / "lake")},
        "spark": {"master": "local[2]"},
    }
    defs.write_text(yaml.safe_dump({"type": COMPONENT_TYPE, "attributes": attributes}))
    assert "All definitions loaded successfully" in dg_project.ok("dg", "check", "defs")

    launched = dg_project.ok("dg", "launch", "--assets", 'key:"binlake/shop/snapshot"', "--partition", table)
    assert "RUN_SUCCESS" in launched
    assert sorted(scan_rows(str(tmp_path / "lake" / database / "parts"))) == source_rows(mariadb, table)
