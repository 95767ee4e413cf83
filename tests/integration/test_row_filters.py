"""Row filters (`sink.tables.<t>.filter`, docs/row-filters.md) against the real MariaDB: a chunked snapshot, then
binlog changes moving rows into and out of the filter (key changes among them), a sync killed after its Delta
commit and replayed, and a batch past the spill bound. Each time Delta, read with delta-rs, equals the
server's own `SELECT … WHERE <filter>`: the expected rows come from MariaDB evaluating the predicate, not binlake.
"""

from __future__ import annotations

import signal
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from cdc_lib.errors import ColumnRulesError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import run_cli, sql, write_config_file

#: NULLs, decimals at the edge, dates (a zero date among them) and an OR with an IS NULL branch.
FILTER = ("(qty >= 5 AND total < 700.50) OR day BETWEEN DATE '2024-03-01' AND DATE '2024-03-31' "
          "OR (qty IS NULL AND id NOT IN (7, 8))")
COLUMNS = "id, qty, total, day, note"
BOUND = 200  # batch.max_buffered_changes: the big transaction below spills


def _create(mariadb: Any, table: str, rows: int) -> None:
    database = table.partition(".")[0]
    sql(mariadb, "SET SESSION sql_mode = ''",
        f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, total DECIMAL(10,2), day DATE, note VARCHAR(40))",
        f"INSERT INTO {table} {_generated(1, rows)}",
        # Asymmetric edges: exactly 700.50 (out), 700.49 (in), the last and first day of March, a zero date.
        f"UPDATE {table} SET total = 700.50, qty = 9, day = NULL WHERE id = 11",
        f"UPDATE {table} SET total = 700.49, qty = 9, day = NULL WHERE id = 12",
        f"UPDATE {table} SET day = '2024-03-31', qty = 1 WHERE id = 13",
        f"UPDATE {table} SET day = '2024-04-01', qty = 1 WHERE id = 14",
        f"UPDATE {table} SET day = '0000-00-00', qty = NULL WHERE id = 15",
        f"UPDATE {table} SET qty = NULL WHERE id IN (7, 8)", database=database)


def _generated(first: int, last: int) -> str:
    return (f"SELECT seq, IF(seq % 11 = 0, NULL, seq % 10), (seq * 37 % 1000) + 0.25, "
            f"IF(seq % 13 = 0, NULL, DATE '2024-02-20' + INTERVAL (seq % 20) DAY), CONCAT('n', seq) "
            f"FROM seq_{first}_to_{last}")


def expected(mariadb: Any, table: str) -> list[dict[str, Any]]:
    """The rows the server itself selects with the filter (zero dates read as NULL, as they land)."""
    rows = sql(mariadb, f"SELECT id, qty, total, IF(day = '0000-00-00', NULL, day), note FROM {table} "
                        f"WHERE {FILTER} ORDER BY id")
    return [{"id": i, "qty": q, "total": t, "day": d, "note": n} for i, q, t, d, n in rows]


def delta(config: Any, table: str) -> list[dict[str, Any]]:
    rows = DeltaTable(Pipeline(config).table_path(table)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def _config_file(config: Any, path: Path, table: str, spill: Path) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["batch"].update(max_buffered_changes=BOUND, spill_path=str(spill))
    document["sink"]["tables"] = {table: {"filter": FILTER}}
    path.write_text(yaml.safe_dump(document))
    return path


def test_rows_move_in_and_out_of_the_filter_through_key_changes_crashes_and_replays(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    table = f"{database}.orders"
    _create(mariadb, table, 400)
    spill = tmp_path / "spill"
    config = make_config([table], snapshot__rows_per_chunk=60, snapshot__chunks_per_wave=2,
                         batch__max_buffered_changes=BOUND, batch__spill_path=str(spill),
                         sink__tables={table: {"filter": FILTER}})
    config_path = _config_file(config, tmp_path / "binlake.yaml", table, spill)
    pipeline = Pipeline(config)

    (result,) = pipeline.snapshot()
    assert result.installed and result.chunks > 2
    landed = delta(config, table)
    assert landed == expected(mariadb, table)
    assert 0 < len(landed) < 400
    ids = {row["id"] for row in landed}
    assert 12 in ids and 11 not in ids and 13 in ids and 14 not in ids and 15 in ids and 7 not in ids
    assert {row["total"] for row in landed if row["id"] == 12} == {Decimal("700.49")}

    # Every transition, some under a key change: in→in, in→out, out→in, out→out; inserts and deletes both sides.
    sql(mariadb,
        f"INSERT INTO {table} {_generated(1000, 1040)}",
        f"UPDATE {table} SET qty = 0 WHERE id BETWEEN 20 AND 40",  # most of these leave the filter
        f"UPDATE {table} SET qty = 6, total = 1.00 WHERE id BETWEEN 41 AND 60",  # these enter it
        f"UPDATE {table} SET note = 'touched' WHERE id BETWEEN 61 AND 80",  # each stays where it was
        f"UPDATE {table} SET id = id + 5000, qty = IF(id % 2 = 0, 0, 7), total = 5 WHERE id BETWEEN 81 AND 100",
        f"UPDATE {table} SET id = id + 6000 WHERE id BETWEEN 101 AND 110",  # a key move, same side
        f"DELETE FROM {table} WHERE id % 9 = 4",
        f"UPDATE {table} SET total = 700.50 WHERE id = 12",  # out, by one cent
        f"UPDATE {table} SET total = 700.49 WHERE id = 11",  # in
        f"UPDATE {table} SET day = '2024-03-01' WHERE id = 14",  # in at the window's first day
        f"UPDATE {table} SET qty = NULL WHERE id = 16",  # in by the IS NULL branch
        database=database)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    assert delta(config, table) == expected(mariadb, table)

    # Killed after the Delta commit and before the offset: the replay folds the same images again.
    sql(mariadb, f"UPDATE {table} SET qty = IF(qty IS NULL, 5, NULL) WHERE id BETWEEN 200 AND 240",
        f"UPDATE {table} SET id = id + 7000, day = '2024-03-15' WHERE id BETWEEN 241 AND 250",
        f"DELETE FROM {table} WHERE id BETWEEN 251 AND 255", database=database)
    killed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "before_offset_write"}, timeout=900)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    replayed = run_cli(config_path, "sync", "--until-caught-up", timeout=900)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert delta(config, table) == expected(mariadb, table), "the replay after the commit is exact"

    # One transaction past the spill bound: its images are folded through the filter into the spilled log (an
    # out→in row arrives there as a key arrival without a departure), then applied from it.
    sql(mariadb, "START TRANSACTION", f"INSERT INTO {table} {_generated(2000, 2300)}",
        f"UPDATE {table} SET qty = (qty + 3) % 10 WHERE id BETWEEN 2000 AND 2300",
        f"UPDATE {table} SET id = id + 100000, total = total + 300 WHERE id BETWEEN 2000 AND 2050",
        f"UPDATE {table} SET qty = 8, total = 2 WHERE id BETWEEN 300 AND 330",
        f"DELETE FROM {table} WHERE id BETWEEN 2100 AND 2120", "COMMIT", database=database)
    pipeline.sync(until_caught_up=True)
    assert delta(config, table) == expected(mariadb, table), "the spilled batch is exact"
    state = Pipeline(config).read_state()
    assert state.tables[table].error is None and state.tables[table].applied_seq == state.batch_seq
    # Reconciliation compares Delta with the rows the filter lands, not the whole source table. (Its digest tells
    # the zero date MariaDB holds from the NULL Delta holds, with or without a filter: row 15 gets a real NULL.)
    sql(mariadb, f"UPDATE {table} SET day = NULL WHERE id = 15", database=database)
    pipeline.sync(until_caught_up=True)
    (report,) = reconcile(Pipeline(config), [table])
    assert report.matches and report.source_rows == len(expected(mariadb, table)), report


def test_a_ddl_dropping_the_filter_column_stops_the_table_with_a_remedy(
    mariadb: Any, database: str, make_config: Any
) -> None:
    table, other = f"{database}.orders", f"{database}.plain"
    _create(mariadb, table, 50)
    _create(mariadb, other, 20)
    config = make_config([table, other], sink__tables={table: {"filter": "qty > 3"}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    landed = delta(config, table)
    sql(mariadb, f"ALTER TABLE {table} DROP COLUMN qty", f"INSERT INTO {table} (id, note) VALUES (900, 'x')",
        f"INSERT INTO {other} (id, qty) VALUES (900, 1)", database=database)
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    error = state.tables[table].error
    assert error is not None and "'qty'" in error and "sink.tables" in error and "filter" in error, error
    assert delta(config, table) == landed, "nothing landed past the DDL"
    assert state.tables[other].error is None and 900 in {row["id"] for row in delta(config, other)}


@pytest.mark.parametrize(("predicate", "named"), [
    ("gone > 1", "'gone'"),
    ("qty > '3'", "not a number"),
])
def test_a_filter_that_does_not_fit_refuses_the_snapshot_before_it_reads(
    predicate: str, named: str, mariadb: Any, database: str, make_config: Any
) -> None:
    table = f"{database}.orders"
    _create(mariadb, table, 5)
    config = make_config([table], sink__tables={table: {"filter": predicate}})
    with pytest.raises(ColumnRulesError, match=named):
        Pipeline(config).validate()
    with pytest.raises(ColumnRulesError, match="remedy"):
        Pipeline(config).snapshot()
    assert not Path(Pipeline(config).table_path(table)).exists(), "nothing was written"
