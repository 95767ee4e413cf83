"""The generated row decoder yields exactly the rows the library path yields, on real MariaDB binlog events."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pymysqlreplication.row_event import TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.binlog.batch import TableCursor
from cdc_lib.binlog.stream import open_stream, read_batch
from cdc_lib.binlog.table_rows import TableDecoder
from cdc_lib.config.model import BatchConfig, PipelineConfig
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef
from cdc_lib.source.binlog_status import current_position
from cdc_lib.source.server import connect, describe_table
from tests.conftest import sql
from tests.integration.decoded_images import decode_both_ways
from tests.integration.type_rows import (
    COLUMNS,
    ROWS,
    TEMPORAL_COLUMNS,
    as_temporal_text,
    insert_temporal_rows,
    server_temporal_text,
)

# Beyond the parity table: every length-prefix size, charset, DECIMAL shape and fractional precision.
EXTRA_COLUMNS = """
    id INT PRIMARY KEY,
    ch255 CHAR(255) CHARACTER SET utf8mb4, vc300 VARCHAR(300), lat VARCHAR(20) CHARACTER SET latin1,
    mt MEDIUMTEXT, lb LONGBLOB, tb TINYBLOB, ttx TINYTEXT,
    d55 DECIMAL(5,5), d100 DECIMAL(10,0), d189 DECIMAL(18,9), d3019 DECIMAL(30,19), d65 DECIMAL(65,30),
    dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4), dt5 DATETIME(5),
    ts3 TIMESTAMP(3) NULL, tm1 TIME(1), tm3 TIME(3), tm5 TIME(5),
    b9 BIT(9), b16 BIT(16), n NUMERIC(7,3), e2 ENUM('x','y'), st8 SET('a','b','c','d','e','f','g','h','i')
"""
EXTRA_ROWS = [
    "(1, 'ü😀', REPEAT('é', 300), 'café', REPEAT('m', 70000), REPEAT(x'ab', 70000), x'00', 'tiny', "
    "-0.12345, -9999999999, 123456789.123456789, -12345678901.1234567890123456789, "
    "-12345678901234567890123456789012345.123456789012345678901234567890, "
    "'2020-01-01 00:00:00.1', '2020-01-01 00:00:00.12', '2020-01-01 00:00:00.123', '2020-01-01 00:00:00.1234', "
    "'2020-01-01 00:00:00.12345', '2001-02-03 04:05:06.789', '-12:34:56.7', '-00:00:01.123', '838:59:58.99999', "
    "b'100000001', b'1010101010101010', -1234.567, 'y', 'a,i')",
    "(2, '', '', '', '', '', '', '', 0, 0, 0, 0, 0, '9999-12-31 23:59:59.9', '1000-01-01', '1000-01-01', "
    "'1000-01-01', '1000-01-01', NULL, '00:00:00', '00:00:00', '-838:59:59', b'0', b'0', 0.001, 'x', '')",
    "(3" + ", NULL" * 26 + ")",
]
# With sql_mode '' MariaDB stores zero dates, an invalid ENUM as index 0 and YEAR 0.
ZERO_ROW = (
    "(4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'0', b'0', '', '', '', '', '', '', '', '', "
    "'0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000', '0000-00-00 00:00:00', "
    "'0000-00-00 00:00:00.000000', '00:00:00', '00:00:00', 0, '{}')"
)


def _position(config: PipelineConfig) -> BinlogPosition:
    connection = connect(config.source)
    try:
        return current_position(connection)
    finally:
        connection.close()


def _assert_same(fast: list, library: list, decoder: TableDecoder, *, images: int) -> None:
    assert decoder.fast.unsupported is None and decoder.fast.fallback_events == 0
    assert len(library) == images
    for number, (ours, theirs) in enumerate(zip(fast, library, strict=True)):
        differing = {index: pair for index, pair in enumerate(zip(ours, theirs, strict=True)) if pair[0] != pair[1]}
        assert not differing, f"image {number}: {differing}"


def test_every_parity_type_decodes_like_the_library(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t ({COLUMNS})")
    config = make_config([f"{db}.t"])
    start = _position(config)
    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES {', '.join(ROWS)}",
        "SET SESSION sql_mode = ''",
        f"INSERT INTO {db}.t VALUES {ZERO_ROW}",
        f"INSERT INTO {db}.t (id, e, st) VALUES (5, 'nonsense', '')",
        # Two images per row; NULLs appear and vanish, negatives flip, fractions move.
        f"UPDATE {db}.t SET ti = -ti, bi = bi + 1, dec_wide = -dec_wide, dt6 = NULL, js = '[1]', "
        "tm6 = '-00:00:00.000001', ts6 = '2038-01-19 03:14:07.999999', st = 'b', f = -f WHERE id IN (1, 2, 4)",
        f"UPDATE {db}.t SET c = 'now set', vc = '😀', biu = 9223372036854775808 WHERE id = 3",
        f"DELETE FROM {db}.t WHERE id IN (2, 5)",
    )
    fast, library, decoder = decode_both_ways(config, f"{db}.t", start)
    _assert_same(fast, library, decoder, images=6 + 3 * 2 + 2 + 2)
    biu = next(row for row in fast if row[0] == "3" and row[11] != "None")[11]
    assert biu == "Decimal('9223372036854775808')"
    zero = next(row for row in fast if row[0] == "4")
    assert zero[26:29] == ("None", "None", "None")  # zero DATE, DATETIME and DATETIME(6) are NULL, as before


def test_length_prefixes_charsets_decimals_and_fractions_decode_like_the_library(
    mariadb, database, make_config
) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.x ({EXTRA_COLUMNS})")
    config = make_config([f"{db}.x"])
    start = _position(config)
    sql(
        mariadb,
        f"INSERT INTO {db}.x VALUES {', '.join(EXTRA_ROWS)}",
        f"UPDATE {db}.x SET d65 = 0.000000000000000000000000000001, tm1 = '-838:59:59.9', lat = 'Ø' WHERE id < 3",
        f"DELETE FROM {db}.x WHERE id = 1",
    )
    fast, library, decoder = decode_both_ways(config, f"{db}.x", start)
    _assert_same(fast, library, decoder, images=3 + 2 * 2 + 1)
    assert fast[0][1] == repr("ü😀") and fast[0][5] == repr(b"\xab" * 70000)


def test_an_uncovered_type_falls_back_to_the_library(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.g (id INT PRIMARY KEY, p POINT, label VARCHAR(10))")
    config = make_config([f"{db}.g"])
    start = _position(config)
    sql(mariadb, f"INSERT INTO {db}.g VALUES (1, POINT(1, 2), 'a'), (2, NULL, 'b')",
        f"UPDATE {db}.g SET label = 'c' WHERE id = 1")
    fast, library, decoder = decode_both_ways(config, f"{db}.g", start)
    assert fast == [] and len(library) == 4
    assert decoder.fast.unsupported is not None and "binlog type 255" in decoder.fast.unsupported
    assert decoder.fast.decoded_events == 0 and decoder.fast.fallback_events == 2

    # The batch reader still carries every change, through the library.
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.g"))
    finally:
        connection.close()
    read = read_batch(config.source, [TableCursor(f"{db}.g", start, schema)], BatchConfig())
    changes = read.changes[f"{db}.g"]
    assert read.row_changes == 3 and changes.inserted == 2 and changes.updated == 1
    _, image = changes.rows[(1,)]
    assert image is not None and image[2] == "c"


def test_batch_reader_counts_and_folds_rows_from_the_fast_path(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.k (id INT PRIMARY KEY, v BIGINT UNSIGNED NOT NULL, s VARCHAR(5))")
    config = make_config([f"{db}.k"])
    start = _position(config)
    sql(mariadb, f"INSERT INTO {db}.k VALUES (1, 18446744073709551615, 'a'), (2, 2, NULL), (3, 3, 'c')",
        f"UPDATE {db}.k SET id = id + 10 WHERE id = 2",
        f"DELETE FROM {db}.k WHERE id = 3")
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.k"))
    finally:
        connection.close()
    read = read_batch(config.source, [TableCursor(f"{db}.k", start, schema)], BatchConfig())
    changes = read.changes[f"{db}.k"]
    assert read.row_changes == 5 and (changes.inserted, changes.updated, changes.deleted) == (3, 1, 1)
    assert changes.rows[(2,)] == ("delete", None) and changes.rows[(3,)] == ("delete", None)
    assert changes.rows[(12,)] == ("upsert", (12, Decimal(2), None))
    _, image = changes.rows[(1,)]
    assert image is not None and image[1] == Decimal(18446744073709551615)


def test_table_map_is_what_the_decoder_follows(mariadb, database, make_config) -> None:
    """An added column changes the table map; the decoder defers to the library, which reports the change."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v INT)")
    config = make_config([f"{db}.a"])
    start = _position(config)
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.a"))
    finally:
        connection.close()
    sql(mariadb, f"INSERT INTO {db}.a VALUES (1, 1)", f"ALTER TABLE {db}.a ADD COLUMN w INT",
        f"INSERT INTO {db}.a VALUES (2, 2, 2)")
    decoder = TableDecoder.for_schema(schema)
    stream = open_stream(config.source, start, events=[WriteRowsEvent, TableMapEvent], tables=[schema.table])
    outcomes, once_the_library_read = [], []
    try:
        for event in stream:
            if isinstance(event, WriteRowsEvent):
                outcomes.append(decoder.fast.images(event))
                assert event.rows
                once_the_library_read.append(decoder.fast.images(event))
    finally:
        stream.close()
    assert outcomes == [[(1, 1)], None]
    assert once_the_library_read == [None, None]  # the packet is past the rows then: never decode nothing
    assert decoder.fast.unsupported == "the binlog's columns differ from the table schema"


def test_temporal_edges_decode_as_the_server_shows_them_on_both_paths(mariadb, database, make_config) -> None:
    """Fast decoder and library each against the server's CAST(… AS CHAR), not against each other."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.tm ({TEMPORAL_COLUMNS})")
    config = make_config([f"{db}.tm"])
    start = _position(config)
    insert_temporal_rows(mariadb, f"{db}.tm")
    expected = server_temporal_text(mariadb, f"{db}.tm")
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(f"{db}.tm"))
    finally:
        connection.close()
    decoder = TableDecoder.for_schema(schema)
    fast: list[tuple] = []
    library: list[tuple] = []
    stream = open_stream(config.source, start, events=[WriteRowsEvent], tables=[schema.table])
    try:
        for event in stream:
            fast.extend(as_temporal_text(row) for row in decoder.fast.images(event) or [])
            library.extend(as_temporal_text(decoder.row(row["values"])) for row in event.rows)
    finally:
        stream.close()
    assert decoder.fast.fallback_events == 0
    for path, got in (("fast", fast), ("library", library)):
        assert len(got) == len(expected), path
        wrong = {(want[0], index): (left, right) for want, have in zip(expected, got, strict=True)
                 for index, (left, right) in enumerate(zip(want, have, strict=True)) if left != right}
        assert not wrong, (path, wrong)


def test_a_table_map_is_parsed_once_per_reader_and_an_altered_one_anew(mariadb, database, make_config,
                                                                          monkeypatch) -> None:
    """Equal table-map bytes reuse the first parse (the same `Table`); an ALTER's new map is parsed, not reused."""
    from cdc_lib.binlog import replication_library

    db = database
    sql(mariadb, f"CREATE TABLE {db}.m (id INT PRIMARY KEY, amount DECIMAL(7,2) NOT NULL, note VARCHAR(9))")
    config = make_config([f"{db}.m"])
    start = _position(config)
    statements = []
    for number in range(1, 13):
        statements += ["BEGIN", f"INSERT INTO {db}.m VALUES ({number}, {number}2.25, 'n{number}')",
                       f"UPDATE {db}.m SET amount = -amount WHERE id = {number}", "COMMIT"]
    sql(mariadb, *statements, f"ALTER TABLE {db}.m ADD COLUMN w INT", f"INSERT INTO {db}.m VALUES (13, 1.5, 'x', 7)")
    parsed: list[str] = []
    library = replication_library.parse_table_map

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        library(self, *args, **kwargs)
        parsed.append(self.table)

    monkeypatch.setattr(replication_library, "parse_table_map", counting)
    stream = open_stream(config.source, start, events=[WriteRowsEvent, UpdateRowsEvent, TableMapEvent],
                         tables=[TableRef.parse(f"{db}.m")])
    tables: list[Any] = []
    widths: list[int] = []
    rows: list[dict[str, Any]] = []
    try:
        for event in stream:
            if isinstance(event, TableMapEvent):
                tables.append(event.get_table())
                widths.append(event.column_count)
            else:
                rows.extend(row.get("values", row.get("after_values")) for row in event.rows)
    finally:
        stream.close()
    assert len(tables) == 25 and parsed == ["m", "m"]  # 24 maps of the first shape, then the ALTERed one
    assert all(table is tables[0] for table in tables[:24]) and tables[24] is not tables[0]
    assert widths == [3] * 24 + [4]
    assert rows[:2] == [{"id": 1, "amount": Decimal("12.25"), "note": "n1"},
                        {"id": 1, "amount": Decimal("-12.25"), "note": "n1"}]
    assert rows[-1] == {"id": 13, "amount": Decimal("1.50"), "note": "x", "w": 7}
    assert rows[22:24] == [{"id": 12, "amount": Decimal("122.25"), "note": "n12"},
                           {"id": 12, "amount": Decimal("-122.25"), "note": "n12"}]
