"""Catalog registration: each Delta table gets a name (`db.table`) that a fresh Spark process can query.

Two catalogs, two ways to run:

- Spark's session catalog (in-memory) in this test session's shared SparkSession: registration, schema
  changes seen by name, re-snapshots, refusals and `binlake register`, fast.
- A Hive metastore (embedded Derby in tmp) in subprocesses: a session's catalog implementation is fixed
  when its JVM starts, so the shared session cannot become a Hive one without changing every other test;
  the CLI writes in one process and a new process reads by name. Embedded Derby admits one JVM at a time,
  so the processes run one after another. Each costs a JVM start, so this test keeps to three (snapshot,
  sync past an ADD COLUMN, read); re-snapshots and refusals go through the same code and are tested on the
  session catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lib.config.load import load_config
from cdc_lib.config.model import PipelineConfig, SparkConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.catalog import register_tables
from cdc_lib.sink.spark.session import spark_session, spark_started
from tests.conftest import CDC_PASSWORD, ConfigFactory, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import cli_in_process, s3_sink

REPO = Path(__file__).resolve().parents[2]


def make_items(server: LocalMariaDB, db: str) -> str:
    sql(
        server,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, sku VARCHAR(20) NOT NULL, price DOUBLE)",
        f"INSERT INTO {db}.items VALUES (3, 'bolt', 12.25), (17, 'nut', 0.75), (40, 'washer', NULL)",
    )
    return f"{db}.items"


def catalog_config_file(config: PipelineConfig, catalog: dict[str, Any], path: Path) -> Path:
    """The config as a YAML file with a `catalog` section (tests.conftest writes none)."""
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["catalog"] = catalog
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def session_catalog(database: str) -> Iterator[str]:
    """The catalog database this test registers into, dropped from the shared session afterwards."""
    name = f"bronze_{database}"
    yield name
    if spark_started():
        # External tables: dropping the names leaves the Delta files alone.
        spark_session(SparkConfig()).sql(f"DROP NAMESPACE IF EXISTS spark_catalog.`{name}` CASCADE")


def by_name(pipeline: Pipeline, name: str, columns: str = "*") -> tuple[list[str], list[tuple[Any, ...]]]:
    frame = pipeline.spark().sql(f"SELECT {columns} FROM {name}")
    return frame.columns, sorted(tuple(row) for row in frame.collect())


# -- the session catalog, in this process -----------------------------------------------------------------


def test_registration_is_off_by_default(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    table = make_items(mariadb, database)
    config = make_config([table])
    pipeline = Pipeline(config)
    [result] = pipeline.snapshot()
    assert result.registered_as is None and result.catalog_error is None
    spark = pipeline.spark()
    assert not spark.catalog.databaseExists(database)
    assert not spark.catalog.tableExists(f"{database}.items")
    code, _, err = cli_in_process(write_config_file(config, tmp_path / "off.yaml"), "register",
                                  monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and "catalog registration is off" in err and "catalog.enabled: true" in err
    assert not spark.catalog.databaseExists(database)


def test_snapshot_registers_and_the_name_follows_schema_changes_and_re_snapshots(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, session_catalog: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = make_items(mariadb, database)
    config = make_config([table], catalog={"enabled": True, "database": "bronze_{database}"})
    pipeline = Pipeline(config)
    [result] = pipeline.snapshot()
    name = f"{session_catalog}.items"
    assert result.registered_as == f"spark_catalog.{name}" and result.catalog_error is None
    columns, rows = by_name(pipeline, name)
    assert columns == ["id", "sku", "price"]
    assert rows == source_rows(mariadb, table)

    sql(
        mariadb,
        f"ALTER TABLE {table} ADD COLUMN weight_kg DECIMAL(6,2) NOT NULL DEFAULT 2.50",
        f"INSERT INTO {table} VALUES (58, 'rivet', 3.5, 0.04)",
        f"UPDATE {table} SET weight_kg = 7.25 WHERE id = 17",
    )
    with caplog.at_level("WARNING", logger="binlake"):
        results = pipeline.sync(until_caught_up=True)
    assert not [entry.error for batch in results for entry in batch.tables if entry.error]
    assert not [record.message for record in caplog.records if "schema change applied, but" in record.message]
    columns, rows = by_name(pipeline, name)
    assert columns == ["id", "sku", "price", "weight_kg"]
    assert rows == source_rows(mariadb, table)

    sql(mariadb, f"DELETE FROM {table} WHERE id = 3")
    [again] = pipeline.snapshot()
    assert again.registered_as == f"spark_catalog.{name}" and again.catalog_error is None
    assert by_name(pipeline, name)[1] == source_rows(mariadb, table)
    location = pipeline.spark().sql(f"DESCRIBE TABLE EXTENDED {name}").where("col_name = 'Location'").first()
    assert location is not None and location[1] == f"file:{pipeline.table_path(table)}"


def test_a_name_registered_elsewhere_is_refused_and_the_snapshot_stands(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, session_catalog: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    table = make_items(mariadb, database)
    config = make_config([table], catalog={"enabled": True, "database": "bronze_{database}"})
    pipeline = Pipeline(config)
    spark = pipeline.spark()
    elsewhere = str(tmp_path / "someone-elses-items")
    spark.range(5).write.format("delta").save(elsewhere)
    spark.sql(f"CREATE NAMESPACE spark_catalog.{session_catalog}")
    spark.sql(f"CREATE TABLE spark_catalog.{session_catalog}.items USING DELTA LOCATION '{elsewhere}'")

    [result] = pipeline.snapshot()
    assert result.registered_as is None
    assert result.catalog_error is not None
    assert f"spark_catalog.{session_catalog}.items is already registered" in result.catalog_error
    assert elsewhere in result.catalog_error and "remedy: " in result.catalog_error
    # The data and the offsets are there all the same; the name still means what it meant.
    assert sorted(scan_rows(pipeline.table_path(table))) == source_rows(mariadb, table)
    assert pipeline.read_state().tables[table].delta_version == result.delta_version
    assert spark.table(f"{session_catalog}.items").count() == 5

    path = catalog_config_file(config, {"enabled": True, "database": "bronze_{database}"}, tmp_path / "b.yaml")
    code, out, _ = cli_in_process(path, "register", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1 and f"{table}: NOT REGISTERED" in out and "already registered" in out

    spark.sql(f"DROP TABLE spark_catalog.{session_catalog}.items")
    code, out, _ = cli_in_process(path, "register", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, out
    assert f"{table}: registered as spark_catalog.{session_catalog}.items" in out
    assert by_name(pipeline, f"{session_catalog}.items")[1] == source_rows(mariadb, table)
    assert sorted(scan_rows(elsewhere)) == [(number,) for number in range(5)], "the other table was not touched"


def test_an_s3a_table_is_registered_at_its_s3a_location(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, session_catalog: str, s3_endpoint: str,
    s3_bucket: str,
) -> None:
    table = make_items(mariadb, database)
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket), offsets={},
                         catalog={"enabled": True, "database": "bronze_{database}"})
    pipeline = Pipeline(config)
    [result] = pipeline.snapshot()
    assert result.registered_as == f"spark_catalog.{session_catalog}.items", result.catalog_error
    assert by_name(pipeline, f"{session_catalog}.items")[1] == source_rows(mariadb, table)
    location = pipeline.spark().sql(f"DESCRIBE TABLE EXTENDED {session_catalog}.items").where(
        "col_name = 'Location'").first()
    assert location is not None and location[1] == f"s3a://{s3_bucket}/lake/{database}/items"
    # Registering again finds its own entry (the location compares equal), not a name taken elsewhere.
    [again] = pipeline.snapshot()
    assert again.registered_as == result.registered_as and again.catalog_error is None


def test_a_session_without_the_configured_metastore_is_refused(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, tmp_path: Path
) -> None:
    table = make_items(mariadb, database)
    # The shared session exists (and is not a Hive one) before this pipeline asks for it.
    Pipeline(make_config([table])).spark()
    config = make_config([table], catalog={"enabled": True, "hive_metastore": {"derby_path": str(tmp_path / "m")}})
    [result] = Pipeline(config).snapshot()
    assert result.registered_as is None and result.catalog_error is not None
    assert "spark.sql.catalogImplementation" in result.catalog_error
    assert "a process of its own" in result.catalog_error
    assert not (tmp_path / "m").exists(), "nothing was registered in a metastore this session does not have"


# -- a Hive metastore (embedded Derby), across processes ------------------------------------------------------


READER = """
import json, sys
from cdc_lib.config.load import load_config
from cdc_lib.sink.spark.session import spark_session

config = load_config(sys.argv[1])
frame = spark_session(config.spark).sql(sys.argv[2])
rows = [list(row) for row in frame.collect()]
print("ROWS " + json.dumps({"columns": frame.columns, "rows": rows}, default=str))
"""


def in_new_process(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # cwd: Derby writes derby.log into the working directory.
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, env=environment, cwd=cwd,
                          timeout=600)


def binlake(config_path: Path, *arguments: str) -> str:
    """Run the CLI in a new process; its stdout and stderr (log lines, warnings included)."""
    done = in_new_process(["-m", "cdc_lib.cli", "--config", str(config_path), *arguments], config_path.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def read_by_name(config_path: Path, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run `query` in a new Python process with a new SparkSession built from the pipeline's config."""
    done = in_new_process(["-c", READER, str(config_path), query], config_path.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    result = json.loads(line.removeprefix("ROWS "))
    return result["columns"], sorted(tuple(row) for row in result["rows"])


def test_hive_metastore_names_reach_a_new_process(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, tmp_path: Path
) -> None:
    table = make_items(mariadb, database)
    catalog = {"enabled": True, "hive_metastore": {"derby_path": "metastore", "warehouse": "warehouse"}}
    path = catalog_config_file(make_config([table], spark__master="local[1]"), catalog, tmp_path / "binlake.yaml")
    config = load_config(path, environ={"BINLAKE_TEST_PASSWORD": CDC_PASSWORD})
    assert config.spark.conf["spark.sql.catalogImplementation"] == "hive"

    assert f"registered as spark_catalog.{database}.items" in binlake(path, "snapshot")
    assert (tmp_path / "metastore").is_dir()
    sql(
        mariadb,
        f"ALTER TABLE {table} ADD COLUMN weight_kg DECIMAL(6,2) NOT NULL DEFAULT 2.50",
        f"INSERT INTO {table} VALUES (58, 'rivet', 3.5, 0.04)",
        f"UPDATE {table} SET sku = 'hex nut', weight_kg = 7.25 WHERE id = 17",
    )
    synced = binlake(path, "sync", "--until-caught-up")
    assert "schema change applied, but" not in synced, synced
    columns, rows = read_by_name(path, f"SELECT id, sku, price, weight_kg FROM {database}.items")
    assert columns == ["id", "sku", "price", "weight_kg"]
    # The reader's JSON carries decimals as text.
    assert rows == [(*row[:3], str(row[3])) for row in source_rows(mariadb, table)]
    assert [row[3] for row in rows] == ["2.50", "7.25", "2.50", "0.04"]


def test_routed_shards_get_one_entry_named_after_their_target(
    mariadb: LocalMariaDB, database: str, make_config: ConfigFactory, session_catalog: str,
) -> None:
    """Sources routed into one Delta table (sink.routes) register it once, by the target's name; no entry is
    named after a shard, and `binlake register` reports the one entry for each source."""
    shards = [f"{database}.parts_{number}" for number in range(3)]
    for number, shard in enumerate(shards):
        sql(mariadb, f"CREATE TABLE {shard} (id INT PRIMARY KEY, sku VARCHAR(20) NOT NULL)",
            f"INSERT INTO {shard} VALUES (1, 'p{number}-a'), ({number + 2}, 'p{number}-b')")
    config = make_config(shards, catalog={"enabled": True, "database": "bronze_{database}"},
                         sink__routes=[{"source": rf"{database}\.parts_[0-9]+", "target": f"{database}.parts"}])
    pipeline = Pipeline(config)
    results = pipeline.snapshot()
    name = f"{session_catalog}.parts"
    assert {result.registered_as for result in results} == {f"spark_catalog.{name}"}
    assert all(result.catalog_error is None for result in results)
    spark = pipeline.spark()
    assert sorted(row.tableName for row in spark.sql(f"SHOW TABLES IN spark_catalog.{session_catalog}").collect()) \
        == ["parts"]
    columns, rows = by_name(pipeline, name)
    assert columns == ["id", "sku", "_binlake_source_db", "_binlake_source_table"]
    assert len(rows) == 6

    # `binlake register`: one entry, reported for each source.
    outcomes = register_tables(pipeline.context)
    assert [outcome.table for outcome in outcomes] == shards
    assert {outcome.registration.name for outcome in outcomes if outcome.registration} == {f"spark_catalog.{name}"}
    assert all(outcome.error is None for outcome in outcomes)
