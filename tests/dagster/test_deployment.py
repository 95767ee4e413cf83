"""One Dagster deployment, several pipelines: two MariaDB servers with the same db/table names, no collision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.naming import PipelineNames
from cdc_lib.config.load import load_configs
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ConfigError
from orchestration import definitions as code_location
from orchestration.definitions import build_deployment
from tests.conftest import CDC_PASSWORD, CDC_USER, delta_rows, source_rows, sql


@pytest.fixture
def second_mariadb(tmp_path: Path) -> Iterator[LocalMariaDB]:
    server = LocalMariaDB(tmp_path / "west-mariadb", server_id=12).start()
    server.create_cdc_user(CDC_USER, CDC_PASSWORD)
    yield server
    server.stop()


def write_pipeline(folder: Path, *, pipeline: str, server: LocalMariaDB, tables: list[str], lake: Path,
                   server_id: int = 6801) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pipeline}.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": pipeline,
        "source": {"host": "127.0.0.1", "port": server.port, "user": CDC_USER,
                   "password": "${BINLAKE_TEST_PASSWORD}", "server_id": server_id, "tables": tables},
        "sink": {"path": str(lake)},
        "spark": {"master": "local[2]"},
    }))
    return path


def create_items(server: LocalMariaDB, database: str, rows: int, label: str) -> None:
    sql(server, f"CREATE DATABASE IF NOT EXISTS {database}")
    sql(
        server,
        "CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(20) NOT NULL, qty INT NOT NULL)",
        f"INSERT INTO items SELECT seq, CONCAT('{label}-', seq), seq FROM seq_1_to_{rows}",
        database=database,
    )


def test_two_servers_in_one_deployment_stay_apart(
    mariadb: LocalMariaDB, second_mariadb: LocalMariaDB, database: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = f"{database}.items"
    create_items(mariadb, database, 30, "east")
    create_items(second_mariadb, database, 50, "west")
    folder = tmp_path / "pipelines"
    write_pipeline(folder, pipeline="east", server=mariadb, tables=[table], lake=tmp_path / "lake-east")
    write_pipeline(folder, pipeline="west", server=second_mariadb, tables=[table], lake=tmp_path / "lake-west")
    monkeypatch.setenv("BINLAKE_TEST_PASSWORD", CDC_PASSWORD)
    monkeypatch.setenv("BINLAKE_CONFIG", str(folder))
    monkeypatch.setenv("BINLAKE_SYNC_CRON_WEST", "*/5 * * * *")

    defs = code_location.defs()
    repository = defs.get_repository_def()
    east, west = PipelineNames("east"), PipelineNames("west")
    keys = set(defs.resolve_all_asset_keys())
    assert {east.table_key(table), west.table_key(table), east.snapshot_key, west.snapshot_key} <= keys
    job_names = {job.name for job in repository.get_all_jobs()}
    resources = defs.resources
    assert resources is not None
    for names in (east, west):
        assert {names.sync_job, names.snapshot_job, names.reconcile_job} <= job_names
        assert names.resource_key in resources
        assert repository.get_sensor_def(names.missing_snapshot_sensor).job_name == names.snapshot_job
    assert repository.get_schedule_def(west.sync_schedule).cron_schedule == "*/5 * * * *"
    assert repository.get_schedule_def(east.sync_schedule).cron_schedule == "* * * * *"
    assert resources[east.resource_key].config_path != resources[west.resource_key].config_path

    configs = {config.pipeline: config for config in load_configs(str(folder))}
    with dg.instance_for_test() as instance:
        for names in (east, west):
            snapshot = defs.resolve_job_def(names.snapshot_job).execute_in_process(
                instance=instance, partition_key=table
            )
            assert snapshot.success
        sql(mariadb, "UPDATE items SET qty = qty + 100 WHERE id <= 3", "DELETE FROM items WHERE id = 30",
            database=database)
        sql(second_mariadb, "INSERT INTO items VALUES (51, 'west-new', 7)", database=database)
        for names in (east, west):
            sync = defs.resolve_job_def(names.sync_job).execute_in_process(instance=instance)
            assert sync.success
            changed = {event.materialization.asset_key for event in sync.get_asset_materialization_events()}
            assert changed == {names.table_key(table)}
        runs = instance.get_run_records()
        assert {record.dagster_run.tags["binlake/pipeline"] for record in runs} == {"east", "west"}

    east_rows = delta_rows(configs["east"], table)
    west_rows = delta_rows(configs["west"], table)
    assert east_rows == source_rows(mariadb, table) and len(east_rows) == 29
    assert west_rows == source_rows(second_mariadb, table) and len(west_rows) == 51
    assert east_rows[0][2] == 101 and west_rows[-1][1] == "west-new"


def test_two_files_with_one_pipeline_name_fail_the_load(tmp_path: Path, mariadb: LocalMariaDB) -> None:
    first = write_pipeline(tmp_path / "a", pipeline="shop", server=mariadb, tables=["shop.orders"],
                           lake=tmp_path / "lake-a")
    second = write_pipeline(tmp_path / "b", pipeline="shop", server=mariadb, tables=["shop.orders"],
                            lake=tmp_path / "lake-b", server_id=6802)
    environ = {"BINLAKE_TEST_PASSWORD": CDC_PASSWORD}
    with pytest.raises(ConfigError, match=r"'shop' is named by both .*a/shop\.yaml and .*b/shop\.yaml"):
        load_configs(f"{first}:{second}", environ=environ)


@pytest.mark.parametrize(
    ("west", "message"),
    [
        ({"pipeline": "East"}, r"same Dagster names"),
        ({"lake": "lake-east"}, r"both write the Delta table .*lake-east/shop/orders"),
        ({"server_id": 6801}, r"both read 127\.0\.0\.1:\d+ as replica 6801"),
    ],
)
def test_pipelines_that_would_overwrite_each_other_are_refused(
    tmp_path: Path, mariadb: LocalMariaDB, west: dict[str, object], message: str
) -> None:
    write_pipeline(tmp_path / "p", pipeline="east", server=mariadb, tables=["shop.orders"], lake=tmp_path / "lake-east")
    write_pipeline(
        tmp_path / "p", pipeline=str(west.get("pipeline", "west")), server=mariadb, tables=["shop.orders"],
        lake=tmp_path / str(west.get("lake", "lake-west")), server_id=int(str(west.get("server_id", 6802))),
    )
    configs = load_configs(str(tmp_path / "p"), environ={"BINLAKE_TEST_PASSWORD": CDC_PASSWORD})
    with pytest.raises(ConfigError, match=message):
        build_deployment(configs)


def test_a_deployment_list_names_its_missing_part(tmp_path: Path) -> None:
    present = tmp_path / "present.yaml"
    present.write_text("pipeline: p\n")
    with pytest.raises(ConfigError, match=r"nowhere\.yaml does not exist"):
        load_configs(f"{present}:{tmp_path / 'nowhere.yaml'}")
    present.unlink()
    with pytest.raises(ConfigError, match=r"holds no \*\.yaml"):
        load_configs(str(tmp_path))
