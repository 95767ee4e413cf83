"""The change data feed of binlake tables, against the real MariaDB, Spark + delta-spark and delta-rs.

The feed after a snapshot must hold exactly the source's changes (compared with the rows the server
returns before and after), and every range it cannot serve exactly is refused with a remedy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.change_feed import (
    ChangeFeedDisabledError,
    ChangesExpiredError,
    TableRewrittenError,
    commit_versions,
    latest_version,
    read_changes,
)
from cdc_lib.sink.spark.writer import table_features
from tests.conftest import create_shop, sql

ROW = "id, amount"


def feed_rows(frame: Any) -> set[tuple[str, int, Decimal]]:
    return {(row["_change_type"], row["id"], row["amount"]) for row in frame.collect()}


def amounts(server: LocalMariaDB, database: str, ids: str) -> dict[int, Decimal]:
    return dict(sql(server, f"SELECT {ROW} FROM orders WHERE id IN ({ids})", database=database))


def properties(pipeline: Pipeline, table: str) -> dict[str, str]:
    detail = pipeline.spark().sql(f"DESCRIBE DETAIL delta.`{pipeline.table_path(table)}`").first()
    assert detail is not None
    return dict(detail["properties"])


def test_the_feed_after_the_snapshot_holds_exactly_the_source_changes(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    create_shop(mariadb, database)
    orders, customers = f"{database}.orders", f"{database}.customers"
    pipeline = Pipeline(make_config([orders, customers], sink__tables={orders: {"change_data_feed": True}}))
    snapshot = {result.table: result.delta_version for result in pipeline.snapshot()}
    assert properties(pipeline, orders).get("delta.enableChangeDataFeed") == "true"
    assert "changeDataFeed" in table_features(pipeline.spark(), pipeline.table_path(orders))
    # The setting is per table: the other one is written as before, without the property or the feature.
    assert "delta.enableChangeDataFeed" not in properties(pipeline, customers)
    assert "changeDataFeed" not in table_features(pipeline.spark(), pipeline.table_path(customers))

    before = amounts(mariadb, database, "7, 9, 11")
    sql(
        mariadb,
        "INSERT INTO orders VALUES (101, 3, 12.25, 'new', '2026-03-04 05:06:07.089', NULL, 'fresh', NULL)",
        "UPDATE orders SET amount = 77.75 WHERE id = 7",
        "DELETE FROM orders WHERE id = 9",
        "UPDATE orders SET id = 511 WHERE id = 11",  # a key change: the old key goes, the new one comes
        database=database,
    )
    after = amounts(mariadb, database, "7, 101, 511")
    pipeline.sync(until_caught_up=True)

    batch = read_changes(pipeline.spark(), pipeline.table_path(orders), after_version=snapshot[orders])
    assert batch.end_version == latest_version(pipeline.table_path(orders))
    assert batch.end_version > snapshot[orders]
    expected = {
        ("insert", 101, after[101]),
        ("update_preimage", 7, before[7]), ("update_postimage", 7, after[7]),
        ("delete", 9, before[9]),
        ("delete", 11, before[11]), ("insert", 511, after[511]),
    }
    assert feed_rows(batch.changes) == expected and batch.rows == len(expected) == 6
    assert after[7] == Decimal("77.75") and after[101] == Decimal("12.25")
    versions = {row["_commit_version"] for row in batch.changes.collect()}
    assert min(versions) > snapshot[orders]

    # delta-rs reads the same feed on its own (`load_cdf` takes the first version to include).
    import pyarrow as pa
    from deltalake import DeltaTable

    independent = pa.table(
        DeltaTable(pipeline.table_path(orders)).load_cdf(starting_version=snapshot[orders] + 1)
    ).to_pylist()
    assert {(row["_change_type"], row["id"], row["amount"]) for row in independent} == expected

    # An added column evolves the table; the feed reads across it (older rows show NULL in it).
    since = batch.end_version
    sql(mariadb, "ALTER TABLE orders ADD COLUMN coupon VARCHAR(8)",
        "UPDATE orders SET amount = 3.5, coupon = 'SPRING' WHERE id = 101", database=database)
    pipeline.sync(until_caught_up=True)
    later = read_changes(pipeline.spark(), pipeline.table_path(orders), after_version=since)
    assert {(row["_change_type"], row["id"], row["amount"], row["coupon"]) for row in later.changes.collect()} == {
        ("update_preimage", 101, Decimal("12.25"), None), ("update_postimage", 101, Decimal("3.50"), "SPRING"),
    }
    across = read_changes(pipeline.spark(), pipeline.table_path(orders), after_version=snapshot[orders])
    assert across.rows == 8 and "coupon" in across.changes.columns


def test_ranges_the_feed_cannot_serve_exactly_are_refused_with_a_remedy(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    create_shop(mariadb, database)
    orders, customers = f"{database}.orders", f"{database}.customers"
    pipeline = Pipeline(make_config([orders, customers], sink__tables={orders: {"change_data_feed": True}}))
    spark = pipeline.spark()
    first = {result.table: result.delta_version for result in pipeline.snapshot()}
    sql(mariadb, "UPDATE customers SET name = 'Ada' WHERE id = 2", "UPDATE orders SET amount = 8.125 WHERE id = 3",
        database=database)
    pipeline.sync(until_caught_up=True)

    # A table without the feed.
    with pytest.raises(ChangeFeedDisabledError) as disabled:
        read_changes(spark, pipeline.table_path(customers), after_version=first[customers], table=customers)
    assert "change_data_feed" in disabled.value.remedy and disabled.value.table == customers

    # A re-snapshot in the range. Delta itself would report it as every old row deleted and every new one
    # inserted (checked here, raw), which is exact but the table twice: binlake asks for a recompute.
    resnapshot = pipeline.snapshot([orders])[0].delta_version
    sql(mariadb, "DELETE FROM orders WHERE id = 4", database=database)
    pipeline.sync(until_caught_up=True)
    with pytest.raises(TableRewrittenError) as rewritten:
        read_changes(spark, pipeline.table_path(orders), after_version=first[orders])
    assert rewritten.value.rewrite_version == resnapshot and "full_refresh" in rewritten.value.remedy
    raw = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", resnapshot)
        .option("endingVersion", resnapshot).load(pipeline.table_path(orders))
    )
    kinds = [row["_change_type"] for row in raw.collect()]
    assert kinds.count("delete") == 60 and kinds.count("insert") == 60
    assert feed_rows(read_changes(spark, pipeline.table_path(orders), after_version=resnapshot).changes) == {
        ("delete", 4, Decimal("5.48"))
    }

    # Change files removed by VACUUM.
    path = pipeline.table_path(orders)
    sql(mariadb, "UPDATE orders SET amount = 1.75 WHERE id = 5", database=database)
    pipeline.sync(until_caught_up=True)
    vacuumed_after = latest_version(path)
    assert vacuumed_after is not None
    sql(mariadb, "UPDATE orders SET amount = 2.75 WHERE id = 5", database=database)
    pipeline.sync(until_caught_up=True)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    with pytest.raises(ChangesExpiredError) as vacuumed:
        read_changes(spark, path, after_version=vacuumed_after - 1)
    assert "VACUUM" in vacuumed.value.cause

    # Log entries removed by log cleanup (what Delta does after delta.logRetentionDuration, once a later
    # checkpoint covers them): the range starts before the oldest commit left.
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for amount in ("4.25", "6.25"):
        sql(mariadb, f"UPDATE orders SET amount = {amount} WHERE id = 6", database=database)
        pipeline.sync(until_caught_up=True)
    log = Path(path, "_delta_log")
    checkpoint = max(int(name.name[:20]) for name in log.glob("*.checkpoint.parquet"))
    keep = latest_version(path)
    for version in range(checkpoint):
        os.remove(log / f"{version:020d}.json")
    assert commit_versions(path)[0] == checkpoint
    with pytest.raises(ChangesExpiredError) as expired:
        read_changes(spark, path, after_version=resnapshot)
    assert f"{checkpoint}…{keep}" in expired.value.cause and "log retention" in expired.value.remedy
