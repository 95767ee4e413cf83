"""The files a delta-rs MERGE rewrites, batch after batch of the keep-up workload: the old layout against the new.

    PYTHONPATH=$PWD python -m bench.paths.merge_layout [--batches 60] [--transactions 300] [--base-rows 100000] \
        [--variants old,new] [--file-bytes 4194304]

One table per variant, `--base-rows` rows after its "snapshot"; then `--batches` batches, each the fold of
`--transactions` transactions of bench/keepup/keepup_load.py's mixed workload (per 100-row transaction: 50 new top
keys, 33 updates of base keys at a cursor striding over the base, 17 deletes of the oldest keys the workload
inserted) or, `--workload insert`, of its insert-only one (appended; the new layout merges the small files the
appends leave), applied to every variant in turn (same process, same batch) through binlake's delta-rs writer
(`delta_rs_writer.write_batch`, the batch planned as `cdc_lib.sink.merge.merge_changes` plans it).

Variants:
  old        the snapshot as one file (delta-rs's default 100 MiB target), the MERGE pruned by one
             `BETWEEN lowest AND highest` of the batch's keys the table may hold
  new        the snapshot sorted by key in files of `--file-bytes` (`delta.targetFileSize`), the MERGE pruned
             by a disjunction of the keys' ranges (`file_layout.key_ranges`)
  new-merge  the new layout, written by delta-rs's MERGE pruned by the keys' ranges (what the layout and the
             pruning buy without binlake's key rewrite)
  size-N     the new layout with files of N bytes (to pick the size)

Prints per batch (every `--every`th) and at the end, per variant: MERGE seconds, rows copied (rewritten
unchanged), files scanned / skipped / removed / added, and the table's file count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink import delta_log
from cdc_lib.sink.commits import OPERATION_COLUMN
from cdc_lib.sink.delta_rs import file_layout
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.sink.key_bounds import KeyBounds
from cdc_lib.sink.storage import storage_for

#: bench/keepup/keepup_load.py's table: (name, MySQL data type, column type).
COLUMNS = (("id", "bigint", "bigint(20)"), ("customer_id", "int", "int(11)"), ("amount", "decimal", "decimal(12,2)"),
           ("status", "varchar", "varchar(16)"), ("note", "varchar", "varchar(200)"),
           ("created", "datetime", "datetime(6)"), ("updated", "timestamp", "timestamp(6)"))
CREATED = datetime(2026, 11, 24, 9, 30, 15, 250_000)
UPDATED = datetime(2026, 11, 24, 9, 45, 0, 125_000, tzinfo=UTC)


def bench_schema() -> TableSchema:
    columns = tuple(
        ColumnInfo(name, kind, column_type, nullable=name not in ("id", "customer_id", "amount", "status"),
                   numeric_precision=12 if kind == "decimal" else None,
                   numeric_scale=2 if kind == "decimal" else None,
                   datetime_precision=6 if kind in ("datetime", "timestamp") else None,
                   character_set="utf8mb4" if kind == "varchar" else None)
        for name, kind, column_type in COLUMNS
    )
    return TableSchema(table=TableRef("keepup", "mixed"), columns=columns, primary_key=("id",))


def row(key: int, status: str, note: str, amount: Decimal) -> tuple[Any, ...]:
    return (key, key % 5000, amount, status, note, CREATED, UPDATED)


def base_rows(schema: TableSchema, count: int) -> pa.Table:
    """keepup_load's base rows (keys 1..count), typed as binlake stages them."""
    rows = [row(key, "new", chr(97 + key % 26) * (20 + key % 150), Decimal(key % 100_000) / 100)
            for key in range(1, count + 1)]
    return delta_rs_writer.arrow_fold(schema, rows, []).drop_columns([OPERATION_COLUMN])


@dataclass
class Variant:
    name: str
    path: str
    file_bytes: int | None  # None: delta-rs's default (one file for this table)
    key_ranges: int
    rewrite: bool = True  # binlake's key rewrite (False: delta-rs's MERGE)
    seconds: list[float] = field(default_factory=list)
    metrics: list[dict[str, int]] = field(default_factory=list)
    files: list[int] = field(default_factory=list)


def make_variant(name: str, work: Path, default_bytes: int) -> Variant:
    if name == "old":
        return Variant(name, str(work / name), None, 1, rewrite=False)
    if name == "new":
        return Variant(name, str(work / name), default_bytes, file_layout.MAX_KEY_RANGES)
    if name == "new-merge":
        return Variant(name, str(work / name), default_bytes, file_layout.MAX_KEY_RANGES, rewrite=False)
    if name.startswith("size-"):
        return Variant(name, str(work / name), int(name.removeprefix("size-")), file_layout.MAX_KEY_RANGES)
    raise SystemExit(f"unknown variant {name}")


def snapshot(variant: Variant, rows: pa.Table) -> None:
    """The table as binlake's delta-rs snapshot writes it: the old one file, or sorted in bounded files."""
    if variant.file_bytes is None:
        write_deltalake(variant.path, rows, configuration={"delta.enableDeletionVectors": "false"})
        return
    write_deltalake(
        variant.path, rows.sort_by([("id", "ascending")]), target_file_size=variant.file_bytes,
        configuration={"delta.enableDeletionVectors": "false",
                       file_layout.TARGET_FILE_SIZE_PROPERTY: str(variant.file_bytes)},
    )


class MixedWorkload:
    """bench/keepup/keepup_load.py's mixed transactions, folded in memory as the follower folds the binlog."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.next_id = base + 1
        self.oldest_own = base + 1
        self.cursor = 0

    def batch(self, transactions: int, number: int, *, inserts_only: bool = False) -> TableChanges:
        changes = TableChanges((0,))
        for _ in range(transactions):
            txn = TableChanges((0,))
            inserted = 100 if inserts_only else 50
            for key in range(self.next_id, self.next_id + inserted):
                txn.insert(row(key, "new", "fresh", Decimal("12.25")))
            self.next_id += inserted
            if inserts_only:
                changes.merge_from(txn)
                continue
            low = 1 + self.cursor % (self.base - 33)
            self.cursor += 33 * 7
            for key in range(low, low + 33):
                amount = (Decimal(key) / 7).quantize(Decimal("0.01"))
                txn.update(row(key, "", "", Decimal(0)), row(key, "paid", f"batch {number}", amount))
            if self.oldest_own + 17 <= self.next_id - 50:
                for key in range(self.oldest_own, self.oldest_own + 17):
                    txn.delete(row(key, "", "", Decimal(0)))
                self.oldest_own += 17
            changes.merge_from(txn)
        return changes


def batch_write(schema: TableSchema, changes: TableChanges) -> delta_rs_writer.BatchWrite:
    """The batch as `delta_sink._write_with_delta_rs` plans it for a table consistent at its offset."""
    _, rest = changes.split_new()
    bounds = KeyBounds(schema)
    bounds.add(rest.rows)
    return delta_rs_writer.BatchWrite(
        records=delta_rs_writer.arrow_fold(schema, changes.upserts(), changes.deleted_keys()),
        append=not rest.rows, key_range=bounds.range(), truncated=False,
    )


def apply(variant: Variant, schema: TableSchema, batch: delta_rs_writer.BatchWrite, number: int) -> None:
    storage = storage_for(variant.path)
    delta_rs_writer.KEY_RANGES_LIMIT = variant.key_ranges
    delta_rs_writer.KEY_REWRITE = variant.rewrite
    started = time.perf_counter()
    version = delta_rs_writer.write_batch(variant.path, schema, batch, application="bench:merge-layout",
                                          txn_version=number, metadata={"kind": "merge", "bench": True},
                                          storage=storage)
    variant.seconds.append(time.perf_counter() - started)
    variant.metrics.append(delta_log.commit_metrics(variant.path, version, storage=storage))
    table = delta_rs_writer.LOADED_TABLES.held(delta_rs_writer.table_uri(variant.path))
    variant.files.append(len(table.file_uris()) if table is not None else -1)


def summary(variant: Variant, window: int) -> dict[str, Any]:
    def mean(values: list[float]) -> float:
        return round(statistics.fmean(values), 3) if values else 0.0

    def metric(name: str, part: slice) -> float:
        return round(statistics.fmean(m.get(name, 0) for m in variant.metrics[part]), 1)

    first, last = slice(0, window), slice(-window, None)
    return {
        "variant": variant.name, "file_bytes": variant.file_bytes, "key_ranges": variant.key_ranges,
        "merge_s_first": mean(variant.seconds[first]), "merge_s_last": mean(variant.seconds[last]),
        "rows_copied_first": metric("numTargetRowsCopied", first),
        "rows_copied_last": metric("numTargetRowsCopied", last),
        "files_removed_last": metric("numTargetFilesRemoved", last),
        "files_added_last": metric("numTargetFilesAdded", last),
        "files_scanned_last": metric("numTargetFilesScanned", last),
        "files_skipped_last": metric("numTargetFilesSkippedDuringScan", last),
        "rows_compacted_last": metric("numCompactedRows", last),
        "table_files_end": variant.files[-1] if variant.files else 0,
        "merge_s_total": round(sum(variant.seconds), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--transactions", type=int, default=300, help="100-row transactions per batch")
    parser.add_argument("--base-rows", type=int, default=100_000)
    parser.add_argument("--variants", default="old,new")
    parser.add_argument("--workload", choices=("mixed", "insert"), default="mixed",
                        help="insert: keepup_load's insert-only transactions (100 new keys each), appended")
    parser.add_argument("--file-bytes", type=int, default=file_layout.TARGET_FILE_BYTES)
    parser.add_argument("--every", type=int, default=10, help="print every Nth batch")
    parser.add_argument("--window", type=int, default=10, help="batches averaged at the start and the end")
    arguments = parser.parse_args()
    schema = bench_schema()
    work = Path(tempfile.mkdtemp(prefix="binlake-merge-layout-"))
    try:
        run(arguments, schema, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the old layout's versions alone reach hundreds of MB


def run(arguments: argparse.Namespace, schema: TableSchema, work: Path) -> None:
    variants = [make_variant(name, work, arguments.file_bytes) for name in arguments.variants.split(",")]
    base = base_rows(schema, arguments.base_rows)
    for variant in variants:
        snapshot(variant, base)
    workload = MixedWorkload(arguments.base_rows)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for number in range(1, arguments.batches + 1):
        batch = batch_write(schema, workload.batch(arguments.transactions, number,
                                                   inserts_only=arguments.workload == "insert"))
        for variant in variants:
            apply(variant, schema, batch, number)
        if number % arguments.every == 0 or number == 1:
            cells = "  ".join(
                f"{v.name}: {v.seconds[-1]:.3f} s copied {v.metrics[-1].get('numTargetRowsCopied', 0):>8} "
                f"files -{v.metrics[-1].get('numTargetFilesRemoved', 0)}/+{v.metrics[-1].get('numTargetFilesAdded', 0)}"
                f" of {v.files[-1]}"
                + (f" compacted {v.metrics[-1]['numCompactedRows']}" if "numCompactedRows" in v.metrics[-1] else "")
                for v in variants
            )
            print(f"batch {number:>3}  {cells}", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    print(json.dumps([summary(variant, arguments.window) for variant in variants], indent=1))


if __name__ == "__main__":
    main()
