"""The test-side MySQL binlog encoder (tests/mysql_binlog_writer.py) against real MySQL bytes and a second decoder.

The encoder is written from MySQL's documented format, without binlake's decoder; these tests hold it to what real
servers wrote (the fixture files under tests/fixtures/mysql-binlogs/, re-encoded from the values PROVENANCE.md
gives for them, byte for byte) and to python-mysql-replication's own parser (its output, served by the protocol
stub, decoded back to the values written). So the fuzzer's inputs (bench/fuzz/mysql_fuzz.py) are MySQL's bytes,
not the encoder's private idea of them.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import zstandard
from pymysqlreplication import BinLogStreamReader

from tests.mysql_binlog_writer import (
    DELETE_ROWS,
    FORMAT_DESCRIPTION,
    JSON_INSERT,
    JSON_REMOVE,
    JSON_REPLACE,
    PARTIAL_UPDATE_ROWS,
    QUERY,
    TABLE_MAP,
    TRANSACTION_PAYLOAD,
    UPDATE_ROWS,
    WRITE_ROWS,
    XID,
    BinlogWriter,
    Column,
    JsonDiff,
    Table,
    binary_json,
    decimal_bytes,
    format_description,
    frame,
    gtid,
    query,
    rows_event,
    table_map,
    transaction_payload,
    xid,
)
from tests.mysql_stub import BinlogFile, MySQLStub

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs" / "rust_mysql_common"


def _fixture(name: str) -> BinlogFile:
    return BinlogFile.read(FIXTURES / name)


def _body(raw: bytes) -> bytes:
    """An event's body: after the common header, before the CRC32."""
    return raw[19:-4]


def test_format_description_is_mysql_8_0_32s_byte_for_byte() -> None:
    file = _fixture("transaction_compression.000001")
    real = file.format_description.raw
    timestamp, _, server_id, _, log_pos, flags = struct.unpack_from("<IBIIIH", real)
    mine = frame(FORMAT_DESCRIPTION, format_description("8.0.32", 0), server_id=server_id, log_pos=log_pos,
                 timestamp=timestamp, flags=flags)
    assert mine == real  # post-header lengths of types 1..41, CRC32 algorithm, and the checksum itself


# json.binlog.000001 (MySQL 8.0.22, binlog_row_metadata=MINIMAL): the table and rows PROVENANCE.md gives.
PEOPLE = Table(0x77, "mysql", "t", (
    Column("id", "int", nullable=False), Column("json_col", "json"), Column("name", "varchar(100)"),
    Column("age", "int"),
), ("id",))
NAMES = [("Joe", 24, "x"), ("Sue", 32, "y"), ("Pete", 40, "z")] * 2


def _person(key: int, name: str, age: int, letter: str) -> dict[str, Any]:
    return {"id": key, "json_col": {"name": name, "age": age, "data": letter * 10}, "name": name, "age": age}


def test_table_maps_are_mysqls_byte_for_byte() -> None:
    # binlog_row_metadata=FULL: DEFAULT_CHARSET, COLUMN_NAME, ENUM_AND_SET_DEFAULT_CHARSET, SET_STR_VALUE,
    # ENUM_STR_VALUE, COLUMN_VISIBILITY; CHAR(128) past 255 bytes, VARCHAR(300), ENUM, SET, TEXT.
    enum_set = Table(0x7C, "mysql", "t", (
        Column("f1", "char(128)"), Column("f2", "varchar(300)"), Column("f3", "enum('var1','variant2','foo')"),
        Column("f4", "set('one','two','three','four')"), Column("f5", "text"),
    ), ())
    assert table_map(enum_set) == _body(_fixture("mysql-enum-string-set.000001").events[8].raw)
    # binlog_row_metadata=MINIMAL: SIGNEDNESS and DEFAULT_CHARSET only; JSON is no character column.
    assert table_map(PEOPLE, column_names=False) == _body(_fixture("json.binlog.000001").events[8].raw)


def test_rows_events_with_binary_json_and_json_diffs_are_mysqls_byte_for_byte() -> None:
    events = _fixture("json.binlog.000001").events
    people = [_person(key, *person) for key, person in enumerate(NAMES, 1)]
    assert rows_event(WRITE_ROWS, PEOPLE, [people[0]]) == _body(events[9].raw)
    assert rows_event(WRITE_ROWS, PEOPLE, people[3:]) == _body(events[24].raw)
    older = [_person(key, name, age + 1, letter) for key, (name, age, letter) in enumerate(NAMES, 1)]
    assert rows_event(UPDATE_ROWS, PEOPLE, list(zip(people, older, strict=True))) == _body(events[29].raw)
    # PARTIAL_UPDATE_ROWS with a MINIMAL image: value_options 1, partial bits 0b1, REPLACE $.age with an int16.
    partial = [
        ({"id": key}, {"json_col": None, "name": name, "age": age + 2},
         {"json_col": [JsonDiff(JSON_REPLACE, "$.age", age + 2)]})
        for key, (name, age, _) in enumerate(NAMES, 1)
    ]
    mine = rows_event(PARTIAL_UPDATE_ROWS, PEOPLE, partial, before=["id"], after=["json_col", "name", "age"])
    assert mine == _body(events[34].raw)


def test_a_compressed_transaction_holds_mysqls_inner_events() -> None:
    """transaction_compression.000001 (8.0.32): the payload's header fields and its four inner events (no
    checksum, log_pos 0) are the ones this encoder writes; the compressed bytes themselves depend on the zstd
    build, so the frame is compared decompressed."""
    file = _fixture("transaction_compression.000001")
    anonymous, payload = file.events[2], file.events[3]
    assert _body(anonymous.raw) == gtid("00000000-0000-0000-0000-000000000000", 0, sequence=1, last_committed=0,
                                         flags=0, committed_us=0x0605BCFC8E6869, transaction_length=234,
                                         server_version=80032)
    table = Table(88, "test", "tb1", (Column("c1", "int"),), ())
    inner = [(QUERY, query("test", "BEGIN", thread_id=0x6B)), (TABLE_MAP, table_map(table, column_names=False)),
             (WRITE_ROWS, rows_event(WRITE_ROWS, table, [{"c1": 1}])), (XID, xid(462))]
    timestamp = struct.unpack_from("<I", payload.raw)[0]
    mine = transaction_payload(inner, server_id=1, timestamp=timestamp)

    def opened(body: bytes) -> tuple[bytes, bytes]:
        start = body.index(b"\x28\xb5\x2f\xfd")  # the zstd frame's magic number
        header = body[:start]
        # The last field before the end mark is the payload size: the compressed bytes' length.
        assert header[-4:] == bytes([1, 1, len(body) - start, 0])
        return header[:-4], b"".join(zstandard.ZstdDecompressor().read_to_iter(body[start:]))

    real_header, real_events = opened(_body(payload.raw))
    mine_header, mine_events = opened(mine)
    # compression type 0 (zstd), uncompressed size 179; the payload size differs with the compressor's output.
    assert real_header == mine_header == bytes.fromhex("0201000301b3")
    assert mine_events == real_events


@pytest.mark.parametrize(("value", "precision", "scale", "expected"), [
    # MySQL's own examples of decimal2bin (strings/decimal.cc): 1234567890.1234 as DECIMAL(14,4) and negated.
    (Decimal("1234567890.1234"), 14, 4, "810DFB38D204D2"),
    (Decimal("-1234567890.1234"), 14, 4, "7EF204C72DFB2D"),
    (Decimal("0.00"), 5, 2, "800000"),
])
def test_decimals_are_written_as_decimal2bin(value: Decimal, precision: int, scale: int, expected: str) -> None:
    assert decimal_bytes(value, precision, scale).hex().upper() == expected


def _library_form(value: Any) -> Any:
    """A JSON document as python-mysql-replication returns it: strings and keys as bytes."""
    if isinstance(value, dict):
        return {key.encode(): _library_form(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_library_form(item) for item in value]
    return value.encode() if isinstance(value, str) else value


def test_python_mysql_replication_decodes_what_the_encoder_writes() -> None:
    """Every column type and event the fuzzer uses, over two rotated files, read back by the library's own
    parser through the stub's COM_BINLOG_DUMP: the values that were written, and the partial JSON diffs."""
    table = Table(5, "shop", "t", (
        Column("id", "int", nullable=False), Column("u", "int unsigned"), Column("b", "bigint unsigned"),
        Column("n", "bigint"), Column("v", "varchar(70)"), Column("d", "decimal(20,6)"), Column("t", "datetime(6)"),
        Column("j", "json"), Column("e", "enum('a','b')"), Column("s", "set('x','y','z')"),
    ), ("id",))
    document = {"b": [1, 2.5, "x", None, True, False, {"k": -70000}], "aa": "é" * 40, "n": 2**63 + 5, "m": -2**40,
                "": 1e300}
    first: dict[str, Any] = {"id": 1, "u": 4_000_000_000, "b": 2**64 - 1, "n": -2**63, "v": "héllo ✓", "j": document,
             "d": Decimal("-12345678901234.000123"), "t": dt.datetime(2024, 2, 29, 23, 59, 58, 123456),
             "e": "b", "s": "x,z"}
    large = {**first, "j": {"big": "q" * 70_000, "list": list(range(5))}, "v": None}  # the large format
    writer = BinlogWriter(server_version="8.0.36")
    writer.transaction("shop", [(WRITE_ROWS, table, [first])])
    writer.transaction("shop", [(UPDATE_ROWS, table, [(first, large)])])
    writer.rotate()
    diffs = [JsonDiff(JSON_INSERT, "$.c", {"x": [1]}), JsonDiff(JSON_REMOVE, "$.list[1]")]
    writer.transaction("shop", [(PARTIAL_UPDATE_ROWS, table, [(large, large, {"j": diffs})])])
    writer.transaction("shop", [(DELETE_ROWS, table, [large])])
    files = [BinlogFile(name, bytes(data)) for name, data in writer.files]
    seen: list[tuple[str, Any]] = []
    with MySQLStub.serving(files, []) as stub:
        stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": stub.port, "user": stub.user, "passwd": stub.password},
            server_id=77, blocking=False, log_file=files[0].name, log_pos=4, resume_stream=True,
        )
        try:
            for event in stream:
                name = type(event).__name__
                if name == "GtidEvent":
                    seen.append((name, event.gtid))
                elif name == "RotateEvent" and event.packet.log_pos:
                    seen.append((name, event.next_binlog))
                elif hasattr(event, "rows"):  # each row without the library's `*none_sources` keys
                    seen.append((name, [{key: value for key, value in row.items() if key.endswith("values")}
                                        for row in event.rows]))
        finally:
            stream.close()
    uuid = writer.server_uuid
    gtids = [value for name, value in seen if name == "GtidEvent"]
    assert gtids == [f"{uuid}:{gno}" for gno in range(1, 5)]
    assert ("RotateEvent", "binlog.000002") in seen
    rows = [value for name, value in seen if name.endswith("RowsEvent")]
    # The library's forms: JSON strings and keys as bytes, a SET as a set of its labels.
    library = [{**row, "j": _library_form(row["j"]), "s": set(row["s"].split(","))} for row in (first, large)]
    assert rows[0] == [{"values": library[0]}]
    assert [(row["before_values"], row["after_values"]) for row in rows[1]] == [(library[0], library[1])]
    partial = rows[2][0]
    assert partial["before_values"] == library[1]
    # The library (1.0.17) parses a diff vector's first diff only (binlake reads the vector itself,
    # cdc_lib/binlog/json_diff.py); the columns after it decode right, so the vector's length holds.
    read = partial["after_values"]["j"]
    assert (read.op.value, read.path, read.value) == (JSON_INSERT, b"$.c", {b"x": [1]})
    assert {**partial["after_values"], "j": None} == {**library[1], "j": None}
    assert rows[3] == [{"values": library[1]}]


def test_binary_json_key_order_and_inlining() -> None:
    """Keys stored by length then bytes; int16 inlined in the value entry, a string placed after the keys."""
    assert binary_json({"bb": "s", "a": 7}) == bytes.fromhex(
        "00" "0200" "1700" "1200" "0100" "1300" "0200" "050700" "0c1500" "61" "6262" "0173")


def test_a_payload_of_the_none_compression_type_holds_the_events_as_they_are() -> None:
    raw = frame(XID, xid(9), server_id=1, log_pos=0, timestamp=0, checksum=False)
    assert transaction_payload([(XID, xid(9))], server_id=1, timestamp=0, compression=255) == (
        bytes([2, 3, 0xFC, 0xFF, 0, 3, 1, len(raw), 1, 1, len(raw), 0]) + raw)
    assert TRANSACTION_PAYLOAD == 40
