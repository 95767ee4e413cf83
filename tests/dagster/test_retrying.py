"""A table retrying after a passing fault (disk full, S3 503, a commit conflict) is shown by the checks and the
table-error sensor as "retrying: cause, since, attempts", and never re-snapshotted."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import dagster as dg

from assets.checks import consistency_result, lag_result
from cdc_lib.common.failures import Retrying
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.status.table_status import TableStatus
from tests.dagster.conftest import Shop
from tests.dagster.daemon import tick

NOW = dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC)
DISK_FULL = Retrying.first_or_next("disk full: Unable to copy data to file: No space left on device (os error 28)",
                                   None, now=NOW)


def test_the_checks_show_a_retrying_table_as_a_warning() -> None:
    status = replace(TableStatus.not_snapshotted("db.t"), snapshotted=True, consistent=True, position="f.000001:4",
                     high_watermark="f.000001:4", lag_seconds=0.0, lag_bytes=0, retrying=DISK_FULL.to_json())
    key = dg.AssetKey(["mysql", "db", "t"])

    consistency = consistency_result(key, "db.t", status)
    lag = lag_result(key, status, threshold=600.0)

    assert not consistency.passed and consistency.severity == dg.AssetCheckSeverity.WARN
    assert consistency.description is not None and "retrying: disk full" in consistency.description
    assert f"since {NOW.isoformat()}, 1 attempt" in consistency.description
    assert "no re-snapshot" in consistency.description
    assert lag.description is not None and "retrying: disk full" in lag.description


def test_the_sensor_lists_a_retrying_table_and_never_resnapshots_it(shop: Shop, instance: dg.DagsterInstance) -> None:
    defs = shop.definitions()
    name = shop.names.table_error_sensor
    orders = shop.tables[1]
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    handle = pipeline.context.handle()
    state = handle.acquire()
    state.tables[orders] = replace(state.tables[orders], retrying=replace(DISK_FULL, attempts=3))
    handle.save()
    handle.release()

    result = tick(defs, name, instance, shop, auto_resnapshot=True)

    assert not result.run_requests, "a passing fault is never re-snapshotted"
    assert result.skip_message is not None and result.skip_message.startswith("no table has an error")
    assert f"{orders} retrying: disk full" in result.skip_message and "3 attempts" in result.skip_message
