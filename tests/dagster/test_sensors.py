"""Sensors and schedules against a test instance: cursors and run keys keep a tick from launching twice."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from cdc_lib.pipeline.pipeline import Pipeline
from orchestration.sensors import SnapshotCursor
from tests.dagster.conftest import Shop
from tests.dagster.daemon import tick


def test_missing_snapshots_are_requested_once(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    name = shop.names.missing_snapshot_sensor
    customers, orders, order_lines = shop.tables

    first = tick(defs, name, instance, shop)
    assert [request.partition_key for request in first.run_requests] == shop.tables
    assert [request.run_key for request in first.run_requests] == [f"snapshot:{table}:1" for table in shop.tables]
    assert [request.tags["binlake/snapshot_table"] for request in first.run_requests] == [
        f"{shop.config.pipeline}:{table}" for table in shop.tables
    ]
    assert not any("binlake/lease" in request.tags for request in first.run_requests), "no pipeline lease"

    # The next tick, with the cursor the first one left, asks for nothing new.
    second = tick(defs, name, instance, shop, first.cursor)
    assert not second.run_requests
    assert "already requested" in second.skip_message and customers in second.skip_message

    Pipeline(shop.config).snapshot([customers])
    third = tick(defs, name, instance, shop, second.cursor)
    assert not third.run_requests
    cursor = SnapshotCursor.parse(third.cursor)
    assert set(cursor.pending) == {orders, order_lines} and customers not in third.skip_message

    # A table that had a snapshot and lost its offsets gets a new epoch, hence a new run key.
    cursor.pending.clear()
    fourth = tick(defs, name, instance, shop, cursor.dump())
    assert sorted(request.run_key for request in fourth.run_requests) == [
        f"snapshot:{order_lines}:2", f"snapshot:{orders}:2"
    ]


def test_a_stopped_table_is_reported_and_resnapshotted_when_allowed(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    defs = shop.definitions()
    name = shop.names.table_error_sensor
    orders = shop.tables[1]
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    assert tick(defs, name, instance, shop).skip_message == "no table has an error"

    shop.sql("ALTER TABLE orders DROP COLUMN note", "INSERT INTO orders (id, customer_id, amount, status, placed_at) "
             "VALUES (500, 1, 1.00, 'new', '2026-05-01')")
    pipeline.sync()
    error = pipeline.read_state().tables[orders].error
    assert error and "re-snapshot" in error

    reported = tick(defs, name, instance, shop)
    assert not reported.run_requests
    assert orders in reported.skip_message and "auto_resnapshot is off" in reported.skip_message
    assert shop.names.snapshot_job in reported.skip_message

    requested = tick(defs, name, instance, shop, auto_resnapshot=True)
    snapshot_at = pipeline.read_state().tables[orders].snapshot_at
    assert [(request.partition_key, request.run_key) for request in requested.run_requests] == [
        (orders, f"resnapshot:{orders}:{snapshot_at}")
    ]
    # Asked again, the sensor gives the same run key, which Dagster never launches twice.
    again = tick(defs, name, instance, shop, auto_resnapshot=True)
    assert [request.run_key for request in again.run_requests] == [requested.run_requests[0].run_key]

    # The requested run: the snapshot job on that partition clears the error.
    result = defs.resolve_job_def(shop.names.snapshot_job).execute_in_process(
        instance=instance, partition_key=orders, tags=requested.run_requests[0].tags
    )
    assert result.success
    assert pipeline.read_state().tables[orders].error is None
    assert tick(defs, name, instance, shop, auto_resnapshot=True).skip_message == "no table has an error"


def test_sync_schedule_skips_while_a_run_of_the_pipeline_is_in_flight(
    shop: Shop, instance: dg.DagsterInstance
) -> None:
    defs = shop.definitions()
    repository = defs.get_repository_def()
    schedule = repository.get_schedule_def(shop.names.sync_schedule)
    when = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=when)

    free = schedule.evaluate_tick(context)
    assert free.run_requests is not None and len(free.run_requests) == 1
    assert free.run_requests[0].tags["binlake/lease"] == shop.config.pipeline

    # A run that does not write (reconciliation, freshness checks) does not hold the micro-batch back.
    instance.create_run_for_job(
        job_def=defs.resolve_job_def(shop.names.reconcile_job), status=dg.DagsterRunStatus.STARTED,
        tags=shop.names.run_tags,
    )
    unblocked = schedule.evaluate_tick(context)
    assert unblocked.run_requests is not None and len(unblocked.run_requests) == 1

    # Nor does a snapshot: it takes its table's lease, and the micro-batch runs beside it.
    instance.create_run_for_job(
        job_def=defs.resolve_job_def(shop.names.snapshot_job), status=dg.DagsterRunStatus.STARTED,
        tags={**shop.names.snapshot_tags, "dagster/partition": shop.tables[0]},
    )
    beside = schedule.evaluate_tick(context)
    assert beside.run_requests is not None and len(beside.run_requests) == 1

    running = instance.create_run_for_job(
        job_def=defs.resolve_job_def(shop.names.sync_job), status=dg.DagsterRunStatus.STARTED,
        tags=shop.names.lease_tags,
    )
    busy = schedule.evaluate_tick(context)
    assert not busy.run_requests and busy.skip_message is not None and running.run_id in busy.skip_message


def test_a_table_being_snapshotted_is_not_requested_again(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    customers, orders, order_lines = shop.tables
    # A backfill over two partitions (one run, the range in Dagster's tags) is loading orders and order_lines.
    backfill = instance.create_run_for_job(
        job_def=defs.resolve_job_def(shop.names.snapshot_job), status=dg.DagsterRunStatus.STARTED,
        tags={**shop.names.snapshot_tags, "dagster/asset_partition_range_start": orders,
              "dagster/asset_partition_range_end": order_lines},
        asset_selection=frozenset({shop.names.snapshot_key}),
    )
    first = tick(defs, shop.names.missing_snapshot_sensor, instance, shop)
    assert [request.partition_key for request in first.run_requests] == [customers]
    waiting = tick(defs, shop.names.missing_snapshot_sensor, instance, shop, first.cursor)
    assert f"{orders}: being snapshotted by run {backfill.run_id[:8]}" in (waiting.skip_message or "")
    instance.report_run_canceled(backfill)
    second = tick(defs, shop.names.missing_snapshot_sensor, instance, shop, waiting.cursor)
    assert [request.partition_key for request in second.run_requests] == [orders, order_lines]


def test_snapshot_cursor_round_trips_and_survives_garbage() -> None:
    cursor = SnapshotCursor(pending={"db.t": "snapshot:db.t:2"}, epochs={"db.t": 2})
    assert SnapshotCursor.parse(cursor.dump()) == cursor
    assert SnapshotCursor.parse("not json") == SnapshotCursor()
    assert SnapshotCursor.parse(None) == SnapshotCursor()
