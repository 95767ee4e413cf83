"""Every character set the server has decodes, on every path, to exactly the text the server shows.

The oracle is the server itself: `CONVERT(col USING utf8mb4)`, read as hex (MariaDB's UTF-8 charsets keep
surrogate code points, which are not valid UTF-8). Codes come from tools/charset_tables.py: every byte of a
single-byte charset, every two- and three-byte code of the CJK charsets, every UCS-2/UTF-16 unit and BMP
code point with samples beyond — all the ones the server accepts.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from cdc_lib.binlog.batch import TableCursor
from cdc_lib.binlog.stream import open_stream, read_batch
from cdc_lib.binlog.table_rows import TableDecoder
from cdc_lib.config.model import BatchConfig
from cdc_lib.errors import SurrogateTextError, TableError
from cdc_lib.model import charset_tables, charsets
from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import ColumnInfo, spark_type_ddl
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.source.binlog_status import current_position
from cdc_lib.source.server import connect, describe_table
from tests.conftest import delta_rows, scan_rows, source_rows, sql
from tools.charset_tables import server_views

ROWS = 64


def _charsets(mariadb: Any) -> list[str]:
    return sorted(str(row[0]) for row in sql(mariadb, "SHOW CHARACTER SET") if row[0] != "binary")


def _views(mariadb: Any) -> dict[str, dict[bytes, str]]:
    connection = mariadb.admin_connection()
    try:
        return server_views(connection, _charsets(mariadb))
    finally:
        connection.close()


@pytest.fixture(scope="module")
def views(mariadb: Any) -> dict[str, dict[bytes, str]]:
    return _views(mariadb)


def _shown(server: Any, statement: str, *arguments: Any) -> list[str | None]:
    connection = server.admin_connection()
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement, arguments or None)
            return [None if hexed is None else bytes.fromhex(hexed).decode("utf-8", "surrogatepass")
                    for hexed, in cursor.fetchall()]
    finally:
        connection.close()


def test_every_charset_is_proven_code_by_code(mariadb, views) -> None:
    """Each well-formed code alone, and all of them back to back in a shuffled order, as the server shows them."""
    assert set(views) == {name for name in views if charsets.known(name)}, "a charset binlake does not know"
    assert not charset_tables.UNPROVEN
    shuffle = random.Random(7)
    for charset, view in views.items():
        assert len(view) >= 128, charset
        surrogates = {code for code, text in view.items() if _surrogate(text)}
        wrong = {code.hex(): (charsets.decode(code, charset), text)
                 for code, text in view.items() if code not in surrogates and charsets.decode(code, charset) != text}
        assert not wrong, f"{charset}: {len(wrong)} codes, e.g. {list(wrong.items())[:5]}"
        for code in surrogates:  # MariaDB keeps them in utf8mb3/utf8mb4/ucs2/utf32; Delta strings cannot
            with pytest.raises(charsets.CharsetError, match="surrogate code point"):
                charsets.decode(code, charset)
        codes = [code for code in view if code not in surrogates]
        shuffle.shuffle(codes)
        joined = b"".join(codes)
        [shown] = _shown(mariadb, f"SELECT HEX(CONVERT(CONVERT(%s USING {charset}) USING utf8mb4))", joined)
        assert charsets.decode(joined, charset) == shown, charset


def test_known_differences_from_pythons_codecs(views) -> None:
    assert charsets.decode(b"\x81\x8d\x8f\x90\x9d\x80", "latin1") == "\x81\x8d\x8f\x90\x9d€"
    assert charsets.decode(b"\x81\x60", "sjis") == "〜" and charsets.decode(b"\x81\x60", "cp932") == "～"
    assert charsets.decode(b"\x81\x5f", "sjis") == "\\"  # Python's shift_jis says '＼'
    assert charsets.decode("😀".encode("utf-16-be"), "utf16") == "😀"  # the library reads utf16 little-endian
    assert charsets.decode("😀".encode("utf-32-be"), "utf32") == "😀"
    with pytest.raises(charsets.CharsetError, match="U\\+D800"):
        charsets.decode(b"\xd8\x00\xdc\x00", "ucs2")  # two code points on the server: UCS-2 has no pairs
    assert b"\x81".decode(charsets.codec_name("latin1")) == "\x81"
    assert charsets.known("utf8") and charsets.known("UTF8MB4")  # utf8mb3's old name (MySQL < 8.0.30)
    spark_type_ddl(ColumnInfo("v", "varchar", "varchar(3)", True, character_set="utf8"))  # not refused


def _surrogate(text: str) -> bool:
    return any("\ud800" <= character <= "\udfff" for character in text)


def test_an_unproven_charset_is_refused_with_the_remedy(monkeypatch) -> None:
    monkeypatch.setitem(charset_tables.UNPROVEN, "koi8r", "the server's table changed")
    monkeypatch.delitem(charset_tables.SINGLE_BYTE, "koi8r")
    charsets.decoder.cache_clear()
    try:
        column = ColumnInfo("name", "varchar", "varchar(10)", True, character_set="koi8r")
        with pytest.raises(TableError, match="column 'name' has character set koi8r") as raised:
            spark_type_ddl(column, table="db.t")
        assert "ALTER TABLE db.t CONVERT TO CHARACTER SET utf8mb4" in str(raised.value)
        with pytest.raises(charsets.CharsetError):
            b"a".decode(charsets.codec_name("koi8r"))
        unknown = ColumnInfo("x", "text", "text", True, character_set="klingon")
        with pytest.raises(TableError, match="klingon"):
            spark_type_ddl(unknown, table="db.t")
    finally:
        charsets.decoder.cache_clear()


def test_latin1_bytes_cp1252_lacks_reach_the_batch_reader_as_the_server_shows_them(
    mariadb, database, make_config
) -> None:
    """0x81, 0x8D, 0x8F, 0x90, 0x9D: MySQL's latin1 has them, Python's cp1252 refuses them (one killed every sync)."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.l1 (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1, "
        "t TEXT CHARACTER SET latin1, e ENUM('caf\u00e9', '\u0081') CHARACTER SET latin1)")
    config = make_config([f"{db}.l1"])
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.l1"))
        start = current_position(connection)
    finally:
        connection.close()
    sql(mariadb, f"INSERT INTO {db}.l1 VALUES (1, _latin1 0x818D8F909D80E9, _latin1 0x9D41, 2), "
        f"(2, 'café', _latin1 0x81, 1)")
    expected = _server_text(mariadb, f"{db}.l1", ["v", "t", "e"])
    assert expected[0][1:] == ("\x81\x8d\x8f\x90\x9d€é", "\x9dA", "\x81")
    read = read_batch(config.source, [TableCursor(f"{db}.l1", start, schema)], BatchConfig())
    upserts = []
    for _, upsert in read.changes[f"{db}.l1"].rows.values():
        assert upsert is not None, "the batch holds inserts only"
        upserts.append(upsert)
    assert sorted(upserts) == expected

    decoder = TableDecoder.for_schema(schema)
    decoder.fast.library_only = True  # the library fallback, with binlake's converters
    stream = open_stream(config.source, start, events=[WriteRowsEvent], tables=[schema.table])
    library = []
    try:
        for event in stream:
            assert decoder.fast.images(event) is None
            library += [decoder.row(row["values"]) for row in event.rows]
    finally:
        stream.close()
    assert sorted(library) == expected


def _table(views: dict[str, dict[bytes, str]]) -> tuple[str, list[tuple[Any, ...]]]:
    """Columns: one TEXT per charset (plus latin1 VARCHAR, CHAR and ENUM); rows hold every code between them."""
    names = sorted(views)
    columns = ["id INT PRIMARY KEY"] + [f"c_{name} MEDIUMTEXT CHARACTER SET {name}" for name in names]
    columns += ["v_latin1 VARCHAR(300) CHARACTER SET latin1", "ch_latin1 CHAR(2) CHARACTER SET latin1",
                "e_latin1 ENUM('caf\u00e9', '\u0081x', '\u20ac') CHARACTER SET latin1",
                "v_sjis VARCHAR(40) CHARACTER SET sjis", "v_utf16 VARCHAR(40) CHARACTER SET utf16"]
    rows = []
    for row in range(ROWS):
        values: list[Any] = [row]
        for name in names:
            codes = [code for code, text in sorted(views[name].items()) if not _surrogate(text)]
            values.append(b"".join(codes[row::ROWS]))
        latin1 = bytes(range(row * 4, row * 4 + 4))
        values += [latin1 * 3, latin1[:2], 1 + row % 3, b"\x81\x60\x81\x5f\x5c" * (row % 3), "😀".encode("utf-16-be")]
        rows.append(tuple(values))
    return ", ".join(columns), rows


def _insert(mariadb: Any, table: str, rows: list[tuple[Any, ...]]) -> None:
    connection = mariadb.admin_connection()
    try:
        with connection.cursor() as cursor:
            marks = ", ".join(["%s"] * len(rows[0]))
            cursor.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    finally:
        connection.close()


def _server_text(mariadb: Any, table: str, names: list[str]) -> list[tuple[Any, ...]]:
    expressions = ", ".join(f"HEX(CONVERT(`{name}` USING utf8mb4))" for name in names)
    connection = mariadb.admin_connection()
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, {expressions} FROM {table} ORDER BY id")
            return [(row[0], *(None if value is None else bytes.fromhex(value).decode("utf-8", "surrogatepass")
                               for value in row[1:])) for row in cursor.fetchall()]
    finally:
        connection.close()


def _differences(expected: list[tuple[Any, ...]], got: list[tuple[Any, ...]], names: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    assert len(expected) == len(got)
    for want, have in zip(expected, got, strict=True):
        for name, left, right in zip(["id", *names], want, have, strict=True):
            if left != right and name not in found:
                found[name] = (want[0], left if left is None else left[:40], right if right is None else right[:40])
    return found


def test_binlog_fast_decoder_and_library_both_show_the_servers_text(mariadb, database, make_config, views) -> None:
    db = database
    columns, rows = _table(views)
    sql(mariadb, f"CREATE TABLE {db}.cs ({columns})")
    config = make_config([f"{db}.cs"])
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.cs"))
        start = current_position(connection)
    finally:
        connection.close()
    _insert(mariadb, f"{db}.cs", rows)
    sql(mariadb, f"UPDATE {db}.cs SET id = id + 1000 WHERE id < 4")
    names = [column.name for column in schema.columns[1:]]
    expected = _server_text(mariadb, f"{db}.cs", names)

    decoder = TableDecoder.for_schema(schema)
    fast: dict[int, tuple[Any, ...]] = {}
    library: dict[int, tuple[Any, ...]] = {}
    stream = open_stream(config.source, start, events=[WriteRowsEvent, UpdateRowsEvent], tables=[schema.table])
    try:
        for event in stream:
            update = isinstance(event, UpdateRowsEvent)
            images = decoder.fast.images(event) or []
            pairs = zip(images[::2], images[1::2], strict=True) if update else ((None, row) for row in images)
            for before, after in pairs:
                if before:
                    fast.pop(before[0], None)
                fast[after[0]] = after
            for row in event.rows:
                if update:
                    library.pop(decoder.row(row["before_values"])[0])
                decoded = decoder.row(row["after_values"] if update else row["values"])
                library[decoded[0]] = decoded
    finally:
        stream.close()
    assert decoder.fast.fallback_events == 0 and decoder.fast.unsupported is None
    for got in (fast, library):
        assert not _differences(expected, [got[key] for key in sorted(got)], names)


def test_snapshot_and_binlog_land_the_servers_text(mariadb, database, make_config, views) -> None:
    db = database
    columns, rows = _table(views)
    sql(mariadb, f"CREATE TABLE {db}.via_snapshot ({columns})", f"CREATE TABLE {db}.via_binlog ({columns})")
    _insert(mariadb, f"{db}.via_snapshot", rows)
    config = make_config([f"{db}.via_snapshot", f"{db}.via_binlog"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {db}.via_binlog SELECT * FROM {db}.via_snapshot")
    pipeline.sync(until_caught_up=True)

    names = [str(row[0]) for row in sql(mariadb, f"SHOW COLUMNS FROM {db}.via_snapshot")][1:]
    expected = _server_text(mariadb, f"{db}.via_snapshot", names)
    for table in ("via_snapshot", "via_binlog"):
        got = sorted(delta_rows(config, f"{db}.{table}"), key=lambda row: row[0])
        assert not _differences(expected, got, names), table


def test_a_surrogate_code_point_is_refused_by_name_on_the_binlog_path(mariadb, database, make_config) -> None:
    """MariaDB stores ED A0 80 in utf8mb4; no Delta string can hold it: the library path raises saying so."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.sg (id INT PRIMARY KEY, v VARCHAR(10) CHARACTER SET utf8mb4, "
        "u VARCHAR(10) CHARACTER SET ucs2)")
    config = make_config([f"{db}.sg"])
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.sg"))
        start = current_position(connection)
    finally:
        connection.close()
    sql(mariadb, f"INSERT INTO {db}.sg VALUES (1, UNHEX('41EDA08042'), 'a')", f"INSERT INTO {db}.sg VALUES "
        "(2, 'b', UNHEX('D800DC00'))")
    decoder = TableDecoder.for_schema(schema)
    stream = open_stream(config.source, start, events=[WriteRowsEvent], tables=[schema.table])
    try:
        for event in stream:
            assert decoder.fast.images(event) is None  # the fast decoder leaves it to the library ...
            with pytest.raises(charsets.CharsetError, match="surrogate code point U\\+D800"):
                event.rows  # noqa: B018 - ... which raises, naming the code point
    finally:
        stream.close()
    assert decoder.fast.fallback_events == 2


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_a_surrogate_code_point_stops_the_snapshot_by_name_and_neighbouring_text_stays_exact(
    mariadb, database, make_config, writer
) -> None:
    """The JDBC driver would hand over U+FFFD for a stored surrogate: the snapshot's read asks the server instead.
    Hangul shares the surrogates' UTF-8 lead byte (U+D7FB is ED 9F BB, one below U+D800), and a U+FFFD stored as
    such is text like any other: both must pass."""
    table = f"{database}.sgs"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(10) CHARACTER SET utf8mb4, "
        "u VARCHAR(10) CHARACTER SET ucs2, w VARCHAR(10) CHARACTER SET utf32, m VARCHAR(10) CHARACTER SET utf8mb3)",
        f"INSERT INTO {table} VALUES (1, '한국\U0000d7fb', '가\U0000d7fb', '😀\U0000d7fb', 'ퟻ'), "
        "(2, UNHEX('EFBFBD41'), UNHEX('FFFD0041'), UNHEX('0000FFFD00000041'), UNHEX('EFBFBD')), "
        "(3, NULL, NULL, NULL, NULL)")
    config = make_config([table], snapshot__writer=writer)
    pipeline = Pipeline(config)
    surrogates = {"v": "41EDA08042", "u": "0041DBFF", "w": "0000DC00", "m": "EDBFBF"}
    for column, hexed in surrogates.items() if writer == "spark" else [("v", surrogates["v"])]:
        sql(mariadb, f"UPDATE {table} SET {column} = UNHEX('{hexed}') WHERE id = 3")
        with pytest.raises(SurrogateTextError) as raised:
            pipeline.snapshot()
        assert (raised.value.table, raised.value.column) == (table, column)
        assert f"binlake snapshot --table {table}" in raised.value.remedy
        assert delta_log.read_log_tail(pipeline.table_path(table), application="-") is None, "nothing written"
        sql(mariadb, f"UPDATE {table} SET {column} = NULL WHERE id = 3")

    pipeline.snapshot()
    shown = source_rows(mariadb, table)
    assert shown[0][1] == "한국\ud7fb" and shown[1][1] == "\ufffdA"
    assert sorted(scan_rows(pipeline.table_path(table))) == shown
