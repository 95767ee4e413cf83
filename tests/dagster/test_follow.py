"""The follow job for real: one run applies the changes, records each batch's tables as it goes, observes every
table at the end and stops on its budget (changes written while a follow runs: tests/integration/test_follow.py).
Its schedule is off by default and takes turns with the micro-batch."""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from assets.naming import CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import scan_rows, source_rows
from tests.dagster.conftest import Shop


def follow_config(shop: Shop, *, budget: float) -> dict[str, Any]:
    return {"ops": {shop.names.follow_op: {"config": {"budget_seconds": budget, "poll_seconds": 0.25}}}}


def test_follow_job_applies_changes_and_records_them(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    customers, orders, order_lines = shop.tables
    shop.sql(
        "UPDATE order_lines SET qty = qty + 11 WHERE order_id <= 3",
        "INSERT INTO orders SELECT 300 + seq, 2, 12.25, 'paid', '2026-04-02 08:00:00', 1.5, 'follow', NULL "
        "FROM seq_1_to_4",
        "DELETE FROM orders WHERE id = 7",
    )
    result = defs.resolve_job_def(shop.names.follow_job).execute_in_process(
        instance=instance, run_config=follow_config(shop, budget=3.5)
    )

    assert result.success
    materialized: dict[dg.AssetKey, list[dict[str, Any]]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        materialized.setdefault(materialization.asset_key, []).append(
            {key: value.value for key, value in materialization.metadata.items()}
        )
    assert set(materialized) == {shop.names.table_key(orders), shop.names.table_key(order_lines)}
    first = materialized[shop.names.table_key(orders)][0]
    assert (first["rows_inserted"], first["rows_deleted"]) == (4, 1)
    assert first["lag_bytes"] == 0 and "dagster/column_schema" in first
    assert materialized[shop.names.table_key(order_lines)][0]["rows_updated"] == 6
    observed = {event.asset_observation_data.asset_observation.asset_key
                for event in result.get_asset_observation_events()}
    assert observed == {shop.names.table_key(table) for table in shop.tables}
    # The micro-batch step's cheap checks, evaluated by the follow run too, and on record for the UI.
    evaluations = {
        (event.asset_check_evaluation_data.asset_key, event.asset_check_evaluation_data.check_name):
            event.asset_check_evaluation_data
        for event in result.all_events if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }
    assert set(evaluations) == {
        (shop.names.table_key(table), check) for table in shop.tables
        for check in (CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK)
    }
    assert all(evaluation.passed for evaluation in evaluations.values())
    consistency = evaluations[(shop.names.table_key(orders), CONSISTENCY_CHECK)]
    assert consistency.severity == dg.AssetCheckSeverity.ERROR
    recorded = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(shop.names.table_key(orders), LAG_CHECK), limit=1
    )
    assert recorded and recorded[0].run_id == result.run_id
    for table in (orders, order_lines):
        assert len(scan_rows(pipeline.table_path(table))) == len(source_rows(shop.server, table))
    lines = sorted(scan_rows(pipeline.table_path(order_lines), ["order_id", "line_no", "qty"]))
    assert lines == sorted((row[0], row[1], row[3]) for row in source_rows(shop.server, order_lines))
    assert pipeline.read_state().lease is None
    assert customers  # untouched: observed, never materialized


def test_follow_schedule_is_off_by_default_and_takes_turns_with_the_micro_batch(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    defs = shop.definitions()
    repository = defs.get_repository_def()
    follow_schedule = repository.get_schedule_def(shop.names.follow_schedule)
    sync_schedule = repository.get_schedule_def(shop.names.sync_schedule)
    assert follow_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert follow_schedule.job_name == shop.names.follow_job
    when = dt.datetime(2026, 11, 2, 9, 17, tzinfo=dt.UTC)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=when)

    free = follow_schedule.evaluate_tick(context)
    assert free.run_requests is not None and len(free.run_requests) == 1
    assert free.run_requests[0].tags["binlake/lease"] == shop.config.pipeline

    following = instance.create_run_for_job(
        job_def=defs.resolve_job_def(shop.names.follow_job), status=dg.DagsterRunStatus.STARTED,
        tags=shop.names.lease_tags,
    )
    for schedule in (follow_schedule, sync_schedule):
        busy = schedule.evaluate_tick(context)
        assert not busy.run_requests and busy.skip_message is not None and following.run_id in busy.skip_message
