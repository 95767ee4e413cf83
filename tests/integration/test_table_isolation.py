"""A failure that belongs to one table stops that table; the other tables keep flowing (invariant 12)."""

from __future__ import annotations

import shutil

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import delta_rows, source_rows, sql


def _two_tables(server: LocalMariaDB, db: str) -> None:
    sql(
        server,
        f"CREATE TABLE {db}.good (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"CREATE TABLE {db}.bad (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {db}.good VALUES (1, 10), (2, 20)",
        f"INSERT INTO {db}.bad VALUES (1, 10), (2, 20)",
    )


def test_a_merge_failure_stops_only_its_table(mariadb, database, make_config) -> None:
    db = database
    _two_tables(mariadb, db)
    config = make_config([f"{db}.good", f"{db}.bad"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    # A downstream team adds a Delta CHECK constraint the source does not have: the bad row's MERGE is refused.
    bad_path = pipeline.table_path(f"{db}.bad")
    pipeline.spark().sql(f"ALTER TABLE delta.`{bad_path}` ADD CONSTRAINT positive CHECK (qty > 0)")
    bad_offset = pipeline.read_state().tables[f"{db}.bad"].position
    sql(
        mariadb,
        f"INSERT INTO {db}.good VALUES (3, 30)",
        f"INSERT INTO {db}.bad VALUES (3, -7)",
        f"UPDATE {db}.good SET qty = 11 WHERE id = 1",
        database=db,
    )

    [result] = pipeline.sync()

    by_table = {table.table: table for table in result.tables}
    assert by_table[f"{db}.good"].error is None
    assert by_table[f"{db}.good"].inserted == 1 and by_table[f"{db}.good"].updated == 1
    bad_error = by_table[f"{db}.bad"].error
    assert bad_error is not None and "writing the batch into Delta failed" in bad_error
    assert "DeltaInvariantViolation" in bad_error and "binlake snapshot --table" in bad_error
    assert delta_rows(config, f"{db}.good") == source_rows(mariadb, f"{db}.good")
    assert delta_rows(config, f"{db}.bad") == [(1, 10), (2, 20)]
    state = pipeline.read_state()
    assert state.tables[f"{db}.bad"].position == bad_offset  # nothing of the batch reached it
    assert state.tables[f"{db}.good"].position > bad_offset
    status = {row.table: row for row in pipeline.status()}
    assert status[f"{db}.bad"].error and not status[f"{db}.good"].error

    # The good table keeps flowing in later batches; the stopped one stays stopped until its remedy.
    sql(mariadb, f"DELETE FROM {db}.good WHERE id = 2", f"INSERT INTO {db}.bad VALUES (4, 4)", database=db)
    [result] = pipeline.sync()
    assert f"{db}.bad" in result.skipped_tables
    assert delta_rows(config, f"{db}.good") == source_rows(mariadb, f"{db}.good")

    pipeline.spark().sql(f"ALTER TABLE delta.`{bad_path}` DROP CONSTRAINT positive")
    pipeline.snapshot([f"{db}.bad"])
    pipeline.sync()
    assert delta_rows(config, f"{db}.bad") == source_rows(mariadb, f"{db}.bad")
    assert not pipeline.read_state().tables[f"{db}.bad"].error


def test_a_missing_delta_table_stops_only_its_table(mariadb, database, make_config) -> None:
    db = database
    _two_tables(mariadb, db)
    config = make_config([f"{db}.good", f"{db}.bad"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    shutil.rmtree(pipeline.table_path(f"{db}.bad"))
    sql(mariadb, f"INSERT INTO {db}.good VALUES (3, 30)", f"INSERT INTO {db}.bad VALUES (3, 30)", database=db)

    [result] = pipeline.sync()

    assert delta_rows(config, f"{db}.good") == source_rows(mariadb, f"{db}.good")
    error = pipeline.read_state().tables[f"{db}.bad"].error
    assert error is not None and "Delta table" in error and "is missing" in error
    assert f"{db}.bad" in result.skipped_tables

    pipeline.snapshot([f"{db}.bad"])  # the remedy the error names works although the table was broken
    pipeline.sync()
    assert delta_rows(config, f"{db}.bad") == source_rows(mariadb, f"{db}.bad")
