"""Reading binlake's commits from a Delta log without Spark: one JSON action per line, split on LF only."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_lib.sink.delta_log import read_log_tail, table_exists, written_rows


def test_line_separators_inside_column_statistics_do_not_split_actions(tmp_path: Path) -> None:
    # Spark writes min/max statistics of text columns raw: U+0085, U+2028 and U+2029 appear inside a JSON string.
    stats = json.dumps({"numRecords": 2, "minValues": {"note": "a\u0085b"}, "maxValues": {"note": "z\u2028\u2029"}},
                       ensure_ascii=False)
    actions = [
        {"commitInfo": {"operationMetrics": {"numOutputRows": "2"},
                        "userMetadata": json.dumps({"app_id": "binlake:p:db.t", "kind": "batch"})}},
        {"txn": {"appId": "binlake:p:db.t", "version": 7}},
        {"add": {"path": "part-0.parquet", "stats": stats}},
    ]
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(action, ensure_ascii=False) for action in actions) + "\n")

    tail = read_log_tail(str(tmp_path / "t"), application="binlake:p:db.t")

    assert tail is not None and tail.last_binlake_commit is not None
    assert tail.last_binlake_commit.txn_version == 7
    assert written_rows(str(tmp_path / "t"), 0) == 2


def test_a_log_folder_without_a_commit_is_no_table(tmp_path: Path) -> None:
    """A first snapshot killed before its commit leaves `_delta_log/` and orphaned Parquet files behind."""
    table = tmp_path / "t"
    assert not table_exists(str(table))
    (table / "_delta_log").mkdir(parents=True)
    (table / "part-00000-orphan.snappy.parquet").write_bytes(b"PAR1")
    (table / "_delta_log" / ".00000000000000000000.json.tmp").write_text("{}")
    assert not table_exists(str(table))
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    assert table_exists(str(table))
    (table / "_delta_log" / "00000000000000000000.json").unlink()
    (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").write_bytes(b"PAR1")
    assert table_exists(str(table))
