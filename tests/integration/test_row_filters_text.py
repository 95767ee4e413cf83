"""Row filters comparing text and binary strings (docs/row-filters.md) against the real MariaDB: a snapshot, then
binlog changes moving rows into and out of the filter, key changes among them. The values are chosen so that
Python's own comparison would get them wrong: case ('Active' = 'active' under _ci), accents ('actíve' = 'active'
under general_ci), trailing blanks ('eu ' = 'eu' under PAD SPACE, also under utf8mb4_bin), 'ß' = 'ss' (under
unicode_ci), a latin1 column, a VARBINARY compared bytewise (trailing blanks count) and a BINARY(4) whose 0x00
padding counts. Delta, read with delta-rs, must equal the server's own `SELECT … WHERE <filter>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.model.collated import Question
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.source.text_compare import ServerComparisons
from tests.conftest import sql

FILTER = ("(status = 'active' AND code <> 'x') OR code IN ('eu', 'us') OR region IN ('eu', 'e') OR region > 'y' "
          "OR tag = 'k1' OR tag BETWEEN 'm' AND 'n' OR fixed = 'ab' OR name = 'strasse'")
COLUMNS = "id, status, code, region, tag, fixed, name"

#: (id, status, code, region, tag, fixed, name): the edges, each named by what a naive comparison gets wrong.
EDGES = [
    (1, "Active", "y", None, None, None, None),  # case, under utf8mb4_general_ci: in
    (2, "ACTIVE  ", "y", None, None, None, None),  # case and PAD SPACE: in
    (3, "actíve", "y", None, None, None, None),  # general_ci folds accents: in
    (4, "active", "x", None, None, None, None),  # code <> 'x' false: out
    (5, "active", "X", None, None, None, None),  # utf8mb4_bin: 'X' <> 'x': in
    (6, "inactive", None, None, None, None, None),  # FALSE AND UNKNOWN: out
    (7, "active", None, "EU", None, None, None),  # TRUE AND UNKNOWN, then latin1 _ci 'EU' = 'eu': in
    (8, None, None, "é", None, None, None),  # latin1_swedish_ci: whatever the server says of 'é' = 'e'
    (9, None, "eu ", None, None, None, None),  # utf8mb4_bin pads too: 'eu ' = 'eu': in
    (10, None, "EU", None, None, None, None),  # utf8mb4_bin is case-sensitive: out
    (11, None, None, None, b"k1", None, None),  # bytes equal: in
    (12, None, None, None, b"K1", None, None),  # bytes differ in case: out
    (13, None, None, None, b"k1 ", None, None),  # VARBINARY: a trailing blank counts: out
    (14, None, None, None, b"m\xff", None, None),  # between 'm' and 'n' bytewise: in
    (15, None, None, None, None, b"ab", None),  # BINARY(4) holds 'ab\0\0', not 'ab': out
    (16, None, None, None, None, None, "Straße"),  # unicode_ci expands ß to ss: in
    (17, None, None, None, None, None, "strasse"),  # in
    (18, None, None, None, None, None, "strase"),  # out
    (19, None, None, "ÿ", None, None, None),  # latin1 'ÿ' > 'y' under swedish_ci?: the server says
    (20, None, None, None, None, None, None),  # all NULL: UNKNOWN throughout: out
]


def _create(mariadb: Any, database: str, table: str) -> None:
    sql(mariadb,
        f"CREATE TABLE {table} (id INT PRIMARY KEY, "
        "status VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, "
        "code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, "
        "region VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci, "
        "tag VARBINARY(10), fixed BINARY(4), "
        "name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci)",
        database=database)
    _insert(mariadb, database, table, EDGES)
    # Many rows over a few distinct values: what a real status column looks like.
    sql(mariadb,
        f"INSERT INTO {table} SELECT 100 + seq, ELT(1 + seq % 5, 'active', 'Active ', 'paused', 'ACTİVE', NULL), "
        "ELT(1 + seq % 4, 'eu', 'US', 'x', 'de'), ELT(1 + seq % 3, 'eu', 'fr', 'Eu  '), "
        "IF(seq % 7 = 0, 'k1', NULL), NULL, ELT(1 + seq % 3, 'STRASSE', 'weg', NULL) FROM seq_1_to_300",
        database=database)


def _insert(mariadb: Any, database: str, table: str, rows: list[tuple[Any, ...]]) -> None:
    connection = mariadb.admin_connection(database)
    try:
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
        connection.commit()
    finally:
        connection.close()


def expected(mariadb: Any, database: str, table: str) -> list[dict[str, Any]]:
    """The rows the server itself selects with the filter."""
    rows = sql(mariadb, f"SELECT {COLUMNS} FROM {table} WHERE {FILTER} ORDER BY id", database=database)
    names = COLUMNS.split(", ")
    return [{name: bytes(value) if isinstance(value, bytearray) else value
             for name, value in zip(names, row, strict=True)} for row in rows]


def delta(config: Any, table: str) -> list[dict[str, Any]]:
    rows = DeltaTable(Pipeline(config).table_path(table)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def test_text_filters_land_what_the_servers_collations_select(
    mariadb: Any, database: str, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = f"{database}.accounts"
    _create(mariadb, database, table)
    config = make_config([table], sink__tables={table: {"filter": FILTER}})
    pipeline = Pipeline(config)

    (result,) = pipeline.snapshot()
    assert result.installed
    landed = delta(config, table)
    assert landed == expected(mariadb, database, table)
    ids = {row["id"] for row in landed}
    assert {1, 2, 3, 5, 7, 9, 11, 14, 16, 17} <= ids, "what Python's == would have left out"
    assert not {4, 6, 10, 12, 13, 15, 18, 20} & ids, "what Python's == (or a stripped compare) would have let in"

    # Rows move in and out by case, accents, blanks and bytes; keys change on both sides; inserts and deletes.
    sql(mariadb,
        f"UPDATE {table} SET status = 'ACTIVE' WHERE id = 1",  # in → in
        f"UPDATE {table} SET status = 'activ' WHERE id = 2",  # in → out
        f"UPDATE {table} SET code = 'x ' WHERE id = 5",  # in → out: utf8mb4_bin pads 'x ' to 'x'
        f"UPDATE {table} SET code = 'Us' WHERE id = 10",  # out → out under _bin
        f"UPDATE {table} SET code = 'us' WHERE id = 6",  # out → in
        f"UPDATE {table} SET tag = 'k1' WHERE id = 13",  # out → in: the blank is gone
        f"UPDATE {table} SET tag = 'k1 ' WHERE id = 11",  # in → out: a blank arrives
        f"UPDATE {table} SET id = id + 1000, name = 'STRASSE' WHERE id = 18",  # out → in under a new key
        f"UPDATE {table} SET id = id + 1000, name = 'strase' WHERE id = 17",  # in → out under a new key
        f"UPDATE {table} SET id = id + 1000 WHERE id = 16",  # in → in under a new key
        f"UPDATE {table} SET status = IF(status = 'paused', 'Actíve', 'paused') WHERE id BETWEEN 100 AND 200",
        f"UPDATE {table} SET id = id + 5000, region = 'EU' WHERE id BETWEEN 201 AND 230",
        f"DELETE FROM {table} WHERE id BETWEEN 231 AND 250 OR id = 3",
        database=database)
    _insert(mariadb, database, table, [(3000, "aCtIvE", "y", None, None, None, None),
                                       (3001, None, None, None, None, b"ab\x00\x00", None),
                                       (3002, None, None, "eu   ", b"m", None, None)])
    calls: list[int] = []
    answer = ServerComparisons.__call__

    def counted(self: ServerComparisons, questions: Sequence[Question]) -> list[int]:
        calls.append(len(questions))
        return answer(self, questions)

    monkeypatch.setattr(ServerComparisons, "__call__", counted)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    # The whole batch (hundreds of images over 18 transactions) asked the server once: its window's new values.
    assert len(calls) == 1 and calls[0] > 20, calls
    landed = delta(config, table)
    assert landed == expected(mariadb, database, table)
    ids = {row["id"] for row in landed}
    assert {1, 6, 13, 1018, 1016, 3000, 3002} <= ids and not {2, 5, 11, 1017, 17, 16} & ids

    # A collation change on a filtered column stops the table: the rows landed were chosen under the old one.
    sql(mariadb, f"ALTER TABLE {table} MODIFY status VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        f"INSERT INTO {table} ({COLUMNS}) VALUES (4000, 'Active', 'y', NULL, NULL, NULL, NULL)", database=database)
    pipeline.sync(until_caught_up=True)
    error = pipeline.read_state().tables[table].error
    assert error is not None and "collation" in error and "status" in error, error
    assert delta(config, table) == landed, "nothing landed past the DDL"


def test_binary_comparisons_in_python_agree_with_the_server(mariadb: Any, database: str) -> None:
    """The bytewise rules the binlog road applies in Python (cdc_lib.model.row_filter), asked of the live server."""
    rows = sql(mariadb,
               "SELECT CAST('ab' AS BINARY(4)) = 'ab', CAST('ab' AS BINARY(4)) = 'ab\\0\\0', "
               "CAST('k1 ' AS BINARY) = 'k1', CAST('a' AS BINARY) < 'ab', CAST(0xff AS BINARY) > 'a', "
               "CAST('AB' AS BINARY) = 'ab', CAST('é' AS BINARY) = 'é'", database=database)
    assert rows == [(0, 1, 0, 1, 1, 0, 1)]
    # Python's bytes agree, value by value.
    assert (b"ab\x00\x00" == b"ab", b"k1 " == b"k1", b"a" < b"ab", b"\xff" > b"a", b"AB" == b"ab") == (
        False, False, True, True, False)
