"""Shared fixtures: one private MariaDB, one moto S3 server and one SparkSession per test session.

Each test gets its own database name, lake folder and pipeline name, so tests never see each other's data.

Layout (tests mirror the package):
- tests/unit: no server, no Spark; `test_<module>.py` tests `cdc_lib/<module>.py` (a few span one topic:
  config, s3_config, deployment_config; the MySQL 8.4 protocol stub; the layer and packaging rules).
- tests/integration: `cdc_lib` against the real MariaDB, Spark + Delta and the S3 server, one concern per file.
- tests/dagster: the Dagster layers (`assets`, `orchestration`); `test_<module>.py` for pure logic, the rest
  run assets, sensors and the webserver for real.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

os.environ["TZ"] = "UTC"
time.tzset()

from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.config.model import PipelineConfig  # noqa: E402
from cdc_lib.config.parse import parse_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB, free_port  # noqa: E402

CDC_USER = "binlake_test"
CDC_PASSWORD = "s3cr3t-Pa55word-never-logged"


@pytest.fixture(scope="session", autouse=True)
def spark_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the Spark log files of the CLI runs and Dagster steps that the tests start go (`BINLAKE_LOG_DIR`),
    instead of the user's ~/.cache/binlake/logs; child processes inherit it."""
    folder = tmp_path_factory.mktemp("spark_logs")
    previous = os.environ.get("BINLAKE_LOG_DIR")
    os.environ["BINLAKE_LOG_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("BINLAKE_LOG_DIR", None)
    else:
        os.environ["BINLAKE_LOG_DIR"] = previous


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMariaDB]:
    server = LocalMariaDB(tmp_path_factory.mktemp("mariadb"), server_id=11).start()
    server.create_cdc_user(CDC_USER, CDC_PASSWORD)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3-compatible server (moto in server mode) on 127.0.0.1."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("moto S3 server did not start") from None
            time.sleep(0.2)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_REGION", "us-east-1")
    yield endpoint
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=10)
    log.close()


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    import boto3

    name = f"binlake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def database(mariadb: LocalMariaDB) -> Iterator[str]:
    """A fresh, uniquely named source database for one test."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    mariadb.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS {name}")


def sql(server: LocalMariaDB, *statements: str, database: str | None = None) -> list[tuple[Any, ...]]:
    connection = server.admin_connection(database)
    try:
        rows: list[tuple[Any, ...]] = []
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
                rows = list(cursor.fetchall())
        return rows
    finally:
        connection.close()


ConfigFactory = Callable[..., PipelineConfig]


@pytest.fixture
def make_config(mariadb: LocalMariaDB, tmp_path: Path) -> ConfigFactory:
    def factory(tables: list[str], **overrides: Any) -> PipelineConfig:
        document: dict[str, Any] = {
            "pipeline": overrides.pop("pipeline", f"p{uuid.uuid4().hex[:8]}"),
            "source": {
                "host": "127.0.0.1",
                "port": mariadb.port,
                "user": CDC_USER,
                "password": CDC_PASSWORD,
                "server_id": overrides.pop("server_id", 6000 + (uuid.uuid4().int % 1000)),
                "tables": tables,
            },
            "sink": {"path": str(tmp_path / "lake")},
            "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
            "spark": {"master": "local[2]"},
            "batch": {"max_events": 100_000, "max_seconds": 60},
        }
        for key, value in overrides.items():
            section, _, field = key.partition("__")
            if field:
                document.setdefault(section, {})[field] = value
            else:
                document[section] = value
        return parse_config(document)

    return factory


def write_config_file(config: PipelineConfig, path: Path) -> Path:
    """Write a config as YAML, with the password taken from the environment like a user would."""
    import yaml

    document = {
        "pipeline": config.pipeline,
        "source": {
            "host": config.source.host,
            "port": config.source.port,
            "user": config.source.user,
            "password": "${BINLAKE_TEST_PASSWORD}",
            "server_id": config.source.server_id,
            "tables": list(config.source.tables),
            "network_timeout_seconds": config.source.network_timeout_seconds,
        },
        "sink": _sink_document(config),
        "offsets": {"uri": config.offsets.uri, "lease_seconds": config.offsets.lease_seconds,
                    **({"endpoint_url": config.offsets.endpoint_url} if config.offsets.endpoint_url else {})},
        "spark": {"master": config.spark.master, "conf": dict(config.spark.conf)},
        "batch": {"max_events": config.batch.max_events, "max_seconds": int(config.batch.max_seconds),
                  "writer": config.batch.writer},
        "snapshot": {key: value for key, value in config.snapshot.__dict__.items() if value is not None},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def _sink_document(config: PipelineConfig) -> dict[str, Any]:
    """The sink section; S3 credentials, if any, come from the environment like a user would give them."""
    settings = config.sink.s3
    document: dict[str, Any] = {"path": config.sink.path}
    optional = {"endpoint_url": settings.endpoint_url, "region": settings.region,
                "path_style_access": settings.path_style_access}
    document.update({key: value for key, value in optional.items() if value is not None})
    if config.sink.metadata_columns:
        document["metadata_columns"] = True
    if settings.credentials is not None:
        document.update(access_key_id="${AWS_ACCESS_KEY_ID}", secret_access_key="${AWS_SECRET_ACCESS_KEY}")
    return document


def run_cli(config_path: Path, *arguments: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), *arguments],
        capture_output=True, text=True, env=environment, timeout=timeout,
    )


def delta_rows(config: PipelineConfig, table: str) -> list[tuple[Any, ...]]:
    from cdc_lib.pipeline.pipeline import Pipeline

    pipeline = Pipeline(config)
    frame = pipeline.spark().read.format("delta").load(pipeline.table_path(table))
    return sorted(tuple(row) for row in frame.collect())


def scan_rows(path: str, columns: list[str] | None = None) -> list[tuple[Any, ...]]:
    """The rows of the Delta table at `path` as an independent reader sees them: delta-rs's scan (DataFusion)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    names = ", ".join(f'"{name}"' for name in columns) if columns else "*"
    reader = QueryBuilder().register("t", DeltaTable(path)).execute(f"SELECT {names} FROM t")
    return [tuple(row.values()) for row in pa.table(reader.read_all()).to_pylist()]


def source_rows(server: LocalMariaDB, table: str) -> list[tuple[Any, ...]]:
    database, _, name = table.partition(".")
    return sorted(sql(server, f"SELECT * FROM `{database}`.`{name}`"))


SHOP_TABLES = ("customers", "orders", "order_lines")


def create_shop(server: LocalMariaDB, database: str) -> None:
    """Three small tables covering the usual types, a composite key and a float column."""
    sql(
        server,
        f"CREATE TABLE {database}.customers (id INT PRIMARY KEY, email VARCHAR(120) NOT NULL, name VARCHAR(80), "
        "created_at TIMESTAMP(3) NOT NULL DEFAULT '2026-01-01 00:00:00.000', avatar VARBINARY(16))",
        f"CREATE TABLE {database}.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, status ENUM('new','paid','shipped') NOT NULL, placed_at DATETIME(6) NOT NULL, "
        "weight FLOAT, note TEXT, shipped_on DATE)",
        f"CREATE TABLE {database}.order_lines (order_id BIGINT, line_no INT, sku VARCHAR(16) NOT NULL, "
        "qty INT NOT NULL, PRIMARY KEY (order_id, line_no))",
        f"INSERT INTO {database}.customers (id, email, name, avatar) SELECT seq, CONCAT('c', seq, '@example.com'), "
        f"IF(seq % 5 = 0, NULL, CONCAT('Zoë ', seq)), IF(seq % 3 = 0, UNHEX('00FF10'), NULL) FROM seq_1_to_20",
        f"INSERT INTO {database}.orders SELECT seq, 1 + seq % 20, ROUND(seq * 1.37, 2), 'new', "
        "TIMESTAMP('2026-01-01') + INTERVAL seq MINUTE + INTERVAL seq MICROSECOND, seq / 3, "
        "IF(seq % 4 = 0, 'fragile 😀', NULL), DATE('2026-02-01') + INTERVAL seq DAY FROM seq_1_to_60",
        f"INSERT INTO {database}.order_lines SELECT o.seq, l.seq, CONCAT('SKU-', o.seq * l.seq % 97), l.seq "
        "FROM seq_1_to_60 o JOIN seq_1_to_2 l",
        database=database,
    )


@dataclass(frozen=True)
class Shop:
    """The shop's database on the session's MariaDB, and a pipeline config for its three tables (in a file too)."""

    server: LocalMariaDB
    database: str
    config: PipelineConfig
    config_path: Path

    @property
    def tables(self) -> list[str]:
        return [f"{self.database}.{table}" for table in SHOP_TABLES]

    def sql(self, *statements: str) -> list[tuple]:
        return sql(self.server, *statements, database=self.database)


@pytest.fixture
def password_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config files name the password as ${BINLAKE_TEST_PASSWORD}, like a user's would."""
    monkeypatch.setenv("BINLAKE_TEST_PASSWORD", CDC_PASSWORD)


@pytest.fixture
def config_file(
    make_config: Callable[..., PipelineConfig], tmp_path: Path, password_env: None
) -> Callable[..., tuple[PipelineConfig, Path]]:
    """Write a config for some tables and load it back from the file, as the code location does."""

    def factory(tables: list[str], *, name: str = "binlake.yaml", **overrides: object) -> tuple[PipelineConfig, Path]:
        path = write_config_file(make_config(tables, **overrides), tmp_path / name)
        return load_config(path), path

    return factory


@pytest.fixture
def shop(mariadb: LocalMariaDB, database: str, config_file: Callable[..., tuple[PipelineConfig, Path]]) -> Shop:
    create_shop(mariadb, database)
    config, path = config_file([f"{database}.{table}" for table in SHOP_TABLES])
    return Shop(server=mariadb, database=database, config=config, config_path=path)


@pytest.fixture(autouse=True)
def _no_leaked_sockets() -> Iterator[None]:
    yield
    shutil.rmtree("spark-warehouse", ignore_errors=True)


__all__ = ["CDC_PASSWORD", "CDC_USER", "delta_rows", "pymysql", "run_cli", "source_rows", "sql", "write_config_file"]
