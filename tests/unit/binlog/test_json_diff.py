"""MySQL partial JSON updates (PARTIAL_UPDATE_ROWS): the path grammar, the diff vector, the three operations, and
the real MySQL 8.0.22 file `rust_mysql_common/json.binlog.000001` (its event #35, described in
tests/fixtures/mysql-binlogs/ and ../shared/fixtures/mysql-binlogs/PROVENANCE.md)."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pymysql.protocol import MysqlPacket
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import PartialUpdateRowsEvent, TableMapEvent, UpdateRowsEvent

from cdc_lib.binlog.batch import BinlogRead, TableCursor
from cdc_lib.binlog.event_types import EVENT_TYPES
from cdc_lib.binlog.json_diff import (
    INSERT,
    REMOVE,
    REPLACE,
    Cell,
    DiffNotApplicable,
    JsonDiff,
    Member,
    apply_diffs,
    parse_path,
    path_text,
    read_diffs,
)
from cdc_lib.binlog.replication_library import parse_binary_json, rebuilt_rows_event
from cdc_lib.binlog.table_rows import TableDecoder, fold_rows
from cdc_lib.changes.events import TableChanges
from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import UnreadableEventError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, binlog_converter

FIXTURE = Path(__file__).parents[2] / "fixtures" / "mysql-binlogs" / "rust_mysql_common" / "json.binlog.000001"


def diff(operation: int, path: str, value: Any = None) -> JsonDiff:
    return JsonDiff(operation, path, parse_path(path), value)


# -- the path grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "legs"),
    [
        ("$", ()),
        ("$.age", (Member("age"),)),
        ('$."a b".c[3]', (Member("a b"), Member("c"), Cell(3))),
        ("$[last]", (Cell(0, from_end=True),)),
        ("$[last - 2]", (Cell(2, from_end=True),)),
        (" $ . a [ 10 ] ", (Member("a"), Cell(10))),
        ('$."caf\\u00e9"."x\\"y"', (Member("café"), Member('x"y'))),
        ("$.naïve", (Member("naïve"),)),
    ],
)
def test_paths_parse_to_their_legs(text: str, legs: tuple[Any, ...]) -> None:
    assert parse_path(text) == legs


@pytest.mark.parametrize("text", ["$.*", "$[*]", "$**.a", "$[1 to 2]", "a.b", "$[", "$.a\"", "$[-1]", "$[last+1]", ""])
def test_wildcards_ranges_and_non_paths_are_refused(text: str) -> None:
    with pytest.raises(DiffNotApplicable):
        parse_path(text)


def test_path_text_round_trips() -> None:
    for text in ("$", "$.age", '$."a b"[last-2][0]."é"', "$[last]"):
        assert path_text(parse_path(text)) == text


# -- the three operations ---------------------------------------------------------------------
# Documents in python-mysql-replication's form: keys and strings as bytes, members ordered as MySQL stores them
# (by key length, then bytes).


def document() -> dict[bytes, Any]:
    return {
        b"n": -3,
        b"id": 7,
        b"arr": [10, 20, 30, 40],
        b"caf\xc3\xa9": b"cr\xc3\xa8me",
        b"nested": {b"x": {b"y": -1, b"zz": [1, [2, 3]]}},
    }


def test_replace_changes_only_the_named_value() -> None:
    before = document()
    after = apply_diffs(before, [diff(REPLACE, "$.nested.x.y", 5), diff(REPLACE, "$.n", 3)])
    assert after == {**document(), b"n": 3, b"nested": {b"x": {b"y": 5, b"zz": [1, [2, 3]]}}}
    assert before == document()  # the before image is left as it was
    assert apply_diffs(before, [diff(REPLACE, '$."café"', b"th\xc3\xa9")])[b"caf\xc3\xa9"] == b"th\xc3\xa9"


@pytest.mark.parametrize(
    ("path", "cells"),
    [("$.arr[0]", [99, 20, 30, 40]), ("$.arr[2]", [10, 20, 99, 40]), ("$.arr[last]", [10, 20, 30, 99]),
     ("$.arr[last-3]", [99, 20, 30, 40]), ("$.arr[last - 1]", [10, 20, 99, 40])],
)
def test_replace_array_cells_by_index_and_from_the_end(path: str, cells: list[int]) -> None:
    assert apply_diffs(document(), [diff(REPLACE, path, 99)])[b"arr"] == cells


@pytest.mark.parametrize(
    ("path", "cells"),
    [("$.arr[0]", [99, 10, 20, 30, 40]), ("$.arr[1]", [10, 99, 20, 30, 40]), ("$.arr[4]", [10, 20, 30, 40, 99]),
     ("$.arr[100]", [10, 20, 30, 40, 99]), ("$.arr[last]", [10, 20, 30, 99, 40]),
     ("$.arr[last-1]", [10, 20, 99, 30, 40]), ("$.arr[last-9]", [99, 10, 20, 30, 40])],
)
def test_insert_into_an_array_as_json_array_insert(path: str, cells: list[int]) -> None:
    assert apply_diffs(document(), [diff(INSERT, path, 99)])[b"arr"] == cells


def test_insert_a_member_keeps_mysqls_member_order() -> None:
    after = apply_diffs(document(), [diff(INSERT, "$.b", [1]), diff(INSERT, '$."é"', 2), diff(INSERT, "$.zzzz", 0)])
    assert list(after) == [b"b", b"n", b"id", b"\xc3\xa9", b"arr", b"zzzz", b"caf\xc3\xa9", b"nested"]
    assert after[b"b"] == [1] and after[b"\xc3\xa9"] == 2 and after[b"zzzz"] == 0
    nested = apply_diffs(document(), [diff(INSERT, "$.nested.x.zz[1][0]", -2)])
    assert nested[b"nested"] == {b"x": {b"y": -1, b"zz": [1, [-2, 2, 3]]}}


def test_remove_members_and_cells() -> None:
    after = apply_diffs(document(), [diff(REMOVE, "$.arr[last]"), diff(REMOVE, "$.arr[0]"), diff(REMOVE, "$.n"),
                                     diff(REMOVE, "$.nested.x.zz[1][1]")])
    assert after == {b"id": 7, b"arr": [20, 30], b"caf\xc3\xa9": b"cr\xc3\xa8me",
                     b"nested": {b"x": {b"y": -1, b"zz": [1, [2]]}}}


def test_diffs_apply_in_order() -> None:
    # Removing cell 0 and then replacing cell 0 touches two different cells, as on the server.
    after = apply_diffs(document(), [diff(REMOVE, "$.arr[0]"), diff(REPLACE, "$.arr[0]", 0)])
    assert after[b"arr"] == [0, 30, 40]


@pytest.mark.parametrize(
    "change",
    [
        diff(REPLACE, "$.missing", 1),
        diff(REPLACE, "$.arr[4]", 1),
        diff(REPLACE, "$.arr[last-4]", 1),
        diff(REPLACE, "$", 1),  # the root: MySQL logs a whole new document in full, and rejects this diff
        diff(INSERT, "$.id", 8),  # a member the document has: MySQL rejects it
        diff(REPLACE, "$.id[0]", 1),  # no auto-wrap of a scalar into a one-cell array, as in MySQL's seek
        diff(REPLACE, "$.arr.x", 1),
        diff(REMOVE, "$.missing.x"),
        diff(REMOVE, "$"),
        diff(INSERT, "$", 1),
        diff(INSERT, "$.missing.x", 1),
        diff(INSERT, "$.arr.x", 1),
        diff(INSERT, "$.nested[0]", 1),
    ],
)
def test_what_cannot_be_applied_exactly_is_refused(change: JsonDiff) -> None:
    with pytest.raises(DiffNotApplicable):
        apply_diffs(document(), [change])


# -- the diff vector ----------------------------------------------------------------------------


def packed(length: int) -> bytes:
    if length < 251:
        return bytes([length])
    return b"\xfc" + length.to_bytes(2, "little")


def vector_entry(operation: int, path: str, value: bytes | None = None) -> bytes:
    raw = path.encode()
    entry = bytes([operation]) + packed(len(raw)) + raw
    return entry if value is None else entry + packed(len(value)) + value


def int16(value: int) -> bytes:
    return b"\x05" + struct.pack("<h", value)


def json_string(text: str) -> bytes:
    raw = text.encode()
    return b"\x0c" + bytes([len(raw)]) + raw


def test_a_vector_of_several_diffs_reads_whole() -> None:
    long_member = "m" * 300
    data = (vector_entry(REPLACE, "$.age", int16(-26)) + vector_entry(INSERT, '$."ä b"', json_string("ü"))
            + vector_entry(REMOVE, "$.data") + vector_entry(REPLACE, f"$.{long_member}", int16(1)))
    assert read_diffs(data, parse_binary_json) == [
        diff(REPLACE, "$.age", -26), diff(INSERT, '$."ä b"', "ü"), diff(REMOVE, "$.data"),
        diff(REPLACE, f"$.{long_member}", 1),
    ]
    assert read_diffs(b"", parse_binary_json) == []  # an unchanged partial column


@pytest.mark.parametrize(
    "data",
    [
        vector_entry(3, "$.a", int16(1)),  # no such operation
        vector_entry(REPLACE, "$.a", int16(1))[:-1],  # cut short
        vector_entry(REPLACE, "$.a", int16(1)) + b"\x00",  # a diff cut short after the first
        vector_entry(REPLACE, "$.a", b""),  # no value
        vector_entry(REPLACE, "$.a", b"\x0e\x00"),  # no binary JSON type 0x0e
        vector_entry(REMOVE, "$[1 to 2]"),
    ],
)
def test_a_vector_that_is_not_what_the_server_writes_is_refused(data: bytes) -> None:
    with pytest.raises(DiffNotApplicable):
        read_diffs(data, parse_binary_json)


# -- the real file ------------------------------------------------------------------------------

EVENT_HEADER = struct.Struct("<IBIIIH")


def events(data: bytes) -> list[tuple[int, bytes]]:
    """(type, whole event bytes) of each event of a binlog file."""
    found, pos = [], 4
    while pos < len(data):
        size = EVENT_HEADER.unpack_from(data, pos)[3]
        found.append((data[pos + 4], data[pos:pos + size]))
        pos += size
    return found


def full_image(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
    """One full row image of mysql.t (id INT, json_col JSON, name VARCHAR(100), age INT) with no NULLs."""
    assert data[pos] == 0
    pos += 1
    row_id = struct.unpack_from("<i", data, pos)[0]
    length = struct.unpack_from("<I", data, pos + 4)[0]
    document = parse_binary_json(data[pos + 8:pos + 8 + length])
    pos += 8 + length
    name_length = struct.unpack_from("<H", data, pos)[0]
    name = data[pos + 2:pos + 2 + name_length].decode()
    pos += 2 + name_length
    age = struct.unpack_from("<i", data, pos)[0]
    return {"id": row_id, "json_col": document, "name": name, "age": age}, pos + 4


def fixture_events() -> list[tuple[int, bytes]]:
    return events(FIXTURE.read_bytes())


def update_documents() -> dict[int, Any]:
    """The documents after event #30 (the UPDATE_ROWS with full images), by id: what a table holds before #35."""
    body = next(event for code, event in fixture_events() if code == 31)[19:]
    images = body[8 + 2 + 1 + 2:-4]  # table id, flags, extra data (2 bytes); column count; two bitmaps
    documents, pos = {}, 0
    while pos < len(images):
        _, pos = full_image(images, pos)
        after, pos = full_image(images, pos)
        documents[after["id"]] = after["json_col"]
    return documents


def partial_rows() -> list[tuple[int, bytes, str, int]]:
    """Event #35's rows: (id from the before image, the @2 diff vector, @3, @4)."""
    body = next(event for code, event in fixture_events() if code == 39)[19:]
    assert body[10] == 4 and body[11] == 0b0001 and body[12] == 0b1110  # minimal before, after without @1
    images, rows, pos = body[13:-4], [], 0
    while pos < len(images):
        assert images[pos] == 0  # before: null bitmap, then @1 only
        row_id = struct.unpack_from("<i", images, pos + 1)[0]
        pos += 5
        assert images[pos:pos + 3] == b"\x01\x01\x00"  # value_options PARTIAL_JSON_UPDATES, partial bits, nulls
        pos += 3
        length = struct.unpack_from("<I", images, pos)[0]
        vector = images[pos + 4:pos + 4 + length]
        pos += 4 + length
        name_length = struct.unpack_from("<H", images, pos)[0]
        name = images[pos + 2:pos + 2 + name_length].decode()
        pos += 2 + name_length
        rows.append((row_id, vector, name, struct.unpack_from("<i", images, pos)[0]))
        pos += 4
    return rows


AGES = [26, 34, 42, 26, 34, 42]


def test_event_35_holds_the_diffs_provenance_lists() -> None:
    rows = partial_rows()
    assert [row[0] for row in rows] == [1, 2, 3, 4, 5, 6]
    assert [read_diffs(vector, parse_binary_json) for _, vector, _, _ in rows] == [
        [diff(REPLACE, "$.age", age)] for age in AGES
    ]
    assert [(name, age) for _, _, name, age in rows] == list(zip(["Joe", "Sue", "Pete"] * 2, AGES, strict=True))


def test_event_35_applied_to_the_documents_before_it_gives_the_final_ages() -> None:
    json_text = binlog_converter(ColumnInfo("json_col", "json", "json", True))
    assert json_text is not None
    before = update_documents()
    assert [before[row_id]["age"] for row_id in range(1, 7)] == [25, 33, 41, 25, 33, 41]
    after = {row_id: apply_diffs(before[row_id], read_diffs(vector, parse_binary_json))
             for row_id, vector, _, _ in partial_rows()}
    assert [after[row_id]["age"] for row_id in range(1, 7)] == AGES
    # The text binlake writes, as for a full image of the same document.
    assert json_text(after[1]) == '{"age": 26, "data": "xxxxxxxxxx", "name": "Joe"}'
    assert json_text(after[6]) == '{"age": 42, "data": "zzzzzzzzzz", "name": "Pete"}'


# -- through python-mysql-replication and the fold --------------------------------------------

SCHEMA = TableSchema(
    TableRef.parse("mysql.t"),
    (ColumnInfo("id", "int", "int", False), ColumnInfo("json_col", "json", "json", True),
     ColumnInfo("name", "varchar", "varchar(100)", True, character_set="utf8mb4"),
     ColumnInfo("age", "int", "int", True)),
    ("id",),
)


def library_event(raw: bytes, table_map: dict[int, Any]) -> Any:
    """The library's event for one event's bytes, read as the stream reads it (checksums on)."""
    connection = SimpleNamespace(charset="utf8mb4", _get_dbms=lambda: "mysql")
    wrapper = BinLogPacketWrapper(
        MysqlPacket(b"\x00" + raw, "utf8"), table_map, connection, (8, 0, 22), True,
        frozenset({TableMapEvent, PartialUpdateRowsEvent, UpdateRowsEvent}), None, None, None, None, False, False,
        False, True, False,
    )
    return wrapper.event


def table_map() -> dict[int, Any]:
    tables: dict[int, Any] = {}
    raw = next(event for code, event in fixture_events() if code == 19)
    library_event(raw, tables)
    for column, name in zip(tables[119].columns, SCHEMA.column_names, strict=True):
        column.name = name  # the file's metadata has no column names; the schema would give them
    return tables


def with_body(raw: bytes, body: bytes) -> bytes:
    """An event with another body: its size fixed, and a checksum the reader does not verify."""
    header = bytearray(raw[:19])
    struct.pack_into("<I", header, 9, 19 + len(body) + 4)
    return bytes(header) + body + b"\0\0\0\0"


def full_image_event(vectors: dict[int, bytes]) -> bytes:
    """Event #35 as binlog_row_image=FULL writes it: full before images (from #30's after images) and full after
    images, @2 holding the diff vector given per id."""
    raw = next(event for code, event in fixture_events() if code == 39)
    before = update_documents()
    header = raw[19:19 + 10] + b"\x04\x0f\x0f"
    rows = b""
    for row_id, _, name, age in partial_rows():
        rows += _full_row(row_id, _binary_document(before[row_id]), name, age - 1)
        vector = vectors[row_id]
        rows += b"\x01\x01\x00" + struct.pack("<i", row_id) + struct.pack("<I", len(vector)) + vector
        rows += struct.pack("<H", len(name)) + name.encode() + struct.pack("<i", age)
    return with_body(raw, header + rows)


def _full_row(row_id: int, document: bytes, name: str, age: int) -> bytes:
    return (b"\x00" + struct.pack("<i", row_id) + struct.pack("<I", len(document)) + document
            + struct.pack("<H", len(name)) + name.encode() + struct.pack("<i", age))


def _binary_document(document: Any) -> bytes:
    """#30's after documents in MySQL's binary JSON: taken from the file itself, by id."""
    body = next(event for code, event in fixture_events() if code == 31)[19:]
    images, pos = body[8 + 2 + 1 + 2:-4], 0
    while pos < len(images):
        _, pos = full_image(images, pos)
        start = pos + 5
        after, pos = full_image(images, pos)
        length = struct.unpack_from("<I", images, start)[0]
        if after["json_col"] == document:
            return images[start + 4:start + 4 + length]
    raise AssertionError("no such document")


def test_the_real_minimal_image_event_stops_the_table_with_the_remedy() -> None:
    raw = next(event for code, event in fixture_events() if code == 39)
    event = library_event(raw, table_map())
    with pytest.raises(UnreadableEventError, match="before image without every column.*old JSON document") as raised:
        fold_rows(event, TableDecoder.for_schema(SCHEMA), TableChanges((0,)))
    assert "binlog_row_image=FULL" in raised.value.remedy


def test_a_full_image_partial_update_folds_to_the_full_after_documents() -> None:
    assert EVENT_TYPES[39].handling == "rows"
    vectors = {row_id: vector for row_id, vector, _, _ in partial_rows()}
    # Row 1 gets three diffs in one vector: python-mysql-replication alone would keep only the first.
    vectors[1] = (vector_entry(REPLACE, "$.age", int16(26)) + vector_entry(INSERT, "$.city", json_string("Zürich"))
                  + vector_entry(REMOVE, "$.data"))
    event = library_event(full_image_event(vectors), table_map())
    changes = TableChanges((0,))
    assert fold_rows(event, TableDecoder.for_schema(SCHEMA), changes) == 6
    rows = sorted((row for _, row in changes.rows.values() if row is not None), key=lambda row: row[0])
    assert [row[3] for row in rows] == AGES
    assert rows[0][1] == '{"age": 26, "city": "Zürich", "name": "Joe"}'
    assert rows[1][1] == '{"age": 34, "data": "yyyyyyyyyy", "name": "Sue"}'
    assert rows[5][1] == '{"age": 42, "data": "zzzzzzzzzz", "name": "Pete"}'


def test_a_diff_the_old_document_cannot_take_stops_the_table() -> None:
    vectors = {row_id: vector for row_id, vector, _, _ in partial_rows()}
    vectors[4] = vector_entry(REPLACE, "$.address.city", json_string("x"))
    event = library_event(full_image_event(vectors), table_map())
    with pytest.raises(UnreadableEventError, match="'json_col' cannot be applied exactly") as raised:
        fold_rows(event, TableDecoder.for_schema(SCHEMA), TableChanges((0,)))
    assert "binlog_row_value_options=''" in raised.value.remedy


def binlog_read() -> BinlogRead:
    source = SourceConfig(host="h", port=1, user="u", password="p", server_id=1, tables=("mysql.t",))
    return BinlogRead(source, [TableCursor("mysql.t", BinlogPosition("json.binlog.000001", 3691), SCHEMA)], None)


def test_the_read_stops_only_the_table_at_a_minimal_image_with_the_remedy() -> None:
    read = binlog_read()
    read.rows_event(library_event(next(event for code, event in fixture_events() if code == 39), table_map()))
    failure = read.result.table_errors["mysql.t"]
    assert isinstance(failure.error, UnreadableEventError)  # not a generic RowDecodeError: the remedy is kept
    assert "binlog_row_image=FULL" in failure.error.remedy


def test_the_read_folds_a_full_image_partial_update() -> None:
    read = binlog_read()
    vectors = {row_id: vector for row_id, vector, _, _ in partial_rows()}
    read.rows_event(library_event(full_image_event(vectors), table_map()))
    assert read.result.table_errors == {}
    assert read.transaction is not None
    changes = read.transaction.changes_for("mysql.t")
    assert sorted((row[0], row[3]) for _, row in changes.rows.values() if row is not None) == list(
        zip(range(1, 7), AGES, strict=True))


def test_a_plain_update_with_minimal_images_stops_the_table_instead_of_writing_nulls() -> None:
    # A session may log MINIMAL images although the global setting is FULL (the fixture's own session did):
    # an UPDATE_ROWS_V2 of mysql.t with @1 alone before and @4 alone after, built from event #35's header.
    raw = next(event for code, event in fixture_events() if code == 39)
    rows = b"".join(b"\x00" + struct.pack("<i", row_id) + b"\x00" + struct.pack("<i", age)
                    for row_id, age in zip(range(1, 7), AGES, strict=True))
    minimal = bytearray(with_body(raw, raw[19:19 + 10] + b"\x04\x01\x08" + rows))
    minimal[4] = 31
    event = library_event(bytes(minimal), table_map())
    assert isinstance(event, UpdateRowsEvent) and event.event_type == 31
    changes = TableChanges((0,))
    with pytest.raises(UnreadableEventError, match="before image without every column") as raised:
        fold_rows(event, TableDecoder.for_schema(SCHEMA), changes)
    assert "binlog_row_image=FULL" in raised.value.remedy
    assert changes.rows == {}


def test_a_rebuilt_partial_update_event_is_not_dropped() -> None:
    """A PARTIAL_UPDATE_ROWS rebuilt from decompressed bytes (the MySQL TRANSACTION_PAYLOAD path) stays an event."""
    settings = {"use_checksum": True, "only_tables": None, "ignored_tables": None, "only_schemas": None,
                "ignored_schemas": None, "freeze_schema": False, "ignore_decode_errors": False,
                "optional_meta_data": True, "use_column_name_cache": False, "post_header_lengths": None}
    stream = SimpleNamespace(
        _ctl_connection=SimpleNamespace(charset="utf8mb4", encoding="utf8", _get_dbms=lambda: "mysql"),
        table_map=table_map(), mysql_version=(8, 0, 22),
        **{f"_BinLogStreamReader__{name}": value for name, value in settings.items()},
    )
    vectors = {row_id: vector for row_id, vector, _, _ in partial_rows()}
    event = rebuilt_rows_event(stream, b"\x00" + full_image_event(vectors))
    assert isinstance(event, PartialUpdateRowsEvent)
    changes = TableChanges((0,))
    assert fold_rows(event, TableDecoder.for_schema(SCHEMA), changes) == 6
