"""Fixtures for the Dagster layer: a small shop in its own database, its config file, and the definitions.

The MariaDB server, the per-test database and the config factory come from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from assets.naming import PipelineNames
from assets.resources import BinlakeResource
from cdc_lib.config import PipelineConfig, load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from orchestration.definitions import build_definitions
from tests.conftest import CDC_PASSWORD, sql, write_config_file

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
    server: LocalMariaDB
    database: str
    config: PipelineConfig
    config_path: Path

    @property
    def tables(self) -> list[str]:
        return [f"{self.database}.{table}" for table in SHOP_TABLES]

    @property
    def names(self) -> PipelineNames:
        return PipelineNames(self.config.pipeline)

    def sql(self, *statements: str) -> list[tuple]:
        return sql(self.server, *statements, database=self.database)

    def resource(self, **overrides: object) -> BinlakeResource:
        return BinlakeResource(config_path=str(self.config_path), reconcile_recheck_seconds=0, **overrides)

    def definitions(self) -> dg.Definitions:
        return build_definitions(self.config)


def freshness_checks_job(defs: dg.Definitions) -> dg.JobDefinition:
    """The freshness checks alone (in production their sensor launches them)."""
    global_job = defs.resolve_implicit_global_asset_job_def()
    checks = {key for key in global_job.asset_layer.asset_graph.asset_check_keys if key.name == "freshness_check"}
    return global_job.get_subset(asset_selection=set(), asset_check_selection=checks)


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


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance
