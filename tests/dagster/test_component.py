"""binlake's component in a fresh `dg` project, driven by the `dg` CLI as a user would: scaffold, check, list,
launch. One project serves the module (each test empties its defs folder); the other checks run in-process.

The project is made by `create-dagster project --no-uv-sync` and put on PYTHONPATH (its `src`) instead of being
installed: installing it would build it with hatchling, fetched from PyPI, and these tests run offline. This
checkout goes first on PYTHONPATH so the project runs this binlake even where another checkout is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from assets.naming import PipelineNames
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from orchestration.component import PIPELINE_KEYS, BinlakeComponent, ResolvedPipeline
from tests.conftest import CDC_PASSWORD, CDC_USER, scan_rows, sql
from tests.dagster.conftest import Shop

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMPONENT_TYPE = "orchestration.component.BinlakeComponent"
CHECKS = {"consistency", "lag", "binlog_runway", "reconciliation", "freshness_check"}


@dataclass(frozen=True)
class DgProject:
    root: Path
    env: dict[str, str]

    @property
    def defs(self) -> Path:
        return self.root / "src" / self.root.name / "defs"

    def dg(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(BIN / "dg"), *arguments], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600
        )
        if check:
            assert result.returncode == 0, f"dg {' '.join(arguments)}:\n{result.stdout}\n{result.stderr}"
        return result

    def list_defs(self) -> dict[str, list[dict[str, Any]]]:
        listed: dict[str, list[dict[str, Any]]] = json.loads(self.dg("list", "defs", "--json").stdout)
        return listed

    def write_instance(self, name: str, attributes: dict[str, Any]) -> Path:
        folder = self.defs / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "defs.yaml").write_text(yaml.safe_dump({"type": COMPONENT_TYPE, "attributes": attributes}))
        return folder


@pytest.fixture(scope="module")
def project_template(tmp_path_factory: pytest.TempPathFactory) -> DgProject:
    base = tmp_path_factory.mktemp("dg")
    home = base / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    root = base / "lakehouse"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        # No PyPI look-up for a newer dg on each call; runs go to this folder's instance.
        "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0",
        "DAGSTER_HOME": str(home),
        "BINLAKE_TEST_PASSWORD": CDC_PASSWORD,
        "TZ": "UTC",
    }
    created = subprocess.run(
        [str(BIN / "create-dagster"), "project", "--no-uv-sync", str(root)],
        cwd=base, env=env, capture_output=True, text=True, timeout=120,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert (root / "src" / "lakehouse" / "definitions.py").is_file()
    return DgProject(root=root, env=env)


@pytest.fixture
def project(project_template: DgProject) -> Iterator[DgProject]:
    """The module's project with an empty defs folder (only its `__init__.py`)."""
    yield project_template
    for entry in project_template.defs.iterdir():
        if entry.is_dir() and entry.name != "__pycache__":
            shutil.rmtree(entry)


def inline_attributes(shop: Shop, *, pipeline: str, server_id: int, lake: str) -> dict[str, Any]:
    return {
        "pipeline": pipeline,
        "source": {
            "host": "127.0.0.1", "port": shop.server.port, "user": CDC_USER,
            "password": "${BINLAKE_TEST_PASSWORD}", "server_id": server_id, "tables": shop.tables,
        },
        "sink": {"path": lake},
        "spark": {"master": "local[2]"},
    }


def test_scaffold_check_list_and_materialize_in_a_fresh_dg_project(project: DgProject, shop: Shop) -> None:
    components = json.loads(project.dg("list", "components", "--json").stdout)["items"]
    assert COMPONENT_TYPE in {item["key"] for item in components}

    project.dg("scaffold", "defs", COMPONENT_TYPE, "shop_east")
    scaffolded = (project.defs / "shop_east" / "defs.yaml").read_text()
    assert scaffolded.startswith(f"type: {COMPONENT_TYPE}\n")
    assert 'password: "${SHOP_EAST_MYSQL_PASSWORD}"' in scaffolded and "# config_path: binlake.yaml" in scaffolded
    template = yaml.safe_load(scaffolded)["attributes"]
    assert set(template) == {"pipeline", "source", "sink"} and template["pipeline"] == "shop_east"

    # The scaffolded keys, filled in for the suite's MariaDB; the lake is relative to the instance's folder.
    pipeline = "east"
    attributes = {**inline_attributes(shop, pipeline=pipeline, server_id=6913, lake="lake"),
                  "sync_cron": "*/7 * * * *", "freshness_minutes": 12.25}
    project.write_instance("shop_east", attributes)
    assert "All definitions loaded successfully" in project.dg("check", "defs").stdout

    listed = project.list_defs()
    names = PipelineNames(pipeline)
    asset_keys = {asset["asset_key"] for asset in listed["assets"]}
    for table in shop.tables:
        assert names.table_key(table).to_user_string() in asset_keys
        assert names.source_key(table).to_user_string() in asset_keys
        checks = {check["name"] for check in listed["asset_checks"]
                  if check["asset_key"] == names.table_key(table).to_user_string()}
        assert checks == CHECKS
    assert names.snapshot_key.to_user_string() in asset_keys
    schedules = {schedule["name"]: schedule["cron_schedule"] for schedule in listed["schedules"]}
    # The follow schedule (off by default) ticks every minute and launches only when nothing of the pipeline runs.
    # Each table's maintenance runs hourly at :17 (BINLAKE_MAINTENANCE_CRON), in its own pool.
    assert schedules == {names.sync_schedule: "*/7 * * * *", names.reconcile_schedule: "0 3 * * *",
                         names.follow_schedule: "* * * * *",
                         **{names.maintenance_schedule(table): "17 * * * *" for table in shop.tables}}
    assert {sensor["name"] for sensor in listed["sensors"]} == {
        names.missing_snapshot_sensor, names.table_error_sensor, names.freshness_sensor
    }
    assert {job["name"] for job in listed["jobs"]} == {
        names.sync_job, names.snapshot_job, names.reconcile_job, names.follow_job, names.schema_decision_job,
        *(names.maintenance_job(table) for table in shop.tables),
    }
    assert [resource["name"] for resource in listed["resources"]] == [names.resource_key]

    customers = shop.tables[0]
    launched = project.dg(
        "launch", "--assets", f'key:"{names.snapshot_key.to_user_string()}"', "--partition", customers
    )
    assert "RUN_SUCCESS" in launched.stdout + launched.stderr
    database, _, table = customers.partition(".")
    lake_table = project.defs / "shop_east" / "lake" / database / table
    copied = sorted(scan_rows(str(lake_table), ["id", "email", "name"]))
    assert copied == sorted(sql(shop.server, f"SELECT id, email, name FROM {customers}"))
    assert len(copied) == 20 and copied[4][2] is None
    # Only the chosen partition was loaded.
    assert not (project.defs / "shop_east" / "lake" / database / "orders").exists()


def test_two_instances_one_from_a_pipeline_file_and_a_shared_lake_refused(project: DgProject, tmp_path: Path) -> None:
    tables = ["shop.orders", "inventory.stock"]
    source = {"host": "127.0.0.1", "port": 3306, "user": "binlake", "password": "${BINLAKE_TEST_PASSWORD}",
              "tables": tables}
    east_folder = project.write_instance("east", {"config_path": "east.yaml", "sync_cron": "*/3 * * * *"})
    (east_folder / "east.yaml").write_text(yaml.safe_dump(
        {"pipeline": "east", "source": {**source, "server_id": 6921}, "sink": {"path": str(tmp_path / "lake-east")}}
    ))
    west = {"pipeline": "west", "source": {**source, "server_id": 6922}, "sink": {"path": str(tmp_path / "lake-west")}}
    project.write_instance("west", west)

    listed = project.list_defs()
    east, west_names = PipelineNames("east"), PipelineNames("west")
    asset_keys = {asset["asset_key"] for asset in listed["assets"]}
    for names in (east, west_names):
        assert {names.table_key(table).to_user_string() for table in tables} <= asset_keys
    assert {resource["name"] for resource in listed["resources"]} == {east.resource_key, west_names.resource_key}
    schedules = {schedule["name"]: schedule["cron_schedule"] for schedule in listed["schedules"]}
    assert schedules[east.sync_schedule] == "*/3 * * * *" and schedules[west_names.sync_schedule] == "* * * * *"

    # Two instances writing one Delta table: refused as in a $BINLAKE_CONFIG deployment, before anything runs.
    project.write_instance("west", {**west, "sink": {"path": str(tmp_path / "lake-east")}})
    failed = project.dg("check", "defs", check=False)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert f"pipelines 'east' (shop.orders) and 'west' (shop.orders) both write the Delta table " \
        f"{tmp_path / 'lake-east' / 'shop' / 'orders'}" in output


def test_a_bad_key_fails_dg_check_defs_naming_the_key_and_the_remedy(project: DgProject, tmp_path: Path) -> None:
    project.write_instance("shop", {
        "pipeline": "shop",
        "source": {"host": "127.0.0.1", "port": 70000, "user": "binlake", "password": "${BINLAKE_TEST_PASSWORD}",
                   "server_id": 6931, "tables": ["shop.orders"]},
        "sink": {"path": str(tmp_path / "lake")},
    })
    failed = project.dg("check", "defs", check=False)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "config key 'source.port': must be between 1 and 65535, got 70000" in output
    assert "remedy: fix 'source.port'" in output and "defs.yaml" in output


SOURCE = {"host": "127.0.0.1", "user": "binlake", "password": "${BINLAKE_TEST_PASSWORD}", "server_id": 6941,
          "tables": ["shop.orders", "inventory.*"]}


def resolve(attributes: dict[str, Any], folder: Path) -> ResolvedPipeline:
    """The instance as if its defs.yaml sat in `folder` (`from_attributes_dict` would place it in the cwd)."""
    return BinlakeComponent(**attributes).resolve(folder)


@pytest.mark.parametrize(
    ("attributes", "key", "message"),
    [
        ({"pipeline": "p", "source": {**SOURCE, "password": "hunter2"}, "sink": {"path": "lake"}},
         "source.password", "is written out in defs.yaml"),
        ({"pipeline": "p", "source": {**SOURCE, "hots": "x"}, "sink": {"path": "lake"}},
         "source.hots", "unknown key"),
        ({"pipeline": "p", "source": {**SOURCE, "port": "${BINLAKE_NOT_SET_ANYWHERE}"}, "sink": {"path": "lake"}},
         "${BINLAKE_NOT_SET_ANYWHERE}", "environment variable is not set"),
        ({"pipeline": "p", "source": SOURCE, "sink": {"path": "lake"}, "config_path": "p.yaml"},
         "config_path", "together with inline pipeline keys (pipeline, source, sink)"),
        ({"sync_cron": "* * * * *"}, "pipeline", "names no pipeline"),
        ({"pipeline": "p", "source": SOURCE, "sink": {"path": "lake"}, "tables": ["shop.orders", "shop.lines"]},
         "tables[1]", "'shop.lines' is not a table of source.tables"),
        ({"pipeline": "p", "source": "not a mapping", "sink": {"path": "lake"}}, "source", "must be a mapping"),
    ],
)
def test_bad_attributes_name_their_key(
    attributes: dict[str, Any], key: str, message: str, tmp_path: Path, password_env: None
) -> None:
    with pytest.raises(ConfigError, match="remedy") as raised:
        resolve(attributes, tmp_path)
    assert raised.value.key == key and message in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_inline_keys_are_read_like_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_TEST_PASSWORD", "0123")
    resolved = resolve({
        "pipeline": "p", "source": {**SOURCE, "port": "${BINLAKE_TEST_PORT:-3317}"}, "sink": {"path": "lake"},
        "tables": ["inventory.stock"],
    }, tmp_path)
    # A password like '0123' stays that string (YAML would read it as a number), a port given as ${VAR} a number.
    assert resolved.config.source.password == "0123" and resolved.config.source.port == 3317
    assert resolved.config.sink.path == str(tmp_path / "lake")
    assert resolved.config.offsets.uri == str(tmp_path / "lake" / "_offsets")
    assert resolved.tables == ["inventory.stock"]
    assert resolved.inline is not None and resolved.inline.document["source"]["password"] == "${BINLAKE_TEST_PASSWORD}"


def test_an_unknown_attribute_is_refused_by_name() -> None:
    with pytest.raises(Exception, match=r"(?s)sourc\b.*Extra inputs are not permitted"):
        BinlakeComponent.from_attributes_dict(attributes={"sourc": {}})


def test_every_key_of_a_pipeline_file_is_an_attribute() -> None:
    # The parser lists the keys it knows when it meets one it does not.
    with pytest.raises(ConfigError) as raised:
        parse_config({"no_such_key": 1})
    known = str(raised.value).split("(known: ", 1)[1].split(")", 1)[0].split(", ")
    assert set(known) == set(PIPELINE_KEYS)
    assert set(PIPELINE_KEYS) <= set(BinlakeComponent.model().model_fields)
