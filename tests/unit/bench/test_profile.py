"""The CPU profile's split by stage (bench/peers/profile.py): where each function's own time is counted."""

from __future__ import annotations

from typing import Any

import pytest

from bench.peers.profile import OTHER, by_stage, stage_of, thread_group


@pytest.mark.parametrize(
    ("where", "stage"),
    [
        ("/venv/site-packages/pymysqlreplication/packet.py:__init__", "decode: python-mysql-replication, pymysql"),
        ("/repo/cdc_lib/binlog/table_rows.py:fold_rows", "decode: binlake's reader (row decoder, batch, transactions)"),
        ("/repo/cdc_lib/changes/events.py:insert_rows", "fold (last change per key)"),
        ("/repo/cdc_lib/sink/delta_rs/writer.py:arrow_fold", "Arrow staging"),
        ("/repo/cdc_lib/sink/delta_rs/writer.py:_merge", "delta-rs write (Parquet encoding, MERGE, commit: Rust)"),
        ("/repo/cdc_lib/sink/key_absence.py:split_absent", "commit checks, Delta log reads, offsets"),
        ("/usr/lib/python3.11/json/decoder.py:decode", None),
    ],
)
def test_a_function_is_put_with_its_stage_by_where_it_is_defined(where: str, stage: str | None) -> None:
    assert stage_of(where) == stage


class _Stats:
    """pstats.Stats' table: function → (primitive calls, calls, own time, cumulative time, callers)."""

    def __init__(self, table: dict[Any, Any]) -> None:
        self.stats = table


def test_a_builtin_counts_with_the_caller_that_spent_the_most_in_it() -> None:
    decoder = ("/repo/cdc_lib/binlog/row_decoder.py", 1, "decode")
    fold = ("/repo/cdc_lib/changes/events.py", 60, "insert_rows")
    from_bytes = ("~", 0, "<built-in method from_bytes>")
    orphan = ("~", 0, "<built-in method time>")
    table = {
        decoder: (1, 1, 2.0, 3.0, {}),
        fold: (1, 1, 0.5, 0.6, {}),
        # Called by both; the decoder spent 0.9 s in it, the fold 0.1 s: all 1.0 s is the decoder's stage.
        from_bytes: (10, 10, 1.0, 1.0, {decoder: (9, 9, 0.9, 0.9), fold: (1, 1, 0.1, 0.1)}),
        orphan: (1, 1, 0.25, 0.25, {}),
    }
    totals = by_stage(_Stats(table))  # type: ignore[arg-type]
    assert totals == {"decode: binlake's reader (row decoder, batch, transactions)": 3.0,
                      "fold (last change per key)": 0.5, OTHER: 0.25}


def test_threads_are_grouped_by_name() -> None:
    assert thread_group("python", True) == "Python main thread"
    assert thread_group("tokio-runtime-w", False) == "delta-rs / DataFusion workers (Rust)"
    assert thread_group("binlake-read-ah", False) == "other threads (Arrow, pymysql, heartbeat)"
