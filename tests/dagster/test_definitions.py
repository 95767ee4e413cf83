"""The code location loads: one Definitions per config, keys per pipeline, a bad config named at load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets.naming import PipelineNames
from cdc_lib.config.load import load_config
from cdc_lib.errors import ConfigError
from orchestration import definitions as code_location
from orchestration.definitions import build_definitions
from orchestration.settings import OrchestrationSettings
from tests.conftest import CDC_PASSWORD

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["shop.customers", "shop.orders", "inventory.stock"]


def write_yaml(path: Path, *, pipeline: str = "shop", port: str = "3306", tables: list[str] = TABLES) -> Path:
    path.write_text(
        f"pipeline: {pipeline}\n"
        "source:\n"
        f"  host: 127.0.0.1\n  port: {port}\n  user: binlake\n"
        '  password: "${BINLAKE_TEST_PASSWORD:-unused}"\n'
        "  server_id: 5701\n"
        f"  tables: [{', '.join(tables)}]\n"
        f"sink: {{path: {path.parent / 'lake'}}}\n"
    )
    return path


def test_definitions_load_every_table_asset_check_job_schedule_and_sensor(tmp_path: Path) -> None:
    config = load_config(write_yaml(tmp_path / "binlake.yaml"))
    defs = build_definitions(config)
    repository = defs.get_repository_def()
    names = PipelineNames("shop")
    graph = repository.asset_graph

    for table in TABLES:
        key, source = names.table_key(table), names.source_key(table)
        node = graph.get(key)
        assert node.is_materializable and not graph.get(source).is_materializable
        assert source in node.parent_keys and names.snapshot_key in node.parent_keys
        assert node.group_name == table.split(".")[0]
        assert {"mysql", "spark", "delta"} <= set(node.kinds)
        assert table in (node.description or "")
        checks = {check.name for check in graph.asset_check_keys if check.asset_key == key}
        assert checks == {"consistency", "lag", "binlog_runway", "reconciliation", "freshness_check"}

    snapshot = graph.get(names.snapshot_key)
    assert snapshot.partitions_def is not None
    assert snapshot.partitions_def.get_partition_keys() == TABLES
    # One binlog read serves every table: they all come from one subsettable step.
    sync = repository.assets_defs_by_key[names.table_key(TABLES[0])]
    assert sync.can_subset and set(sync.keys) == {names.table_key(table) for table in TABLES}
    # The micro-batch has the pipeline's pool; snapshots a pool of their own, so a backfill never holds it back.
    assert sync.op.pool == "binlake_shop"
    assert repository.assets_defs_by_key[names.snapshot_key].op.pool == "binlake_shop_snapshot"

    assert set(repository.job_names) >= {"binlake_shop_sync", "binlake_shop_snapshot", "binlake_shop_reconcile"}
    schedule = repository.get_schedule_def("binlake_shop_sync_schedule")
    assert schedule.cron_schedule == "* * * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    sensors = {sensor.name: sensor for sensor in repository.sensor_defs}
    assert {"binlake_shop_missing_snapshots", "binlake_shop_table_errors", "binlake_shop_freshness"} <= set(sensors)
    assert all(sensor.default_status == dg.DefaultSensorStatus.RUNNING for sensor in sensors.values())
    assert defs.resources is not None
    resource = defs.resources["binlake_shop"]
    assert resource.config_path == str(tmp_path / "binlake.yaml") and resource.auto_resnapshot is False


def test_sync_job_runs_the_cheap_checks_but_not_reconciliation(tmp_path: Path) -> None:
    defs = build_definitions(load_config(write_yaml(tmp_path / "binlake.yaml")))
    job = defs.resolve_job_def("binlake_shop_sync")
    checks = job.asset_layer.asset_graph.asset_check_keys
    assert {check.name for check in checks} == {"consistency", "lag", "binlog_runway"}
    assert len(checks) == 3 * len(TABLES)
    assert job.tags["binlake/pipeline"] == job.tags["binlake/lease"] == "shop"
    snapshot = defs.resolve_job_def("binlake_shop_snapshot")
    assert snapshot.tags == {"binlake/pipeline": "shop", "binlake/snapshot": "shop"}, "no pipeline lease tag"
    reconcile = defs.resolve_job_def("binlake_shop_reconcile")
    assert {check.name for check in reconcile.asset_layer.asset_graph.asset_check_keys} == {"reconciliation"}


def test_keys_do_not_collide_across_pipelines(tmp_path: Path) -> None:
    first = build_definitions(load_config(write_yaml(tmp_path / "a.yaml", pipeline="east")))
    second = build_definitions(load_config(write_yaml(tmp_path / "b.yaml", pipeline="west-2")))
    first_keys = set(first.resolve_all_asset_keys())
    second_keys = set(second.resolve_all_asset_keys())
    assert first_keys and second_keys and not first_keys & second_keys
    assert second.resolve_job_def("binlake_west_2_sync") is not None


def test_settings_come_from_the_environment_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_CONFIG", str(write_yaml(tmp_path / "binlake.yaml")))
    monkeypatch.setenv("BINLAKE_SYNC_CRON", "*/5 * * * *")
    monkeypatch.setenv("BINLAKE_AUTO_RESNAPSHOT", "yes")
    defs = code_location.defs()
    assert isinstance(defs, dg.Definitions)
    assert defs.get_repository_def().get_schedule_def("binlake_shop_sync_schedule").cron_schedule == "*/5 * * * *"
    assert defs.resources is not None and defs.resources["binlake_shop"].auto_resnapshot is True

    monkeypatch.setenv("BINLAKE_SYNC_CRON", "every minute")
    with pytest.raises(ConfigError, match="BINLAKE_SYNC_CRON"):
        code_location.defs()
    with pytest.raises(ConfigError, match="BINLAKE_LAG_WARN_SECONDS"):
        OrchestrationSettings.from_environ({"BINLAKE_LAG_WARN_SECONDS": "-3"})


def test_bad_config_fails_the_load_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_CONFIG", str(write_yaml(tmp_path / "binlake.yaml", port="not-a-port")))
    with pytest.raises(ConfigError, match=r"source\.port"):
        code_location.defs()
    monkeypatch.delenv("BINLAKE_CONFIG")
    with pytest.raises(ConfigError, match="BINLAKE_CONFIG"):
        code_location.defs()


def _validate(config_path: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "BINLAKE_CONFIG": str(config_path), "BINLAKE_TEST_PASSWORD": CDC_PASSWORD}
    environment.pop("DAGSTER_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT, capture_output=True, text=True, env=environment, timeout=180,
    )


def test_dagster_definitions_validate_passes_with_a_written_config(shop) -> None:  # noqa: ANN001
    result = _validate(shop.config_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful for code location binlake" in result.stdout + result.stderr


def test_dagster_definitions_validate_names_the_bad_key(tmp_path: Path) -> None:
    result = _validate(write_yaml(tmp_path / "binlake.yaml", tables=["shop.orders", "not a table"]))
    assert result.returncode != 0
    assert "source.tables[1]" in result.stdout + result.stderr


def test_patterns_are_expanded_on_the_server_at_load(shop, config_file, mariadb) -> None:  # noqa: ANN001
    shop.sql("CREATE TABLE extra (code VARCHAR(8) PRIMARY KEY, label TEXT)")
    config, _ = config_file([f"{shop.database}.orders", f"{shop.database}.*"], name="patterns.yaml")
    defs = build_definitions(config)
    names = PipelineNames(config.pipeline)
    keys = set(defs.resolve_all_asset_keys())
    for table in [*shop.tables, f"{shop.database}.extra"]:
        assert names.table_key(table) in keys
    snapshot = defs.get_repository_def().asset_graph.get(names.snapshot_key)
    assert snapshot.partitions_def is not None
    assert snapshot.partitions_def.get_partition_keys()[0] == f"{shop.database}.orders"


def test_a_pattern_needs_the_server_and_says_so(tmp_path: Path) -> None:
    from cdc_lib.dev.local_mariadb import free_port

    config = load_config(write_yaml(tmp_path / "binlake.yaml", port=str(free_port()), tables=["shop.orders", "shop.*"]))
    with pytest.raises(ConfigError, match=r"source\.tables\[1\].*shop\.\*"):
        build_definitions(config)


def test_each_table_has_a_maintenance_job_and_schedule_in_a_pool_apart_from_the_sync(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "binlake.yaml")
    path.write_text(path.read_text().replace(
        "sink: {path: ", "sink: {tables: {shop.orders: {maintenance: {enabled: false}}}, path: "))
    repository = build_definitions(load_config(path), settings=OrchestrationSettings(maintenance_cron="5 * * * *")
                                   ).get_repository_def()
    names = PipelineNames("shop")
    for table in TABLES:
        job = repository.get_job(names.maintenance_job(table))
        (node,) = job.graph.node_defs
        assert node.pools == {names.maintenance_pool} and names.maintenance_pool != names.pool
    schedules = {schedule.name: schedule for schedule in repository.schedule_defs}
    assert names.maintenance_schedule("shop.orders") not in schedules, "maintenance.enabled: false has no schedule"
    assert schedules[names.maintenance_schedule("shop.customers")].cron_schedule == "5 * * * *"
