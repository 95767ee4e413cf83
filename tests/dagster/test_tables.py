"""`assets.tables` without a run: batch summaries, observation metadata and column schemas."""

from __future__ import annotations

from typing import Any

from assets.tables import BatchSummary, column_schema, observation_metadata
from cdc_lib.pipeline.pipeline import SyncResult, TableBatchResult, TableStatus


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


def status(**fields: Any) -> TableStatus:
    defaults: dict[str, Any] = {
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
    description = schema.columns[0].description
    assert description is not None and "bigint(20) unsigned" in description


def test_column_schema_lists_only_landed_columns_and_names_masks_and_exclusions() -> None:
    """With column rules the asset shows what Delta holds: excluded columns out (named apart), masks described."""
    from types import SimpleNamespace
    from typing import cast

    from assets.tables import columns_metadata
    from cdc_lib.config.parse import parse_config
    from cdc_lib.pipeline.pipeline import Pipeline

    document = _document()
    document["sink"]["tables"] = {"db.t": {
        "columns": {"exclude": ["notes", "gone"]},
        "mask": {"email": {"hash": {"key_env": "MASK_KEY_NEVER_READ"}}, "phone": {"redact": None},
                 "city": {"truncate": 3}},
    }}
    config = parse_config(document)
    schema_json = {
        "columns": [
            {"name": "id", "data_type": "int", "column_type": "int(11)", "nullable": False},
            {"name": "email", "data_type": "varchar", "column_type": "varchar(80)", "nullable": True},
            {"name": "age", "data_type": "int", "column_type": "int(11)", "nullable": True},
            {"name": "notes", "data_type": "text", "column_type": "text", "nullable": True},
            {"name": "phone", "data_type": "varchar", "column_type": "varchar(20)", "nullable": False},
            {"name": "city", "data_type": "varchar", "column_type": "varchar(40)", "nullable": True},
        ],
        "primary_key": ["id"],
    }
    # A stand-in with the one attribute the metadata reads: no Spark, no offsets store.
    pipeline = cast(Pipeline, SimpleNamespace(config=config))
    metadata = columns_metadata("db.t", schema_json, pipeline)
    columns = {column.name: column for column in metadata["dagster/column_schema"].columns}
    assert list(columns) == ["id", "email", "age", "phone", "city"]
    assert metadata["excluded_columns"].value == "notes"  # 'gone' is not a column of the table: nothing to show
    descriptions = {name: column.description or "" for name, column in columns.items()}
    assert "masked: hash" in descriptions["email"] and "MASK_KEY_NEVER_READ" in descriptions["email"]
    assert "masked: redact (NULL)" in descriptions["phone"] and columns["phone"].constraints.nullable
    assert "masked: truncate" in descriptions["city"]
    assert "masked" not in descriptions["age"] and "masked" not in descriptions["id"]
    assert columns["email"].type == "string"
    # Without rules: every column, and no exclusion entry.
    plain = cast(Pipeline, SimpleNamespace(config=parse_config(_document())))
    assert "excluded_columns" not in columns_metadata("db.t", schema_json, plain)
    # Columns `schema_policy: ignore_new_columns` keeps out are not listed as landed, and are named apart.
    ignoring = columns_metadata("db.t", schema_json, plain, ignored=("city", "notes"))
    assert [column.name for column in ignoring["dagster/column_schema"].columns] == ["id", "email", "age", "phone"]
    assert ignoring["ignored_columns"].value == "city, notes" and "excluded_columns" not in ignoring
    # A column both excluded by a rule and ignored is shown once, as excluded.
    both = columns_metadata("db.t", schema_json, pipeline, ignored=("notes",))
    assert both["excluded_columns"].value == "notes" and "ignored_columns" not in both


def _document() -> dict[str, Any]:
    return {"pipeline": "p", "source": {"host": "127.0.0.1", "user": "u", "password": "x", "server_id": 9,
                                        "tables": ["db.t"]},
            "sink": {"path": "/tmp/lake"}, "offsets": {"uri": "/tmp/offsets"}}
