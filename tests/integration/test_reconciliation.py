"""Chunked reconciliation (cdc_lib.reconcile.reconcile) and binlog runway (cdc_lib.status.runway), real MariaDB,
Spark, Delta."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace

import pytest

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile_table
from cdc_lib.sink.spark.session import spark_session
from cdc_lib.status.runway import binlog_runway, file_created_at
from tests.conftest import Shop


@pytest.fixture
def loaded(shop: Shop) -> Pipeline:
    shop.sql(
        "CREATE TABLE codes (code VARCHAR(8) PRIMARY KEY, label TEXT, price DOUBLE, born YEAR, flags BIT(5))",
        "INSERT INTO codes SELECT CONCAT('K', seq), IF(seq % 2, CONCAT('label ', seq), NULL), seq * 0.1, "
        "2000 + seq, seq % 32 FROM seq_1_to_30",
    )
    # The shop config lists three tables; add the fourth to the same pipeline.
    config = shop.config
    tables = (*config.source.tables, f"{shop.database}.codes")
    pipeline = Pipeline(replace(config, source=replace(config.source, tables=tables)))
    pipeline.snapshot()
    return pipeline


def test_range_chunks_match_and_pinpoint_a_changed_row(shop: Shop, loaded: Pipeline) -> None:
    orders = f"{shop.database}.orders"
    report = reconcile_table(loaded, orders, chunk_rows=7)
    assert report.matches and report.mode == "key_range" and report.chunks == 9
    assert report.source_rows == report.delta_rows == 60 and report.columns == 8

    from delta.tables import DeltaTable

    DeltaTable.forPath(spark_session(loaded.config.spark), loaded.table_path(orders)).update(
        "id = 30", {"note": "'tampered'"}
    )
    report = reconcile_table(loaded, orders, chunk_rows=7)
    assert not report.matches and report.confirmed
    assert [mismatch.where for mismatch in report.mismatches] == ["27 <= id < 34"]
    assert report.mismatches[0].source_rows == report.mismatches[0].delta_rows == 7


def test_composite_keys_chunk_on_the_leading_column(shop: Shop, loaded: Pipeline) -> None:
    report = reconcile_table(loaded, f"{shop.database}.order_lines", chunk_rows=25)
    assert report.matches and report.mode == "key_range" and report.chunks == 5
    assert report.source_rows == 120


def test_string_keys_use_hash_buckets_and_floats_are_summed(shop: Shop, loaded: Pipeline) -> None:
    codes = f"{shop.database}.codes"
    report = reconcile_table(loaded, codes, chunk_rows=10)
    assert report.matches and report.mode == "key_hash" and report.chunks == 3

    from delta.tables import DeltaTable

    DeltaTable.forPath(spark_session(loaded.config.spark), loaded.table_path(codes)).update(
        "code = 'K7'", {"price": "price + 0.5"}
    )
    report = reconcile_table(loaded, codes, chunk_rows=10)
    assert not report.matches and len(report.mismatches) == 1
    assert report.mismatches[0].where.startswith("hash bucket")


def test_source_changes_not_yet_synced_are_not_confirmed_drift(shop: Shop, loaded: Pipeline) -> None:
    orders = f"{shop.database}.orders"
    shop.sql("UPDATE orders SET note = 'changed on the source' WHERE id = 3")
    report = reconcile_table(loaded, orders, chunk_rows=100)
    assert not report.matches and not report.confirmed
    assert "unapplied" in report.notes[0]
    loaded.sync()
    assert reconcile_table(loaded, orders, chunk_rows=100).matches


def test_binlog_runway_reads_the_servers_expiry_and_file_times(shop: Shop, loaded: Pipeline) -> None:
    runways = binlog_runway(loaded)
    assert set(runways) == set(loaded.read_state().tables)
    runway = runways[f"{shop.database}.orders"]
    assert not runway.purged and runway.rotated_at is None
    # The test server keeps binlogs forever (binlog_expire_logs_seconds = 0).
    assert runway.expiry.expire_seconds is None and runway.runway_seconds is None
    created = file_created_at(loaded, runway.needed_file)
    assert created is not None and created <= dt.datetime.now(dt.UTC)


def test_float_values_swapped_between_rows_do_not_cancel_out(shop: Shop, loaded: Pipeline) -> None:
    orders = f"{shop.database}.orders"
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark_session(loaded.config.spark), loaded.table_path(orders))
    # Same chunk, same sum, same count: only the key-weighted sum can tell.
    table.update("id = 2", {"weight": "CAST(1.0 AS FLOAT)"})
    table.update("id = 3", {"weight": "CAST(0.666667 AS FLOAT)"})
    report = reconcile_table(loaded, orders, chunk_rows=7)
    assert [mismatch.where for mismatch in report.mismatches] == ["id < 7"]


def test_cli_reconcile_names_the_keys_of_the_drifting_chunks(
    shop: Shop, loaded: Pipeline, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`binlake reconcile` runs the chunked check and then tells, per drifting chunk, which keys differ and how."""
    from delta.tables import DeltaTable

    from cdc_lib import cli

    monkeypatch.setattr(cli, "configure_logging", lambda *_, **__: None)  # keep pytest's log capture
    customers, orders = f"{shop.database}.customers", f"{shop.database}.orders"
    table = DeltaTable.forPath(spark_session(loaded.config.spark), loaded.table_path(orders))
    table.update("id = 30", {"note": "'tampered'"})  # differing
    table.delete("id = 41")  # missing in Delta
    # Gone from the source without a binlog event: the offset stays at the binlog end, so the drift is confirmed.
    shop.sql("SET SESSION sql_log_bin = 0", "DELETE FROM orders WHERE id = 7")  # extra in Delta
    arguments = ["--config", str(shop.config_path), "reconcile", "--table", customers, "--table", orders,
                 "--chunk-rows", "7"]

    assert cli.main(arguments) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"MATCH {customers}: source 20 rows, Delta 20 rows, missing 0, extra 0"
    assert lines[1] == f"DRIFT {orders}: source 59 rows, Delta 59 rows, missing 1, extra 1, differing 1"
    assert lines[2].startswith("  3 of 9 chunks differ: ")
    assert lines[3:] == ["  missing in Delta: 41", "  extra in Delta: 7", "  differing: 30"]

    assert cli.main([*arguments, "--json"]) == 1
    reports = json.loads(capsys.readouterr().out)
    assert [report["matches"] for report in reports] == [True, False] and reports[1]["confirmed"]
    drift = reports[1]["drift"]
    assert (drift["missing_keys"], drift["extra_keys"], drift["differing_keys"]) == ([["41"]], [["7"]], [["30"]])
    assert reports[0]["drift"] is None


def test_snapshot_partitions_and_reconciliation_chunks_cut_an_integer_key_alike(shop: Shop) -> None:
    """One splitter (cdc_lib.source.key_ranges): the same cut points, and the same idea of an integer key, for both."""
    from cdc_lib.config.model import SnapshotConfig
    from cdc_lib.model.tables import TableRef
    from cdc_lib.reconcile.chunks import plan_chunks
    from cdc_lib.snapshot.jdbc_read import partition_predicates
    from cdc_lib.source.server import describe_table, source_connection

    shop.sql(
        "CREATE TABLE sparse (id MEDIUMINT UNSIGNED PRIMARY KEY, v INT)",
        "INSERT INTO sparse SELECT seq * seq, seq FROM seq_1_to_40",
    )
    with source_connection(shop.config.source) as connection:
        schema = describe_table(connection, TableRef(shop.database, "sparse"))
        predicates, rows = partition_predicates(
            connection, schema, SnapshotConfig(rows_per_partition=10, max_partitions=4), default_parallelism=1
        )
        plan = plan_chunks(connection, schema.table, schema.columns[:1], rows=rows, chunk_rows=10, max_chunks=1024)
    assert rows == 40 and plan.mode == "key_range" and plan.chunks == len(predicates) == 4
    pairs = zip(plan.boundaries, predicates, strict=False)
    assert [f"`_binlake_key_0` < {cut}" in predicate for cut, predicate in pairs] == [True, True, True]


def test_bit_and_year_keys_are_not_cut_as_integer_ranges(shop: Shop) -> None:
    """BIT values come back from the server as bytes: a range cut on them would compare bytes with Spark's numbers."""
    shop.sql(
        "CREATE TABLE flags (id BIT(8) PRIMARY KEY, v INT)",
        "INSERT INTO flags SELECT seq, seq FROM seq_1_to_30",
        "CREATE TABLE years (y YEAR PRIMARY KEY, v INT)",
        "INSERT INTO years SELECT 1990 + seq, seq FROM seq_1_to_30",
    )
    config = shop.config
    tables = (f"{shop.database}.flags", f"{shop.database}.years")
    pipeline = Pipeline(replace(config, source=replace(config.source, tables=tables)))
    pipeline.snapshot()
    for table in tables:
        report = reconcile_table(pipeline, table, chunk_rows=7)
        assert report.matches and report.mode == "key_hash" and report.source_rows == 30, report
