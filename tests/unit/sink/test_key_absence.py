"""cdc_lib.sink.key_absence: a key is appended only when no live file's key statistics may hold it (issue 24, case
4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink.key_absence import KeySpans, file_spans, provable, spans_of, split_absent


def test_spans_merge_overlapping_files_and_leave_the_gaps() -> None:
    spans = spans_of([1, 50, 10, 200], [20, 60, 30, 200], [0, 0, 0, 0], [5, 5, 5, 1])
    assert spans == KeySpans((1, 50, 200), (30, 60, 200))
    assert [spans.absent((value,)) for value in (0, 1, 30, 31, 49, 55, 61, 199, 200, 201)] == [
        True, False, False, True, True, False, True, True, False, True]


def test_a_file_without_key_statistics_proves_nothing() -> None:
    assert spans_of([1, None], [9, None], [0, 0], [3, 4]) is None
    assert spans_of([1, 5], [9, None], [0, None], [3, None]) is None


def test_a_file_whose_keys_are_all_null_holds_no_key() -> None:
    # A table that case 3 of issue 24 left with NULL keys: no MySQL key equals NULL.
    assert spans_of([None, 3], [None, 4], [2, 0], [2, 2]) == KeySpans((3,), (4,))


def test_an_empty_table_holds_no_key() -> None:
    empty = spans_of([], [], [], [])
    assert empty == KeySpans((), ()) and empty.absent((5,)) and empty.top is None


def _batch() -> TableChanges:
    batch = TableChanges(key_positions=(0,))
    batch.insert((5, "back"))  # deleted off the binlog (sql_log_bin=0) and inserted again: may still be in Delta
    batch.insert((500, "new"))  # past every file's keys
    batch.insert((45, "in a gap"))  # between two files' ranges
    batch.update((7, "old"), (7, "kept"))
    batch.insert((8, "brief"))
    batch.delete((8, "brief"))  # born and gone, but 8 may be held by a file: the delete must reach the table
    batch.insert((600, "brief"))
    batch.delete((600, "brief"))  # born and gone past every file: absent before and after
    return batch


def test_only_keys_outside_every_file_are_appended() -> None:
    spans = KeySpans((1, 50), (40, 90))
    appended, rest = split_absent(_batch(), spans)
    assert sorted(appended) == [(45, "in a gap"), (500, "new")]
    assert rest.rows == {(5,): ("upsert", (5, "back")), (7,): ("upsert", (7, "kept")), (8,): ("delete", None)}


def test_without_a_proof_every_key_is_merged() -> None:
    appended, rest = split_absent(_batch(), None)
    assert appended == []
    assert set(rest.rows) == {(5,), (500,), (45,), (7,), (8,), (600,)}


def test_a_composite_key_is_judged_by_its_leading_column() -> None:
    batch = TableChanges(key_positions=(0, 1))
    batch.insert((3, "x", 1))
    batch.insert((11, "a", 2))
    appended, rest = split_absent(batch, KeySpans((1,), (10,)))
    assert appended == [(11, "a", 2)] and set(rest.rows) == {(3, "x")}


def _schema(data_type: str, column_type: str | None = None) -> TableSchema:
    columns = (ColumnInfo("k", data_type, column_type or data_type, False), ColumnInfo("v", "int", "int", True))
    return TableSchema(table=TableRef("d", "t"), columns=columns, primary_key=("k",))


@pytest.mark.parametrize(("data_type", "column_type", "expected"), [
    ("int", None, True), ("bigint", None, True), ("tinyint", None, True), ("mediumint", None, True),
    ("int", "int(10) unsigned", True),
    # Statistics rounded (delta-rs: decimals over 15 digits) or cut (Spark: strings, timestamps): no proof.
    ("bigint", "bigint(20) unsigned", False), ("varchar", "varchar(20)", False), ("datetime", None, False),
    ("decimal", "decimal(10,0)", False),
])
def test_only_keys_with_exact_statistics_are_provable(data_type: str, column_type: str | None, expected: bool) -> None:
    assert provable(_schema(data_type, column_type)) is expected


def test_file_spans_read_the_statistics_delta_rs_keeps(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    for keys in ([1, 5, 9], [None], [2**62, 2**63 - 1], [20, 30]):
        write_deltalake(path, pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([0] * len(keys))}),
                        mode="append")
    spans = file_spans(DeltaTable(path), "k")
    assert spans == KeySpans((1, 20, 2**62), (9, 30, 2**63 - 1))
    DeltaTable(path).delete("k = 30")  # the file is rewritten: its statistics shrink
    assert file_spans(DeltaTable(path), "k") == KeySpans((1, 20, 2**62), (9, 20, 2**63 - 1))
