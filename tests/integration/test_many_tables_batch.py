"""A batch over many tables: what each changed table costs the delta-rs writer besides its commit, and exactness
across a crash between two tables' commits with the tables kept from an earlier batch (docs/performance.md
"Many tables in one batch")."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_rs.writer import LOADED_TABLES, table_uri
from tests.conftest import run_cli, source_rows
from tests.integration.conftest import assert_each_change_applied_once
from tests.integration.delta_commits import commits_of
from tests.integration.mixed_batches import config_file_with, make_tables, mixed


@pytest.fixture
def table_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts of delta-rs's table-state reads in this process: full loads and incremental updates."""
    counts: Counter[str] = Counter()
    load, update = DeltaTable.__init__, DeltaTable.update_incremental

    def counted_load(self: DeltaTable, *args: Any, **kwargs: Any) -> None:
        counts["load"] += 1
        load(self, *args, **kwargs)

    def counted_update(self: DeltaTable) -> None:
        counts["update_incremental"] += 1
        update(self)

    monkeypatch.setattr(DeltaTable, "__init__", counted_load)
    monkeypatch.setattr(DeltaTable, "update_incremental", counted_update)
    yield counts


def assert_delta_equals_source(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    """The table as delta-rs's Arrow reader (not binlake's) sees it, row for row against the source."""
    rows = DeltaTable(pipeline.table_path(table)).to_pyarrow_table().to_pylist()
    assert sorted(tuple(row.values()) for row in rows) == source_rows(mariadb, table), table


def test_a_kept_table_is_not_read_again_and_the_scratch_write_not_loaded(
    mariadb: Any, database: str, make_config: Any, table_loads: Counter[str]
) -> None:
    tables = make_tables(mariadb, database, 6)
    pipeline = Pipeline(make_config(tables, batch__writer="delta-rs"))
    pipeline.snapshot()
    for index, table in enumerate(tables):
        mixed(mariadb, table, index)
    pipeline.sync(until_caught_up=True)  # loads each table once; the process keeps them
    kept = {table: LOADED_TABLES.held(table_uri(pipeline.table_path(table))) for table in tables}
    assert all(kept.values()), "the first batch kept no DeltaTable"

    table_loads.clear()
    for index, table in enumerate(tables):
        mixed(mariadb, table, index + 7)
    (result,) = pipeline.sync(until_caught_up=True)
    assert sorted(written.table for written in result.tables if written.delta_version) == sorted(tables)
    assert all(commits_of(pipeline, table)[-1]["path"] == "merge" for table in tables)
    # Per changed table, a mixed batch rewritten by key: the kept table is already at the version binlake's own
    # log read found (no update before the write: one after its commit), and the scratch write's commit is read by
    # listing its log (the one load left is `write_deltalake`'s own probe of the scratch folder). Before: two
    # incremental updates and two loads per table.
    assert table_loads["update_incremental"] <= len(tables), table_loads
    assert table_loads["load"] <= len(tables), table_loads
    for table in tables:
        assert LOADED_TABLES.held(table_uri(pipeline.table_path(table))) is kept[table], "a kept table was reloaded"
        assert_delta_equals_source(mariadb, pipeline, table)
        assert_each_change_applied_once(pipeline.config, table)


def test_a_kill_between_two_tables_commits_then_a_replay_over_kept_tables_is_exact(
    mariadb: Any, database: str, make_config: Any, tmp_path: Any
) -> None:
    tables = make_tables(mariadb, database, 5)
    config = make_config(tables, batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    for index, table in enumerate(tables):
        mixed(mariadb, table, index)
    pipeline.sync(until_caught_up=True)  # this process now keeps every table at its first batch's version
    kept_versions = {table: DeltaTable(pipeline.table_path(table)).version() for table in tables}

    # Another process (one writer thread: tables in name order) dies right after the second table's commit.
    for index, table in enumerate(tables):
        mixed(mariadb, table, index + 5)
    config_path = config_file_with(config, tmp_path / "binlake.yaml", apply_threads=1)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit",
                                                "BINLAKE_FAILPOINT_AT": "2"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    landed = [table for table in tables if DeltaTable(pipeline.table_path(table)).version() > kept_versions[table]]
    assert landed == sorted(tables)[:2], landed

    # Back in this process: the landed tables' kept state is one commit behind (updated, not trusted), the others'
    # is current (used as it is); the replay skips what landed and applies the rest, once.
    for index, table in enumerate(tables):
        mixed(mariadb, table, index + 11)
    pipeline.sync(until_caught_up=True)
    for table in tables:
        assert_delta_equals_source(mariadb, pipeline, table)
        assert_each_change_applied_once(config, table)
        assert {commit["writer"] for commit in commits_of(pipeline, table)[1:]} == {"delta-rs"}
