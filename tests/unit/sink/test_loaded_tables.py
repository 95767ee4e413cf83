"""Kept delta-rs tables (`cdc_lib.sink.loaded_tables.LoadedTables`) are loaded afresh from a checkpoint far enough past
their load: a kept table's state holds every commit read since it was loaded, and each write costs more with each."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from cdc_lib.sink.loaded_tables import KnownLog, LoadedTables


def rows(first: int) -> pa.Table:
    return pa.table({"id": pa.array([first, first + 1], pa.int64()), "total": [first * 1.25, 7.75]})


def test_a_kept_table_is_reloaded_once_a_checkpoint_is_far_past_its_load(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    write_deltalake(path, rows(0))
    tables = LoadedTables()
    tables.RELOAD_AFTER_COMMITS = 13
    checkpoint: int | None = None
    table = tables.take(path, None, KnownLog(latest_version=0, checkpoint_version=None))
    loads = [table]
    loaded_at = [0]
    for batch in range(1, 41):
        write_deltalake(table, rows(10 * batch), mode="append")
        if table.version() % 5 == 0:
            table.create_checkpoint()
            checkpoint = table.version()
        tables.keep(path, None, table)
        table = tables.take(path, None, KnownLog(latest_version=batch, checkpoint_version=checkpoint))
        assert table.version() == batch
        if table is not loads[-1]:
            loads.append(table)
            loaded_at.append(batch)
    # Loaded at 0, then afresh at the first checkpoint 13 or more past the load: 15, then 30 (not 20 or 25).
    assert loaded_at == [0, 15, 30]
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == sorted(
        table.to_pyarrow_table().column("id").to_pylist())
    assert table.to_pyarrow_table().num_rows == 82


def test_reuse_is_unchanged_below_the_threshold(tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    write_deltalake(path, rows(0))
    tables = LoadedTables()
    table = tables.take(path, None, KnownLog(latest_version=0, checkpoint_version=None))
    first = table
    for batch in range(1, 12):
        write_deltalake(table, rows(10 * batch), mode="append")
        if table.version() == 10:
            table.create_checkpoint()
        tables.keep(path, None, table)
        table = tables.take(path, None, KnownLog(latest_version=batch, checkpoint_version=10 if batch >= 10 else None))
        assert table is first, f"batch {batch}: a fresh load below RELOAD_AFTER_COMMITS ({tables.RELOAD_AFTER_COMMITS})"
