"""The Iceberg converter on Delta tables delta-rs writes in a temporary folder (no MariaDB, no Spark): idempotent,
ids kept across a schema change, old metadata expired, and what it cannot describe exactly refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.table import StaticTable

from cdc_lib.errors import IcebergMetadataError
from cdc_lib.sink.iceberg.convert import DELTA_VERSION, KEEP_VERSIONS, refresh


def _batch(first: int, count: int = 3, *, extra: bool = False) -> pa.Table:
    columns = {"id": pa.array(range(first, first + count), pa.int64()), "v": [f"r{n}" for n in range(count)]}
    if extra:
        columns["extra"] = pa.array([1.5] * count, pa.float64())
    return pa.table(columns)


def test_a_version_is_converted_once_and_read_back_with_ids_kept_across_a_new_column(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, _batch(0))
    assert refresh(path).written and not refresh(path).written, "the same Delta version is written once"
    write_deltalake(path, _batch(10, extra=True), mode="append", schema_mode="merge")
    assert refresh(path).delta_version == 1
    table = StaticTable.from_metadata(path)
    assert [(field.field_id, field.name) for field in table.schema().fields] == [(1, "id"), (2, "v"), (3, "extra")]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None and snapshot.summary[DELTA_VERSION] == "1"
    read = table.scan().to_arrow().sort_by("id")
    assert read.to_pylist() == DeltaTable(path).to_pyarrow_table().sort_by("id").to_pylist()
    assert "schema.name-mapping.default" in table.properties


def test_a_busy_table_keeps_a_bounded_number_of_metadata_files(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for round_number in range(KEEP_VERSIONS + 5):
        write_deltalake(path, _batch(round_number * 10), mode="append")
        refresh(path)
    metadata = tmp_path / "t" / "metadata"
    assert len(list(metadata.glob("*.metadata.json"))) == KEEP_VERSIONS
    assert len(list(metadata.glob("*.avro"))) == 2 * KEEP_VERSIONS
    assert (metadata / "version-hint.text").read_text() == str(KEEP_VERSIONS + 5)
    assert len(StaticTable.from_metadata(path).scan().to_arrow()) == 3 * (KEEP_VERSIONS + 5)


def test_a_partitioned_table_gets_identity_partitions_and_a_new_spec_when_the_columns_change(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, _batch(0), partition_by=["v"])
    refresh(path)
    table = StaticTable.from_metadata(path)
    assert [(field.source_id, field.field_id, field.name) for field in table.spec().fields] == [(2, 1000, "v")]
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == _batch(0).to_pylist()
    write_deltalake(path, _batch(5), partition_by=["id"], mode="overwrite", schema_mode="overwrite")
    refresh(path)
    table = StaticTable.from_metadata(path)
    assert table.spec().spec_id == 2 and [field.field_id for field in table.spec().fields] == [1001]
    assert [spec.spec_id for spec in table.specs().values()] == [0, 1, 2], "older specs are kept"
    assert sorted(row["id"] for row in table.scan().to_arrow().to_pylist()) == [5, 6, 7]


def test_a_timestamp_partition_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1], "at": pa.array([0], pa.timestamp("us"))}), partition_by=["at"])
    with pytest.raises(IcebergMetadataError, match="partitioned by at"):
        refresh(path, table="shop.t")
    assert not (tmp_path / "t" / "metadata").exists()


def test_no_delta_table_yet_writes_nothing(tmp_path: Path) -> None:
    assert not refresh(str(tmp_path / "none")).written


def test_a_converter_racing_another_never_removes_the_files_of_the_others_snapshot(tmp_path: Path) -> None:
    """Two converters from one base (a sync beside `binlake maintain`): B, which never saw A's snapshot, expires
    old files; A's hint then lands last. A's snapshot must still be readable, whole."""
    path = str(tmp_path / "t")
    metadata = tmp_path / "t" / "metadata"
    for round_number in range(KEEP_VERSIONS):
        write_deltalake(path, _batch(round_number * 10), mode="append")
        refresh(path)
    base_hint = (metadata / "version-hint.text").read_text()
    write_deltalake(path, _batch(1000), mode="append")
    converted_a = refresh(path)  # A: a new metadata file and its snapshot
    assert converted_a.written and converted_a.metadata_file is not None
    (metadata / "version-hint.text").write_text(base_hint)  # B reads the base A started from
    write_deltalake(path, _batch(2000), mode="append")
    assert refresh(path).written  # B: the next number, and the expiry of old files
    (metadata / "version-hint.text").write_text(converted_a.metadata_file.rsplit("/v", 1)[1].split(".")[0])
    rows = StaticTable.from_metadata(converted_a.metadata_file).scan().to_arrow()
    assert len(rows) == 3 * (KEEP_VERSIONS + 1)
