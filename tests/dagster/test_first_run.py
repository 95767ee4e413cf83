"""`./run dagster`'s first run: tables the CLI loaded show as materialized, and no check fails on a healthy table.

The CLI path (`binlake demo` calls `Pipeline.snapshot()` then `Pipeline.sync(until_caught_up=True)`) loads the
shop; then a fresh Dagster instance sees it for the first time: the sensors' first ticks (which come before the
schedule's first tick), one micro-batch run (that tick), the freshness and reconciliation checks.
"""

from __future__ import annotations

import time
from typing import Any

import dagster as dg

from assets.checks import build_freshness_checks
from assets.discovery import DISCOVERED_KIND
from assets.naming import PipelineNames
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_log import read_log_tail
from orchestration.sensors import freshness_decision
from tests.dagster.conftest import Shop
from tests.dagster.test_assets import check_results, materializations, observations
from tests.dagster.test_sensors import tick


def load_with_the_cli_path(shop: Shop) -> Pipeline:
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    return pipeline


def delta_versions(shop: Shop, pipeline: Pipeline) -> dict[str, int]:
    versions = {}
    for table in shop.tables:
        tail = read_log_tail(pipeline.table_path(table), application=pipeline.application(table))
        assert tail is not None
        versions[table] = tail.latest_version
    return versions


def first_ticks(shop: Shop, defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, Any]:
    """The first evaluation of every sensor, as the daemon does when `dagster dev` starts."""
    names = shop.names
    return {
        name: tick(defs, name, instance, shop)
        for name in (names.missing_snapshot_sensor, names.table_error_sensor, names.freshness_sensor)
    }


def launch_freshness(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest) -> Any:
    """What the daemon does with the freshness sensor's run request: run exactly the checks it names."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection=set(request.asset_check_keys or [])
    )
    return job.execute_in_process(instance=instance, tags=request.tags)


def test_tables_loaded_by_the_cli_show_as_materialized_and_every_check_passes(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    pipeline = load_with_the_cli_path(shop)
    versions = delta_versions(shop, pipeline)
    defs = shop.definitions()
    names = shop.names

    # Before the schedule's first tick: nothing to snapshot, no error, and no freshness verdict yet.
    before = first_ticks(shop, defs, instance)
    assert not before[names.missing_snapshot_sensor].run_requests
    assert before[names.missing_snapshot_sensor].skip_message == "all 3 tables have a snapshot"
    assert before[names.table_error_sensor].skip_message == "no table has an error"
    assert not before[names.freshness_sensor].run_requests
    assert "waiting for the first micro-batch" in before[names.freshness_sensor].skip_message

    # The schedule's first tick: one micro-batch with no source change.
    result = defs.resolve_job_def(names.sync_job).execute_in_process(instance=instance)
    assert result.success
    recorded = materializations(result)
    assert set(recorded) == {names.table_key(table) for table in shop.tables} | {names.snapshot_key}
    assert not observations(result)
    for table in shop.tables:
        metadata = recorded[names.table_key(table)]
        assert metadata["kind"] == DISCOVERED_KIND
        assert metadata["delta_version"] == versions[table]
        assert metadata["lag_seconds"] == 0 and metadata["consistent"] is True
        assert metadata["dagster/uri"] == pipeline.table_path(table)
        assert "dagster/column_schema" in metadata and "dagster/last_updated_timestamp" in metadata
    assert recorded[names.table_key(shop.tables[1])]["rows_at_snapshot"] == 60
    assert instance.get_materialized_partitions(names.snapshot_key) == set(shop.tables)
    for table in shop.tables:
        latest = instance.get_latest_materialization_event(names.table_key(table))
        assert latest is not None and latest.asset_materialization is not None
    failing = {key: check.description for key, check in check_results(result).items() if not check.passed}
    assert len(check_results(result)) == 9 and not failing

    # The sensors' next ticks: still no snapshot asked for; the freshness checks are due and pass.
    after = first_ticks(shop, defs, instance)
    assert not after[names.missing_snapshot_sensor].run_requests
    [request] = after[names.freshness_sensor].run_requests
    assert len(request.asset_check_keys or []) == 3
    fresh = launch_freshness(defs, instance, request)
    assert fresh.success
    assert [evaluation.passed for evaluation in fresh.get_asset_check_evaluations()] == [True, True, True]
    assert not tick(defs, names.freshness_sensor, instance, shop).run_requests

    reconciled = defs.resolve_job_def(names.reconcile_job).execute_in_process(instance=instance)
    assert reconciled.success
    evaluations = reconciled.get_asset_check_evaluations()
    assert len(evaluations) == 3 and all(evaluation.passed for evaluation in evaluations)

    # The run after: nothing changed, so the tables are observed, not recorded again.
    second = defs.resolve_job_def(names.sync_job).execute_in_process(instance=instance)
    assert second.success and not materializations(second) and len(observations(second)) == 3


def test_a_stopped_table_is_not_recorded_as_materialized_and_its_checks_fail(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    pipeline = load_with_the_cli_path(shop)
    customers, orders, order_lines = shop.tables
    # A column drop stops `orders` with an error (the remedy is a re-snapshot); the other tables keep flowing.
    shop.sql(
        "ALTER TABLE orders DROP COLUMN note",
        "INSERT INTO orders (id, customer_id, amount, status, placed_at) VALUES (701, 3, 12.25, 'new', '2026-05-01')",
    )
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[orders].error
    defs = shop.definitions()
    names = shop.names

    result = defs.resolve_job_def(names.sync_job).execute_in_process(instance=instance)

    assert result.success
    recorded = materializations(result)
    assert names.table_key(orders) not in recorded
    assert {names.table_key(customers), names.table_key(order_lines)} <= set(recorded)
    assert instance.get_latest_materialization_event(names.table_key(orders)) is None
    assert instance.get_materialized_partitions(names.snapshot_key) == {customers, order_lines}
    checks = check_results(result)
    assert not checks[("orders", "consistency")].passed
    assert checks[("orders", "consistency")].severity == dg.AssetCheckSeverity.ERROR
    assert not checks[("orders", "lag")].passed
    assert not checks[("orders", "binlog_runway")].passed
    assert all(check.passed for (table, _), check in checks.items() if table != "orders")

    # The sensors: the error is reported; freshness judges the stopped table (observed, never brought up to
    # date on this instance) and fails it, while the healthy tables pass.
    errors = tick(defs, names.table_error_sensor, instance, shop)
    assert orders in errors.skip_message
    [request] = tick(defs, names.freshness_sensor, instance, shop).run_requests
    fresh = launch_freshness(defs, instance, request)
    verdicts = {evaluation.asset_key.path[-1]: evaluation.passed for evaluation in fresh.get_asset_check_evaluations()}
    assert verdicts == {"customers": True, "orders": False, "order_lines": True}
    # Failed with no newer data since, it is not evaluated again on every tick.
    freshness_key = dg.AssetCheckKey(names.table_key(orders), "freshness_check")
    summary = instance.event_log_storage.get_asset_check_summary_records([freshness_key])[freshness_key]
    decision = freshness_decision(instance, freshness_key, summary, now=time.time())
    assert (decision.due, decision.reason) == (False, "overdue, no update since it failed")


def test_the_freshness_sensor_waits_for_a_record_and_retries_a_failed_check_on_newer_data(
    instance: dg.DagsterInstance,
) -> None:
    key = dg.AssetKey(["binlake", "p", "db", "t"])
    checks = build_freshness_checks(names=PipelineNames("p"), tables=["db.t"], minutes=15)
    job = dg.Definitions(assets=[dg.AssetSpec(key)], asset_checks=checks).resolve_implicit_global_asset_job_def()
    check_key = dg.AssetCheckKey(key, "freshness_check")
    evaluate = job.get_subset(asset_selection=set(), asset_check_selection={check_key})

    def decide(now: float | None = None) -> tuple[bool, str]:
        summary = instance.event_log_storage.get_asset_check_summary_records([check_key])[check_key]
        decision = freshness_decision(instance, check_key, summary, now=time.time() if now is None else now)
        return decision.due, decision.reason

    def verdict() -> bool:
        [evaluation] = evaluate.execute_in_process(instance=instance).get_asset_check_evaluations()
        return evaluation.passed

    assert decide() == (False, "waiting for the first micro-batch to record the table")
    # A stopped table's observation (no last-update time): evaluated, and it fails.
    instance.report_runless_asset_event(dg.AssetObservation(asset_key=key, metadata={"error": "stopped"}))
    assert decide() == (True, "never evaluated")
    assert verdict() is False
    assert decide() == (False, "overdue, no update since it failed")
    # The table caught up: an observation with a new last-update time (no materialization) brings it back.
    updated = time.time() - 12.25
    stamp = {"dagster/last_updated_timestamp": dg.MetadataValue.timestamp(updated)}
    instance.report_runless_asset_event(dg.AssetObservation(asset_key=key, metadata=stamp))
    assert decide() == (True, "updated since it failed")
    assert verdict() is True
    assert decide() == (False, "fresh")
    assert decide(now=updated + 15 * 60 + 1) == (True, "may be overdue now")
