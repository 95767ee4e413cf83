"""binlog_row_metadata=MINIMAL on a live MariaDB: table maps without column names, named by position.

MySQL 8.0 and 8.4 log MINIMAL row metadata by default; MariaDB 10.5+ has the same variable (global only). The
variable is global, so these tests run on a MariaDB of their own (`own_mariadb`), never the session's shared one.
With MINIMAL the server logs each TABLE_MAP's types, signedness and charsets but no column names; and since
python-mysql-replication asks the server for the variable when it connects, it then ignores optional metadata
altogether, so every column arrives nameless and unsigned-less. binlake names the columns from the table's schema
by position (cdc_lib/binlog/column_positions.py). Delta is read back with `deltalake`.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.source.binlog_status import current_position
from cdc_lib.source.server import connect
from tests.conftest import ConfigFactory, sql
from tests.integration.decoded_images import decode_both_ways
from tests.integration.type_rows import COLUMNS, ROWS

DB = "minimal"


@pytest.fixture
def minimal_server(own_mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    """A private MariaDB logging MINIMAL row metadata (its own, so no other test sees the global setting)."""
    sql(own_mariadb, "SET GLOBAL binlog_row_metadata = 'MINIMAL'", f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    assert sql(own_mariadb, "SELECT @@GLOBAL.binlog_row_metadata") == [("MINIMAL",)]
    yield own_mariadb


def _position(config: PipelineConfig) -> BinlogPosition:
    connection = connect(config.source)
    try:
        return current_position(connection)
    finally:
        connection.close()


def test_every_parity_type_decodes_the_same_with_minimal_metadata_as_with_full(
    minimal_server: LocalMariaDB, make_config: ConfigFactory
) -> None:
    """The same statements on two identical tables, one logged with FULL metadata and one with MINIMAL."""
    config = make_config([f"{DB}.full", f"{DB}.minimal"], source__port=minimal_server.port)
    statements = [f"INSERT INTO {DB}.TABLE VALUES {', '.join(ROWS)}",
                  f"UPDATE {DB}.TABLE SET iu = 4294967294, tiu = 254, biu = 18446744073709551614, e = 'medium', "
                  "st = 'b,c', vc = 'ü' WHERE id = 1",
                  f"DELETE FROM {DB}.TABLE WHERE id = 2"]
    sql(minimal_server, *(f"CREATE TABLE {DB}.{table} ({COLUMNS})" for table in ("full", "minimal")))
    sql(minimal_server, "SET GLOBAL binlog_row_metadata = 'FULL'")
    full_start = _position(config)
    sql(minimal_server, *(statement.replace("TABLE", "full") for statement in statements))
    # Read while the server says FULL: the library then takes the names from the binlog.
    full_fast, full_library, full_decoder = decode_both_ways(config, f"{DB}.full", full_start)
    sql(minimal_server, "SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    minimal_start = _position(config)
    sql(minimal_server, *(statement.replace("TABLE", "minimal") for statement in statements))
    fast, library, decoder = decode_both_ways(config, f"{DB}.minimal", minimal_start)
    # The FULL-written events again, now that the server says MINIMAL: the library ignores their names, binlake
    # names the columns by position and checks them against the names the table map still carries.
    again, _, _ = decode_both_ways(config, f"{DB}.full", full_start)

    assert len(full_library) == len(ROWS) + 2 + 1
    assert full_decoder.fast.fallback_events == 0 and decoder.fast.fallback_events == 0
    assert fast == full_fast == library == full_library == again
    # INT UNSIGNED's top value, which a signed read (the library's, without the schema) turns negative.
    # Images: four inserts, the update's before and after, the delete.
    assert fast[0][9] == repr(4294967295) and fast[5][9] == repr(4294967294)


def _delta(config: PipelineConfig, table: str) -> list[dict[str, Any]]:
    database, name = table.split(".")
    rows = DeltaTable(config.sink.table_path(database, name)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def test_sync_applies_minimal_metadata_follows_ddl_and_stops_a_table_whose_schema_it_did_not_see(
    minimal_server: LocalMariaDB, make_config: ConfigFactory
) -> None:
    seen, unseen = f"{DB}.seen", f"{DB}.unseen"
    for table in (seen, unseen):
        sql(minimal_server,
            f"CREATE TABLE {table} (id INT PRIMARY KEY, n INT UNSIGNED, s VARCHAR(10) CHARACTER SET latin1, "
            "e ENUM('caf\u00e9', 'b') CHARACTER SET latin1, d DECIMAL(6,2))",
            f"INSERT INTO {table} VALUES (1, 4294967295, 'caf\u00e9', 'caf\u00e9', -1.25)")
    config = make_config([seen, unseen], source__port=minimal_server.port)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    connection = minimal_server.admin_connection(DB)
    try:
        with connection.cursor() as cursor:
            for table in (seen, unseen):
                cursor.execute(f"INSERT INTO {table} VALUES (2, 3230202323, '\u00d8re', 'b', 9999.99)")
                cursor.execute(f"UPDATE {table} SET n = n - 1, s = 'x' WHERE id = 1")
            # Logged DDL: binlake reads it and evolves the schema, and the next table map is named after it.
            cursor.execute(f"ALTER TABLE {seen} ADD COLUMN w BIGINT UNSIGNED")
            cursor.execute(f"INSERT INTO {seen} VALUES (3, 7, 'z', 'b', 0.5, 18446744073709551615)")
            # DDL binlake cannot see (not in the binlog): the table's schema is no longer the one it holds.
            cursor.execute("SET SESSION sql_log_bin = 0")
            cursor.execute(f"ALTER TABLE {unseen} MODIFY COLUMN n BIGINT")
            cursor.execute("SET SESSION sql_log_bin = 1")
            cursor.execute(f"INSERT INTO {unseen} VALUES (3, 7, 'z', 'b', 0.5)")
        connection.commit()
    finally:
        connection.close()
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state().tables

    assert state[seen].error is None
    assert _delta(config, seen) == [
        {"id": 1, "n": 4294967294, "s": "x", "e": "caf\u00e9", "d": Decimal("-1.25"), "w": None},
        {"id": 2, "n": 3230202323, "s": "\u00d8re", "e": "b", "d": Decimal("9999.99"), "w": None},
        {"id": 3, "n": 7, "s": "z", "e": "b", "d": Decimal("0.50"), "w": Decimal(18446744073709551615)},
    ]
    # The unseen DDL made the binlog's n a BIGINT where binlake's schema says INT UNSIGNED: the table stops at the
    # INSERT that shows it, loudly, with the remedy; what came before it is applied, nothing after.
    error = state[unseen].error
    assert error is not None and "cannot be matched by position" in error and "(n int(10) unsigned)" in error
    assert f"binlake snapshot --table {unseen}" in error and "binlog_row_metadata=FULL" in error
    assert [(row["id"], row["n"], row["s"]) for row in _delta(config, unseen)] == [
        (1, 4294967294, "x"), (2, 3230202323, "\u00d8re")
    ]
