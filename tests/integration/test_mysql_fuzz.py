"""The MySQL-shaped fuzzer (bench/fuzz/mysql_fuzz.py) in the suite: seeded rounds of MySQL binlogs that MariaDB
never writes — compressed transactions (TRANSACTION_PAYLOAD, zstd), partial JSON updates (PARTIAL_UPDATE_ROWS with
REPLACE / INSERT / REMOVE diffs), binary JSON, rotated files — served by the protocol stub and synced by binlake
in batches of random size; Delta, read with `deltalake`, must equal the fuzzer's model of the tables after every
batch and at the end.

The rounds are fixed (seed, round) pairs chosen so that together they hold every shape the fuzzer draws; the
test checks that they still do, so a change of the generator cannot quietly empty it. A second test breaks
binlake's application of JSON diffs on purpose and requires the fuzzer to see the difference: a fuzzer that
cannot fail proves nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.fuzz.mysql_fuzz import Fuzzer
from cdc_lib.binlog import table_rows
from cdc_lib.binlog.json_diff import REPLACE, apply_diffs

#: (seed, round): between them compressed and plain transactions, partial JSON rows with each diff operation,
#: key changes, rotations, DDL on an unfollowed table, two tables in one round, and a refused payload
#: (batch.max_payload_event_bytes); and (1, 16) writes its two tables' TABLE_MAPs without column names
#: (binlog_row_metadata=MINIMAL), read by position.
ROUNDS = [(1, 2), (1, 9), (1, 14), (1, 16), (1, 24)]


def test_seeded_mysql_fuzz_rounds_find_no_difference(tmp_path: Path) -> None:
    lines: list[str] = []
    fuzzer = Fuzzer(tmp_path, out=lines.append)
    for seed, number in ROUNDS:
        fuzzer.round(seed, number)
    totals = fuzzer.totals
    report = "\n".join(lines)
    assert not totals.failures, report
    assert totals.results.get("expected-stop", 0) >= 1, report  # the payload refusal, then the remedy
    assert totals.compressed and totals.transactions > totals.compressed, report
    assert totals.minimal_metadata == 1, report
    assert totals.partial_rows and totals.diffs > totals.partial_rows, report
    assert set(totals.operations) == {"REPLACE", "INSERT", "REMOVE"} and totals.key_changes, report
    assert totals.rotations and totals.ddl and totals.rows_compared > 50, report


def test_the_fuzzer_sees_a_broken_json_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """binlake's REPLACE diffs dropped (as a bug might): the same kind of round must report a difference."""

    def without_replace(document: Any, diffs: Any) -> Any:
        return apply_diffs(document, [diff for diff in diffs if diff.operation != REPLACE])

    monkeypatch.setattr(table_rows, "apply_diffs", without_replace)
    lines: list[str] = []
    fuzzer = Fuzzer(tmp_path, out=lines.append)
    outcome = fuzzer.round(1, 14)
    assert outcome.result == "difference", "\n".join(lines)
    assert "json" in outcome.detail
