"""Keys stay keys in Delta (issue 24, cases 3 and 4): one row per primary key, whatever the source did off the log.

Case 4: a key deleted with `sql_log_bin=0` and inserted again is not appended beside its old row; the append path
keeps only keys the table's file statistics prove absent (cdc_lib.key_absence), on both writers.
Case 3: a key the type mapping would turn into NULL (a zero or partial date) stops its table with a refusal that
names the column, while the other tables of the pipeline go on.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.pipeline import Pipeline
from tests.conftest import scan_rows, source_rows, sql


def _last_commit_metadata(pipeline: Pipeline, table: str) -> dict[str, Any]:
    log = sorted((Path(pipeline.table_path(table)) / "_delta_log").glob("*.json"))[-1]
    for line in log.read_text().split("\n"):
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            return dict(json.loads(action["commitInfo"]["userMetadata"]))
    raise AssertionError(f"{log} has no commitInfo")


def _assert_one_row_per_key_and_equal_to_source(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    delta = sorted(scan_rows(pipeline.table_path(table)))
    doubled = [key for key, count in Counter(row[0] for row in delta).items() if count > 1]
    assert not doubled, f"{table}: keys held twice in Delta: {doubled}"
    assert delta == source_rows(mariadb, table)


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_a_key_deleted_off_the_binlog_and_inserted_again_is_held_once(mariadb, database, make_config,
                                                                       writer) -> None:
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {table} SELECT seq, seq, 'start' FROM {database}.seq_1_to_100")
    pipeline = Pipeline(make_config([table], batch__writer=writer))
    pipeline.snapshot()
    # A first batch takes the table past its snapshot's window: from then on it is consistent at its offset.
    sql(mariadb, f"INSERT INTO {table} VALUES (101, 1, 'warm-up')")
    pipeline.sync(until_caught_up=True)
    sql(
        mariadb,
        "SET SESSION sql_log_bin = 0",  # an operator's repair, or what a failover to a lagging replica looks like
        f"DELETE FROM {table} WHERE id IN (5, 6)",
        "SET SESSION sql_log_bin = 1",
        f"INSERT INTO {table} VALUES (5, 55, 'again')",
        f"INSERT INTO {table} VALUES (6, 66, 'brief')",
        f"DELETE FROM {table} WHERE id = 6",  # born and gone in the batch: the old row 6 must leave Delta too
        f"INSERT INTO {table} VALUES (1000, 1, 'new')",
    )
    pipeline.sync(until_caught_up=True)
    rows = [row for row in scan_rows(pipeline.table_path(table)) if row[0] in (5, 6)]
    assert rows == [(5, 55, "again")], f"Delta holds {rows} for keys 5 and 6"
    _assert_one_row_per_key_and_equal_to_source(mariadb, pipeline, table)
    # The fast path stays where it is proven: auto-increment-like inserts past the largest key are appended.
    sql(mariadb, f"INSERT INTO {table} SELECT 2000 + seq, seq, 'tail' FROM {database}.seq_1_to_50")
    pipeline.sync(until_caught_up=True)
    assert _last_commit_metadata(pipeline, table).get("path") == "append"
    _assert_one_row_per_key_and_equal_to_source(mariadb, pipeline, table)
