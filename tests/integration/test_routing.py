"""Routing (`sink.routes`, docs/routing.md): three real MariaDB shard tables with overlapping keys land in one
Delta table, keyed by their source columns, through a snapshot, changes (a TRUNCATE of one shard among them), a
re-snapshot of one shard, a crash between one shard's commit and the offsets, and an ALTER on one shard.

Delta is read with delta-rs; the expected table is the union of the sources, each row with its source's names.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from cdc_lib.errors import RoutingError
from cdc_lib.maintenance.run import maintain
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import run_cli, sql, write_config_file

SHARDS = ("orders_0", "orders_1", "orders_2")


def _create(mariadb: Any, database: str, table: str, rows: int, *, tag: str) -> None:
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, item VARCHAR(40), qty INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, CONCAT('{tag}-', seq), seq FROM seq_1_to_{rows}", database=database)


def _routed_config(make_config: Any, database: str) -> Any:
    return make_config([f"{database}.{shard}" for shard in SHARDS],
                       sink__routes=[{"source": rf"{database}\.orders_[0-9]+", "target": f"{database}.orders"}])


def expected(mariadb: Any, database: str, shards: tuple[str, ...] = SHARDS) -> list[dict[str, Any]]:
    """The union of the sources, each row named by its source: computed from the server's own SELECTs."""
    rows = []
    for shard in shards:
        for id_, item, qty in sql(mariadb, f"SELECT id, item, qty FROM {database}.{shard}"):
            rows.append({"id": id_, "item": item, "qty": qty, "_binlake_source_db": database,
                         "_binlake_source_table": shard})
    return _sorted(rows)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: (row["_binlake_source_table"], row["id"]))


def delta(config: Any, database: str) -> tuple[list[str], list[dict[str, Any]]]:
    table = DeltaTable(Pipeline(config).table_path(f"{database}.{SHARDS[0]}"))
    return [field.name for field in table.schema().fields], _sorted(table.to_pyarrow_table().to_pylist())


def _app_ids(path: str) -> set[str]:
    """The SetTransaction app ids of every commit in the Delta log."""
    found = set()
    for entry in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.add(action["txn"]["appId"])
    return found


def test_shards_land_in_one_table_and_a_re_snapshot_replaces_only_its_own_rows(
    mariadb: Any, database: str, make_config: Any
) -> None:
    for number, shard in enumerate(SHARDS):
        _create(mariadb, database, shard, 40 + 10 * number, tag=f"s{number}")
    config = _routed_config(make_config, database)
    pipeline = Pipeline(config)
    paths = {pipeline.table_path(f"{database}.{shard}") for shard in SHARDS}
    assert paths == {str(Path(config.sink.path) / database / "orders")}, "one Delta table for the group"

    pipeline.snapshot()
    columns, rows = delta(config, database)
    assert columns == ["id", "item", "qty", "_binlake_source_db", "_binlake_source_table"]
    assert rows == expected(mariadb, database)
    assert len(rows) == 40 + 50 + 60, "equal keys of different shards are different rows"

    # Changes on every shard with the same keys, a key move, and a TRUNCATE of one shard (deletes only its rows).
    sql(mariadb, "UPDATE orders_0 SET item = 'zero', qty = qty + 100 WHERE id <= 5",
        "UPDATE orders_1 SET item = 'one' WHERE id <= 5", "DELETE FROM orders_0 WHERE id BETWEEN 6 AND 8",
        "DELETE FROM orders_1 WHERE id = 7", "INSERT INTO orders_0 VALUES (1000, 'new0', 1)",
        "INSERT INTO orders_1 VALUES (1000, 'new1', 2)", "UPDATE orders_1 SET id = id + 500 WHERE id = 20",
        "TRUNCATE TABLE orders_2", "INSERT INTO orders_2 VALUES (1, 'after truncate', 3)", database=database)
    pipeline.sync(until_caught_up=True)
    assert delta(config, database)[1] == expected(mariadb, database)
    state = pipeline.read_state()
    for shard in SHARDS:
        table_state = state.tables[f"{database}.{shard}"]
        assert table_state.error is None and table_state.consistent, table_state
    # Each source commits under its own app id: its replay check and fences are its own.
    app_ids = _app_ids(pipeline.table_path(f"{database}.orders_0"))
    assert {pipeline.application(f"{database}.{shard}") for shard in SHARDS} <= app_ids

    # Off the binlog, both orders_0 and orders_1 change; only orders_1 is re-snapshotted: orders_0's rows stay as
    # they were in Delta (its snapshot did not run), the other shards' rows are untouched.
    before = delta(config, database)[1]
    sql(mariadb, "SET sql_log_bin = 0", "UPDATE orders_0 SET item = 'off-binlog'",
        "UPDATE orders_1 SET item = 'off-binlog'", "DELETE FROM orders_1 WHERE id > 40", "SET sql_log_bin = 1",
        database=database)
    pipeline.snapshot([f"{database}.orders_1"])
    after = delta(config, database)[1]
    untouched = ("orders_0", "orders_2")
    assert [row for row in after if row["_binlake_source_table"] in untouched] == [
        row for row in before if row["_binlake_source_table"] in untouched
    ]
    assert [row for row in after if row["_binlake_source_table"] == "orders_1"] == expected(
        mariadb, database, ("orders_1",))

    sql(mariadb, "INSERT INTO orders_1 VALUES (2000, 'after re-snapshot', 1)",
        "UPDATE orders_2 SET qty = 77 WHERE id = 1", database=database)
    pipeline.sync(until_caught_up=True)
    assert delta(config, database)[1] == _sorted(expected(mariadb, database, ("orders_1", "orders_2")) + [
        row for row in before if row["_binlake_source_table"] == "orders_0"
    ])
    # Reconciliation compares each source with its own rows of the shared table.
    reports = {report.table: report for report in reconcile(pipeline, [f"{database}.{s}" for s in SHARDS])}
    assert reports[f"{database}.orders_1"].matches and reports[f"{database}.orders_2"].matches
    assert not reports[f"{database}.orders_0"].matches, "orders_0 changed off the binlog and was not re-snapshotted"


def test_a_crash_between_one_shards_commit_and_the_offsets_replays_exactly(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    for number, shard in enumerate(SHARDS):
        _create(mariadb, database, shard, 30, tag=f"s{number}")
    config = _routed_config(make_config, database)
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    document = yaml.safe_load(config_path.read_text())
    document["sink"]["routes"] = [{"source": route.source, "target": route.target} for route in config.sink.routes]
    config_path.write_text(yaml.safe_dump(document))
    assert run_cli(config_path, "snapshot", timeout=900).returncode == 0

    sql(mariadb, "UPDATE orders_0 SET qty = qty + 1 WHERE id <= 10", "UPDATE orders_1 SET qty = qty + 2",
        "DELETE FROM orders_2 WHERE id = 3", "INSERT INTO orders_2 VALUES (3000, 'x', 1)", database=database)
    # Killed right after the first shard's MERGE committed, before any offset moved.
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit"}, timeout=900)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    _, partial = delta(config, database)
    assert partial != expected(mariadb, database), "one shard's commit landed, not all"

    sql(mariadb, "UPDATE orders_0 SET item = 'later' WHERE id = 1", "UPDATE orders_1 SET item = 'later'",
        database=database)
    resumed = run_cli(config_path, "sync", "--until-caught-up", timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert delta(config, database)[1] == expected(mariadb, database), "nothing lost, nothing doubled"
    state = Pipeline(config).read_state()
    assert all(state.tables[f"{database}.{shard}"].error is None for shard in SHARDS)


def test_a_shard_with_another_schema_is_refused_and_the_others_rows_stay(
    mariadb: Any, database: str, make_config: Any
) -> None:
    _create(mariadb, database, "orders_0", 20, tag="s0")
    _create(mariadb, database, "orders_1", 20, tag="s1")
    sql(mariadb, "CREATE TABLE orders_2 (id INT PRIMARY KEY, item VARCHAR(40), qty BIGINT NOT NULL)",
        "INSERT INTO orders_2 VALUES (1, 'a', 1)", database=database)
    config = _routed_config(make_config, database)
    pipeline = Pipeline(config)
    pipeline.snapshot([f"{database}.orders_0", f"{database}.orders_1"])
    with pytest.raises(RoutingError, match="qty bigint") as refused:
        pipeline.snapshot([f"{database}.orders_2"])
    assert "remedy" in str(refused.value)
    assert delta(config, database)[1] == expected(mariadb, database, ("orders_0", "orders_1"))


def test_an_alter_on_one_shard_stops_only_that_shard(mariadb: Any, database: str, make_config: Any) -> None:
    for number, shard in enumerate(SHARDS):
        _create(mariadb, database, shard, 10, tag=f"s{number}")
    config = _routed_config(make_config, database)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, "ALTER TABLE orders_1 ADD COLUMN extra INT", "UPDATE orders_1 SET qty = 5",
        "UPDATE orders_0 SET qty = 6", "UPDATE orders_2 SET qty = 7", database=database)
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    stopped = state.tables[f"{database}.orders_1"].error
    assert stopped is not None and "schema_policy stop" in stopped, stopped
    assert state.tables[f"{database}.orders_0"].error is None and state.tables[f"{database}.orders_2"].error is None
    columns, rows = delta(config, database)
    assert "extra" not in columns
    assert [row for row in rows if row["_binlake_source_table"] != "orders_1"] == expected(
        mariadb, database, ("orders_0", "orders_2"))


def test_maintenance_maintains_a_routed_table_once_per_run(mariadb: Any, database: str, make_config: Any) -> None:
    """Three sources share one Delta table: `binlake maintain` compacts and vacuums it once, and names the
    sources it left to that one run; the rows stay the union of the sources."""
    for number, shard in enumerate(SHARDS):
        _create(mariadb, database, shard, 20 + number, tag=f"m{number}")
    config = _routed_config(make_config, database)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    for round_ in range(4):  # small commits to compact
        sql(mariadb, *(f"UPDATE {shard} SET qty = qty + 1 WHERE id = {round_ + 1}" for shard in SHARDS),
            database=database)
        pipeline.sync(until_caught_up=True)
    outcomes = maintain(pipeline.context)
    done = [outcome for outcome in outcomes if outcome.skipped is None]
    assert len(done) == 1 and done[0].table == f"{database}.{SHARDS[0]}", outcomes
    assert done[0].compacted_files > 1
    assert {outcome.table for outcome in outcomes if outcome.skipped} == {f"{database}.{s}" for s in SHARDS[1:]}
    assert all("maintained once in this run" in (outcome.skipped or "") for outcome in outcomes[1:])
    assert delta(config, database)[1] == expected(mariadb, database)
