"""Delta logs a second engine writes: delta-rs's metric names and engine, and which tables it writes exactly.

The integration proof (real Spark and deltalake on each kind of table) is
tests/integration/test_engine_interplay.py; these pin the pure decisions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_lib.sink.choice import delta_rs_write_blocker
from cdc_lib.sink.delta_log import TableDetail, commit_engine, commit_metrics, written_rows

NTZ_TABLE = frozenset({"appendOnly", "invariants", "timestampNtz"})
COLUMNS = (("id", "integer"), ("at", "timestamp_ntz"), ("price", "decimal(12,2)"))


def settings(features: frozenset[str] = NTZ_TABLE, *, writer_version: int = 7,
             columns: tuple[tuple[str, str], ...] = COLUMNS, metadata_keys: frozenset[str] = frozenset(),
             **properties: str) -> TableDetail:
    return TableDetail(properties={key.replace("_", "."): value for key, value in properties.items()},
                       features=features, reader_version=3 if features else 1, writer_version=writer_version,
                       column_types=columns, column_metadata_keys=metadata_keys)


@pytest.mark.parametrize("features", [
    NTZ_TABLE, NTZ_TABLE | {"deletionVectors"}, NTZ_TABLE | {"changeDataFeed"},
    frozenset({"appendOnly", "invariants", "changeDataFeed", "deletionVectors"}),
])
def test_tables_binlake_snapshots_are_written_exactly(features: frozenset[str]) -> None:
    assert delta_rs_write_blocker(settings(features)) is None


def test_a_legacy_protocol_is_judged_by_what_its_writer_version_allows_and_the_table_uses() -> None:
    assert delta_rs_write_blocker(settings(frozenset(), writer_version=2)) is None
    assert delta_rs_write_blocker(settings(frozenset(), writer_version=4)) is None  # CDF; nothing generated
    constrained = settings(frozenset(), writer_version=3, delta_constraints_positive="id > 0")
    assert "checkConstraints" in (delta_rs_write_blocker(constrained) or "")
    assert delta_rs_write_blocker(settings(frozenset(), writer_version=6)) is None  # no column uses identity
    identity = settings(frozenset(), writer_version=6, metadata_keys=frozenset({"delta.identity.start"}))
    assert "identityColumns" in (delta_rs_write_blocker(identity) or "")
    generated = settings(frozenset(), writer_version=4, metadata_keys=frozenset({"delta.generationExpression"}))
    assert "generatedColumns" in (delta_rs_write_blocker(generated) or "")
    mapped = settings(frozenset(), writer_version=5, delta_columnMapping_mode="id")
    assert "columnMapping" in (delta_rs_write_blocker(mapped) or "")


def test_features_delta_rs_refuses_or_does_not_prove_are_reasons() -> None:
    protected = delta_rs_write_blocker(settings(NTZ_TABLE | {"checkpointProtection"}))
    assert protected is not None and "checkpointProtection" in protected and "DROP FEATURE" in protected
    for feature in ("v2Checkpoint", "rowTracking", "typeWidening", "domainMetadata", "identityColumns"):
        reason = delta_rs_write_blocker(settings(NTZ_TABLE | {feature}))
        assert reason is not None and feature in reason and "Spark" in reason
    assert delta_rs_write_blocker(settings(NTZ_TABLE | {"columnMapping"}, delta_columnMapping_mode="name")) is None
    assert "columnMapping" in (delta_rs_write_blocker(
        settings(NTZ_TABLE | {"columnMapping"}, delta_columnMapping_mode="id")) or "")


def test_decimals_whose_statistics_delta_rs_rounds_block_it_unless_left_out_of_statistics() -> None:
    columns = (("id", "decimal(20,0)"), ("exact", "decimal(15,3)"), ("long", "decimal(18,0)"),
               ("wide", "decimal(38,10)"), ("note", "string"))
    reason = delta_rs_write_blocker(settings(columns=columns))
    assert reason is not None and "id (decimal(20,0))" in reason and "wide (decimal(38,10))" in reason
    assert "exact (decimal" not in reason and "long (decimal" not in reason
    assert delta_rs_write_blocker(settings(columns=columns, delta_dataSkippingStatsColumns="exact, long,note")) is None
    # Only the first N columns have statistics: the wide one past them is harmless, the leading key is not.
    only_first = settings(columns=columns, delta_dataSkippingNumIndexedCols="3")
    assert "wide" not in (delta_rs_write_blocker(only_first) or "") and "id (" in (delta_rs_write_blocker(only_first)
                                                                                    or "")
    assert delta_rs_write_blocker(settings(columns=columns, delta_dataSkippingNumIndexedCols="0")) is None


def _commit(tmp_path: Path, commit_info: dict[str, object]) -> str:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text(json.dumps({"commitInfo": commit_info}) + "\n")
    return str(tmp_path / "t")


def test_delta_rs_metrics_read_under_spark_names(tmp_path: Path) -> None:
    path = _commit(tmp_path, {
        "operation": "MERGE", "engineInfo": "delta-rs:py-1.6.6",
        "operationMetrics": {"num_source_rows": 7, "num_target_rows_inserted": 3, "num_target_rows_updated": 2,
                             "num_target_rows_deleted": 1, "num_output_rows": 5, "execution_time_ms": 18},
    })
    metrics = commit_metrics(path, 0)
    assert (metrics["numSourceRows"], metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"],
            metrics["numTargetRowsDeleted"], metrics["numOutputRows"]) == (7, 3, 2, 1, 5)
    assert commit_engine(path, 0) == "delta-rs"


def test_a_delta_rs_append_counts_its_added_rows_as_written(tmp_path: Path) -> None:
    path = _commit(tmp_path, {"operation": "WRITE", "engineInfo": "delta-rs:py-1.6.6",
                              "operationMetrics": {"num_added_files": 1, "num_added_rows": 12}})
    assert written_rows(path, 0) == 12


def test_spark_commits_keep_their_names(tmp_path: Path) -> None:
    path = _commit(tmp_path, {"engineInfo": "Apache-Spark/4.0.1 Delta-Lake/4.0.0",
                              "operationMetrics": {"numOutputRows": "4", "numFiles": "1"}})
    assert commit_metrics(path, 0) == {"numOutputRows": 4, "numFiles": 1}
    assert commit_engine(path, 0) == "spark"
