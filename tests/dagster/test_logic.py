"""Pure logic of the Dagster layer and its engine helpers: no server, no Spark."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from assets.naming import PipelineNames, dagster_name
from assets.resources import engine_errors
from assets.tables import BatchSummary, column_schema, observation_metadata
from cdc_lib.errors import (
    BinlogPurgedError,
    ConcurrentRunError,
    ConfigError,
    OffsetStoreError,
    SchemaChangeError,
    ServerSettingsError,
    SourceConnectionError,
)
from cdc_lib.failures import classify
from cdc_lib.pipeline import SyncResult, TableBatchResult, TableStatus
from cdc_lib.reconciliation import FloatTally
from cdc_lib.runway import ExpirySettings, probe_server_id, runway_seconds
from orchestration.sensors import SnapshotCursor
from orchestration.settings import OrchestrationSettings


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (SourceConnectionError("cannot reach the MySQL server at h:3306", remedy="r"), "transient"),
        (SourceConnectionError("reading the binlog failed (MySQL error 2013: lost)", remedy="r"), "transient"),
        (SourceConnectionError("the server refused the credentials", remedy="r", retryable=False), "permanent"),
        (SourceConnectionError("the user may not read the binlog", remedy="r", retryable=False), "permanent"),
        (ConcurrentRunError("pipeline 'p' is held by runner pid 1", remedy="r"), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: 503)", remedy="r", retryable=True), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: AccessDenied)", remedy="r"), "permanent"),
        (OffsetStoreError("offset folder /x is not writable (Permission denied)", remedy="r"), "permanent"),
        (BinlogPurgedError("binlog gone", remedy="re-snapshot"), "permanent"),
        (SchemaChangeError("columns changed", remedy="re-snapshot"), "permanent"),
        (ServerSettingsError("binlog_format", "STATEMENT", "ROW"), "permanent"),
        (ConfigError("source.port", "bad"), "permanent"),
        (OSError("connection reset"), "transient"),
    ],
)
def test_failures_are_classified(error: BaseException, kind: str) -> None:
    assert classify(error) == kind


def test_engine_errors_fail_permanent_errors_without_retry_and_pass_transient_ones_on() -> None:
    with pytest.raises(dg.Failure) as failure, engine_errors("sync"):
        raise BinlogPurgedError("binlog mariadb-bin.000001 is gone", remedy="re-snapshot t", table="db.t")
    assert failure.value.allow_retries is False
    assert failure.value.metadata["remedy"].value == "re-snapshot t"
    assert failure.value.metadata["table"].value == "db.t"
    with pytest.raises(ConcurrentRunError), engine_errors("sync"):
        raise ConcurrentRunError("held", remedy="wait")


NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("variables", "rotated_at", "expected"),
    [
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.000000"}, None, None),
        ({"binlog_expire_logs_seconds": "86400"}, None, 86400.0),
        ({"binlog_expire_logs_seconds": "86400"}, NOW - dt.timedelta(hours=20), 4 * 3600.0),
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "2.000000"}, NOW - dt.timedelta(days=3), -86400.0),
        ({"expire_logs_days": "0.5"}, NOW, 43200.0),
    ],
)
def test_runway_counts_from_when_the_needed_file_was_closed(
    variables: dict[str, str], rotated_at: dt.datetime | None, expected: float | None
) -> None:
    expiry = ExpirySettings.from_variables(variables)
    assert runway_seconds(expiry=expiry, rotated_at=rotated_at, now=NOW) == expected


def test_expiry_notes_a_size_limit() -> None:
    assert ExpirySettings.from_variables({"max_binlog_total_size": "1073741824"}).size_limit_bytes == 2**30
    assert ExpirySettings.from_variables({"binlog_space_limit": "0"}).size_limit_bytes is None


def test_probe_server_id_differs_from_the_pipelines() -> None:
    for server_id in (1, 5701, 2**32 - 2):
        probe = probe_server_id(server_id)
        assert probe != server_id and 1 <= probe < 2**32


@pytest.mark.parametrize(
    ("mine", "theirs", "precision", "same"),
    [
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-7, 1.0, 10.0), 1e-6, True),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-5, 1.0, 10.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(3, 1.0, 1.0, 10.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0, 1.0, 11.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-7, 1.0, 10.0), 1e-12, False),
    ],
)
def test_float_tallies_compare_within_the_types_precision(
    mine: FloatTally, theirs: FloatTally, precision: float, same: bool
) -> None:
    assert mine.same_as(theirs, precision) is same


def test_names_are_valid_dagster_names_and_keys_carry_the_pipeline() -> None:
    names = PipelineNames("shop-eu.2")
    assert dagster_name("shop-eu.2") == "shop_eu_2" == names.slug
    assert names.table_key("my-db.orders$1").path == ["binlake", "shop-eu.2", "my-db", "orders$1"]
    assert names.source_key("my-db.orders$1").path == ["mysql", "shop-eu.2", "my-db", "orders$1"]
    assert names.group("my-db.orders") == "my_db"
    assert names.sync_job == "binlake_shop_eu_2_sync" and names.pool == "binlake_shop_eu_2"


def test_settings_defaults_and_errors() -> None:
    assert OrchestrationSettings.from_environ({}) == OrchestrationSettings()
    settings = OrchestrationSettings.from_environ({"BINLAKE_AUTO_RESNAPSHOT": "on", "BINLAKE_RUNWAY_WARN_HOURS": "6"})
    assert settings.auto_resnapshot and settings.runway_warn_hours == 6
    with pytest.raises(ConfigError, match="BINLAKE_AUTO_RESNAPSHOT"):
        OrchestrationSettings.from_environ({"BINLAKE_AUTO_RESNAPSHOT": "maybe"})
    with pytest.raises(ConfigError, match="BINLAKE_FRESHNESS_MINUTES"):
        OrchestrationSettings.from_environ({"BINLAKE_FRESHNESS_MINUTES": "soon"})


def test_snapshot_cursor_round_trips_and_survives_garbage() -> None:
    cursor = SnapshotCursor(pending={"db.t": "snapshot:db.t:2"}, epochs={"db.t": 2})
    assert SnapshotCursor.parse(cursor.dump()) == cursor
    assert SnapshotCursor.parse("not json") == SnapshotCursor()
    assert SnapshotCursor.parse(None) == SnapshotCursor()


def _batch(table: str, inserted: int, seq: int | None, version: int | None) -> SyncResult:
    return SyncResult(
        batch_seq=seq, start="a", end="b", events_read=10, row_changes=inserted, transactions=1, seconds=0.5,
        reached_end=True, spark_started=seq is not None,
        tables=[
            TableBatchResult(
                table=table, inserted=inserted, updated=0, deleted=0, rows_written=inserted, delta_version=version,
                position="mariadb-bin.000002:400",
            )
        ],
    )


def test_batch_summary_adds_up_several_micro_batches() -> None:
    summary = BatchSummary.of([_batch("db.t", 3, 7, 4), _batch("db.t", 2, 8, 5), _batch("db.u", 0, None, 1)])
    assert summary.events_read == 30 and summary.transactions == 3 and summary.batch_seq == 8
    assert summary.tables["db.t"].inserted == 5 and summary.tables["db.t"].delta_version == 5
    assert summary.changed("db.t") and not summary.changed("db.u") and not summary.changed("db.v")


def status(**fields: object) -> TableStatus:
    defaults: dict[str, object] = {
        "table": "db.t", "snapshotted": True, "consistent": True, "position": None, "high_watermark": "x",
        "delta_version": 3, "lag_bytes": 0, "lag_events": 0, "lag_seconds": 0.0, "error": None,
    }
    return TableStatus(**{**defaults, **fields})


def test_observations_mark_a_healthy_table_as_current() -> None:
    healthy = status(position="mariadb-bin.000002:400 (gtid 0-1-9)", lag_seconds=12.5)
    metadata = observation_metadata(healthy, now=1000.0)
    assert metadata["dagster/last_updated_timestamp"].value == 987.5
    assert metadata["binlog_offset"].value == 400 and metadata["binlog_file"].value == "mariadb-bin.000002"
    assert metadata["lag_events"].value == 0
    stopped = status(position="mariadb-bin.000002:400", lag_seconds=12.5, error="binlog purged")
    assert "dagster/last_updated_timestamp" not in observation_metadata(stopped, now=1000.0)


def test_column_schema_shows_delta_types_and_the_mysql_source() -> None:
    schema = column_schema(
        "db.t",
        {
            "columns": [
                {"name": "id", "data_type": "bigint", "column_type": "bigint(20) unsigned", "nullable": False},
                {"name": "at", "data_type": "datetime", "column_type": "datetime(6)", "nullable": True,
                 "datetime_precision": 6},
            ],
            "primary_key": ["id"],
        },
    )
    types = [(column.name, column.type) for column in schema.columns]
    assert types == [("id", "decimal(20,0)"), ("at", "timestamp_ntz")]
    assert schema.columns[0].constraints.unique and not schema.columns[0].constraints.nullable
    assert "bigint(20) unsigned" in schema.columns[0].description
