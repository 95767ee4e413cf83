"""The assets and checks run for real: MariaDB → snapshot/binlog → Spark → Delta, driven by Dagster."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import dagster as dg
import pytest

from assets.tables import build_table_assets
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import delta_rows, source_rows
from tests.dagster.conftest import Shop, freshness_checks_job
from tests.dagster.run_events import check_results, materializations, observations


def snapshot_all(shop: Shop, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    tables = shop.tables
    result = defs.resolve_job_def(shop.names.snapshot_job).execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": tables[0], "dagster/asset_partition_range_end": tables[-1]},
    )
    assert result.success


def test_snapshot_partitions_load_exactly_the_chosen_tables(shop: Shop, instance: dg.DagsterInstance) -> None:
    assets = build_table_assets(config=shop.config, tables=shop.tables)
    customers, orders, order_lines = shop.tables

    result = dg.materialize(
        [assets.snapshot, *assets.source_specs],
        selection=[shop.names.snapshot_key],
        partition_key=customers,
        resources={shop.names.resource_key: shop.resource()},
        instance=instance,
    )
    assert result.success
    assert set(Pipeline(shop.config).read_state().tables) == {customers}
    loaded = materializations(result)
    table_metadata = loaded[shop.names.table_key(customers)]
    assert table_metadata["rows"] == 20 and table_metadata["dagster/row_count"] == 20
    schema = table_metadata["dagster/column_schema"]
    assert [column.name for column in schema.columns] == ["id", "email", "name", "created_at", "avatar"]
    assert schema.columns[0].type == "int" and "primary key" in schema.columns[0].constraints.other
    assert loaded[shop.names.snapshot_key]["rows"] == 20
    # The snapshot's progress, as the run log showed it, is in both materializations' metadata.
    for metadata in (table_metadata, loaded[shop.names.snapshot_key]):
        assert (metadata["chunks"], metadata["chunks_total"], metadata["chunks_resumed"]) == (1, 1, 0)
        assert metadata["rows_read"] == 20 and metadata["seconds"] > 0
        # `seconds` is rounded to the millisecond and the pace to 0.1: a fast snapshot's pace moves with the former.
        seconds = metadata["seconds"]
        assert 20 / (seconds + 0.0005) - 0.05 <= metadata["rows_per_second"] <= 20 / max(seconds - 0.0005, 1e-9) + 0.05
    logged = [event.message for event in instance.all_logs(result.run_id) if "chunks" in (event.message or "")]
    assert any(f"{customers}: chunks 0/1 (0%)" in line for line in logged), logged
    assert any(f"{customers}: chunks 1/1 (100%), 20 rows" in line and "done in" in line for line in logged), logged

    # A backfill over two partitions runs as one run (single-run backfill policy): one Spark session, one lease.
    defs = shop.definitions()
    result = defs.resolve_job_def(shop.names.snapshot_job).execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": orders, "dagster/asset_partition_range_end": order_lines},
    )
    assert result.success
    assert set(Pipeline(shop.config).read_state().tables) == {customers, orders, order_lines}
    loaded = materializations(result)
    assert loaded[shop.names.table_key(orders)]["rows"] == 60
    assert loaded[shop.names.table_key(order_lines)]["rows"] == 120
    assert shop.names.table_key(customers) not in loaded
    partitions = instance.get_materialized_partitions(shop.names.snapshot_key)
    assert partitions == set(shop.tables)
    assert delta_rows(shop.config, order_lines) == source_rows(shop.server, order_lines)


def test_scheduled_micro_batch_materializes_only_changed_tables(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    snapshot_all(shop, defs, instance)
    customers, orders, order_lines = shop.tables
    shop.sql(
        "INSERT INTO orders SELECT 100 + seq, 1, 5.5, 'new', '2026-03-01 10:00:00', 0.25, 'live', NULL FROM seq_1_to_3",
        "UPDATE orders SET status = 'paid' WHERE id <= 5",
        "DELETE FROM orders WHERE id = 60",
    )

    result = defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance)

    assert result.success
    changed = materializations(result)
    assert set(changed) == {shop.names.table_key(orders)}
    metadata = changed[shop.names.table_key(orders)]
    assert (metadata["rows_inserted"], metadata["rows_updated"], metadata["rows_deleted"]) == (3, 5, 1)
    assert metadata["rows_written"] == 9 and metadata["transactions"] >= 3
    assert metadata["events_read"] > 0 and metadata["batch_seconds"] >= 0
    assert isinstance(metadata["delta_version"], int) and metadata["delta_version"] >= 1
    assert metadata["lag_bytes"] == 0 and metadata["lag_seconds"] == 0
    assert metadata["binlog_offset"] > 0 and metadata["binlog_file"].startswith("mariadb-bin.")
    # batch.writer auto: delta-rs MERGEs a mirror table, so the micro-batch itself used no Spark.
    assert "dagster/column_schema" in metadata and metadata["spark_started"] is False
    observed = observations(result)
    assert set(observed) == {shop.names.table_key(customers), shop.names.table_key(order_lines)}
    for values in observed.values():
        assert values["lag_bytes"] == 0 and "dagster/last_updated_timestamp" in values
    # Every table's metrics, as an observation of its own, under the metric names (docs/production.md "Metrics").
    measured = observations(result, metrics=True)
    assert set(measured) == {shop.names.table_key(table) for table in shop.tables}
    orders_metrics = measured[shop.names.table_key(orders)]
    assert (orders_metrics["binlake_rows_applied_insert_total"], orders_metrics["binlake_rows_applied_update_total"],
            orders_metrics["binlake_rows_applied_delete_total"]) == (3, 5, 1)
    assert orders_metrics["binlake_table_state"] == "healthy" and orders_metrics["binlake_lag_bytes"] == 0
    assert orders_metrics["binlake_table_files"] >= 1 and orders_metrics["binlake_table_bytes"] > 0
    assert orders_metrics["binlake_delta_version"] == metadata["delta_version"]
    checks = check_results(result)
    assert len(checks) == 9
    failing = {name: evaluation.description for name, evaluation in checks.items() if not evaluation.passed}
    assert not failing
    # FLOAT comes back from pymysql as text rounded to 6 digits, so compare the keys and the exact columns.
    assert [row[:5] for row in delta_rows(shop.config, orders)] == [row[:5] for row in source_rows(shop.server, orders)]

    # Nothing changed since: no materialization, every table observed, Spark not needed.
    idle = defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance)
    assert idle.success and not materializations(idle) and len(observations(idle)) == 3

    # The observations keep idle tables fresh: every freshness check passes, not only the changed table's.
    fresh = freshness_checks_job(defs).execute_in_process(instance=instance)
    evaluations = fresh.get_asset_check_evaluations()
    assert len(evaluations) == 3 and all(evaluation.passed for evaluation in evaluations)


def test_reconciliation_check_passes_then_fails_after_tampering(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    snapshot_all(shop, defs, instance)
    assert defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance).success
    reconcile = defs.resolve_job_def(shop.names.reconcile_job)

    result = reconcile.execute_in_process(instance=instance)
    assert result.success
    checks = check_results(result)
    assert {name for _, name in checks} == {"reconciliation"} and len(checks) == 3
    assert all(evaluation.passed for evaluation in checks.values())
    assert checks[("orders", "reconciliation")].metadata["source_rows"].value == 60

    from delta.tables import DeltaTable

    orders = shop.tables[1]
    spark = spark_session(shop.config.spark)
    DeltaTable.forPath(spark, Pipeline(shop.config).table_path(orders)).delete("id = 7")

    result = reconcile.execute_in_process(instance=instance)
    checks = check_results(result)
    evaluation = checks[("orders", "reconciliation")]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["delta_rows"].value == 59 and evaluation.metadata["source_rows"].value == 60
    assert evaluation.metadata["mismatched_chunks"].value == 1
    # The same row-level detail as `binlake reconcile`: the one key Delta lost.
    drift = evaluation.metadata["drifting_rows"].value
    assert isinstance(drift, Mapping), drift
    assert (drift["missing"], drift["extra"], drift["differing"], drift["missing_keys"]) == (1, 0, 0, [["7"]])
    assert checks[("customers", "reconciliation")].passed and checks[("order_lines", "reconciliation")].passed


def test_bad_credentials_fail_at_once_without_retry(
    shop: Shop, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINLAKE_TEST_PASSWORD", "not-the-password")
    defs = shop.definitions()
    result = defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    event_types = [event.event_type_value for event in result.all_events]
    assert "STEP_UP_FOR_RETRY" not in event_types
    failure = next(event for event in result.all_events if event.event_type_value == "STEP_FAILURE")
    error = failure.step_failure_data.error
    user_failure = failure.step_failure_data.user_failure_data
    assert error is not None and user_failure is not None
    assert "refused the credentials" in error.message
    assert user_failure.metadata["remedy"].value
    assert "not-the-password" not in error.message


def test_a_held_lease_is_transient_and_retried(shop: Shop, instance: dg.DagsterInstance) -> None:
    """Another runner holds the pipeline: the micro-batch step fails, the retry policy waits, the retry succeeds.

    (A snapshot no longer waits for the pipeline lease: it takes its table's own, docs/snapshots.md.)
    """
    from cdc_lib.state.offset_store import StateHandle

    pipeline = Pipeline(shop.config)
    pipeline.snapshot([shop.tables[0]])
    shop.sql(f"UPDATE {shop.tables[0]} SET name = CONCAT(name, '+') LIMIT 1")
    other_runner = StateHandle(pipeline.store, shop.config.pipeline, lease_seconds=600)
    other_runner.acquire()
    release = threading.Timer(3.0, other_runner.release)
    release.start()
    try:
        result = shop.definitions().resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance)
    finally:
        release.join()
    assert result.success
    event_types = [event.event_type_value for event in result.all_events]
    assert event_types.count("STEP_UP_FOR_RETRY") == 1
    retried = next(event for event in result.all_events if event.event_type_value == "STEP_UP_FOR_RETRY")
    assert "ConcurrentRunError" in str(retried.step_retry_data.error)
    assert set(pipeline.read_state().tables) == {shop.tables[0]}
    assert delta_rows(shop.config, shop.tables[0]) == source_rows(shop.server, shop.tables[0])


def test_a_subset_still_reads_the_binlog_once_and_records_every_changed_table(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    defs = shop.definitions()
    snapshot_all(shop, defs, instance)
    customers, orders, _ = shop.tables
    shop.sql("UPDATE customers SET name = 'Renamed' WHERE id = 2", "DELETE FROM orders WHERE id = 1")
    assets = build_table_assets(config=shop.config, tables=shop.tables)

    result = dg.materialize(
        [assets.sync, *assets.source_specs],
        selection=[shop.names.table_key(customers)],
        resources={shop.names.resource_key: shop.resource()},
        instance=instance,
    )

    assert result.success
    changed = materializations(result)
    # Selected and changed: its own result; changed but not selected: recorded too, since its Delta table moved.
    assert changed[shop.names.table_key(customers)]["rows_updated"] == 1
    assert changed[shop.names.table_key(orders)]["rows_deleted"] == 1
    checks = check_results(result)
    assert {table for table, _ in checks} == {"customers"} and all(e.passed for e in checks.values())
