"""MySQL's compressed transactions (binlog_transaction_compression=ON, TRANSACTION_PAYLOAD events; issue 27).

Against two binlog files real MySQL servers wrote (tests/fixtures/mysql-binlogs/, copied byte-exact with their
licenses; the expected values are those the fixtures' PROVENANCE lists): the payload header and the inner
events, then the whole read path (`read_batch`) streaming each file from a MySQL-protocol stub, as a MySQL
server's binlog dump sends it.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from cdc_lib.binlog.batch import BinlogRead, SpillPlan, TableCursor
from cdc_lib.binlog.payload import PayloadError, PayloadTooLargeError, inner_events, parse_header
from cdc_lib.binlog.probes import columns_after_ddl
from cdc_lib.binlog.stream import PayloadsOpened, open_stream, read_batch
from cdc_lib.config.model import BatchConfig, SourceConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError, UnreadableEventError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.snapshot.correction import SnapshotWindowError, scan_window
from tests.mysql_stub import COM_BINLOG_DUMP, COM_QUERY, MySQLStub, _ok, _result_set, _Wire

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mysql-binlogs"
RUST = FIXTURES / "rust_mysql_common" / "transaction_compression.000001"
JAVA = FIXTURES / "mysql-binlog-connector-java" / "mysql-bin.compressed"
PAYLOAD, QUERY, TABLE_MAP, WRITE_ROWS_V2, UPDATE_ROWS_V2, XID, ROTATE = 40, 2, 19, 30, 31, 16, 4


def events(path: Path) -> list[bytes]:
    """The file's events (header, body, CRC32), in order."""
    data = path.read_bytes()
    assert data[:4] == b"\xfebin"
    found, offset = [], 4
    while offset < len(data):
        size = int.from_bytes(data[offset + 9: offset + 13], "little")
        found.append(data[offset: offset + size])
        offset += size
    return found


def payload_of(path: Path) -> bytes:
    (payload,) = [event for event in events(path) if event[4] == PAYLOAD]
    return payload


def body(event: bytes) -> bytes:
    return event[19:-4]  # the files are written with CRC32 checksums


def end_pos(event: bytes) -> int:
    return int.from_bytes(event[13:17], "little")


# -- the payload event ---------------------------------------------------------------------------


def test_payload_headers_of_both_files() -> None:
    rust = parse_header(body(payload_of(RUST)))
    assert (rust.compression_type, rust.payload_size, rust.uncompressed_size) == (0, 124, 179)
    # Sizes ≥ 251 are packed integers (0xfc + 2 bytes): read as raw bytes they would be wrong.
    java = parse_header(body(payload_of(JAVA)))
    assert (java.compression_type, java.payload_size, java.uncompressed_size) == (0, 451, 960)


def test_inner_events_of_the_rust_mysql_common_file() -> None:
    payload = payload_of(RUST)
    inner = list(inner_events(body(payload), end_pos=end_pos(payload), max_event_bytes=1 << 20, where="f:431"))
    assert [event[4] for event in inner] == [QUERY, TABLE_MAP, WRITE_ROWS_V2, XID]
    assert sum(len(event) for event in inner) == 179
    # No position of their own: each carries the payload's end (431), so a commit lands on a boundary.
    assert end_pos(payload) == 431 and {end_pos(event) for event in inner} == {431}
    query, table_map, _, xid = inner
    assert query.endswith(b"test\x00BEGIN")
    assert b"\x04test\x00\x03tb1\x00" in table_map
    assert struct.unpack("<Q", xid[19:27]) == (462,)  # no CRC after it: the body is the 8-byte xid


def test_inner_events_of_the_mysql_binlog_connector_java_file() -> None:
    payload = payload_of(JAVA)
    inner = list(inner_events(body(payload), end_pos=724, max_event_bytes=1 << 20, where="f:724"))
    assert [event[4] for event in inner] == [QUERY, TABLE_MAP, UPDATE_ROWS_V2, XID]
    assert sum(len(event) for event in inner) == 960
    assert b"\x04demo\x00\x06movies\x00" in inner[1]
    assert b"Western|Action" in inner[2]
    assert struct.unpack("<Q", inner[3][19:27]) == (31,)


def synthetic_payload(inner: list[bytes], *, compression_type: int = 0, claimed: int | None = None) -> bytes:
    """A TRANSACTION_PAYLOAD body as MySQL writes it: TLV header, end mark, zstd frame of the inner events."""
    plain = b"".join(inner)
    packed = zstandard.ZstdCompressor(level=3).compress(plain) if compression_type == 0 else plain

    def field(kind: int, value: int) -> bytes:
        encoded = bytes([value]) if value < 251 else (b"\xfd" + value.to_bytes(3, "little") if value < 1 << 24
                                                        else b"\xfe" + value.to_bytes(8, "little"))
        return bytes([kind, len(encoded)]) + encoded

    size = claimed if claimed is not None else len(plain)
    return field(2, compression_type) + field(3, size) + field(1, len(packed)) + b"\x00" + packed


def query_event(statement: bytes) -> bytes:
    body = struct.pack("<IIBHH", 7, 0, 4, 0, 0) + b"test\x00" + statement
    return struct.pack("<IBIIIH", 1_700_000_000, QUERY, 1, 19 + len(body), 0, 0) + body


def test_an_inner_event_beyond_the_bound_is_refused_before_it_is_decompressed() -> None:
    big = query_event(b"INSERT INTO t VALUES ('" + b"x" * 3_000_000 + b"')")
    payload = synthetic_payload([query_event(b"BEGIN"), big])
    # ~3 MB of one repeated byte compresses to a few hundred bytes: the bound is on what decompresses.
    assert len(payload) < 1_000
    read = inner_events(payload, end_pos=999, max_event_bytes=1 << 20, where="binlog.000007:999")
    assert next(read).endswith(b"BEGIN")
    with pytest.raises(PayloadTooLargeError, match=r"binlog.000007:999 holds an event of 3000\d\d\d bytes, more "
                       r"than batch.max_payload_event_bytes \(1048576\)") as raised:
        next(read)
    assert "raise batch.max_payload_event_bytes" in raised.value.remedy
    # Within the bound, the same payload reads whole.
    assert [len(event) for event in inner_events(payload, end_pos=999, max_event_bytes=4 << 20, where="x")][1] \
        == len(big)


def table_map_event(table_id: int, database: bytes, table: bytes) -> bytes:
    """The head of a TABLE_MAP body (what names its table); the column part is not read by `inner_events`."""
    body = (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes([len(database)]) + database + b"\x00"
            + bytes([len(table)]) + table + b"\x00" + b"\x01\x03\x00\x00")
    return struct.pack("<IBIIIH", 1_700_000_000, 19, 1, 19 + len(body), 0, 0) + body


def rows_event(table_id: int, size: int) -> bytes:
    """A WRITE_ROWS v2 event of `size` bytes whose post-header names `table_id` (its rows are filler)."""
    body = table_id.to_bytes(6, "little") + b"\x00\x00\x02\x00" + b"r" * (size - 19 - 10)
    return struct.pack("<IBIIIH", 1_700_000_000, 30, 1, size, 0, 0) + body


def test_an_oversized_rows_event_is_named_by_its_table_map_and_passed_over_unheld() -> None:
    events = [query_event(b"BEGIN"), table_map_event(91, b"shop", b"orders"), table_map_event(92, b"shop", b"logs"),
              rows_event(92, 2_000_000), rows_event(91, 200), query_event(b"COMMIT")]
    payload = synthetic_payload(events)
    told: list[tuple[str | None, str]] = []

    def oversized(table: str | None, refusal: PayloadTooLargeError) -> bool:
        told.append((table, str(refusal)))
        return table == "shop.logs"

    read = list(inner_events(payload, end_pos=5_000, max_event_bytes=1 << 20, where="binlog.000003:5000",
                             oversized=oversized))
    assert [event[4] for event in read] == [QUERY, 19, 19, 30, QUERY]  # the 2 MB event of shop.logs is not there
    assert read[3][19:25] == (91).to_bytes(6, "little") and read[-1].endswith(b"COMMIT")
    assert len(told) == 1 and told[0][0] == "shop.logs"
    assert "holds an event of 2000000 bytes for shop.logs" in told[0][1]
    # The caller's word decides: refused, the payload ends with the refusal naming the table.
    with pytest.raises(PayloadTooLargeError, match="for shop.logs") as raised:
        list(inner_events(payload, end_pos=5_000, max_event_bytes=1 << 20, where="w", oversized=lambda *_: False))
    assert raised.value.table == "shop.logs"
    # An oversized event that names no table (a statement) is refused whatever the caller would say of a table.
    big = synthetic_payload([query_event(b"BEGIN"), query_event(b"INSERT " + b"x" * 2_000_000)])
    with pytest.raises(PayloadTooLargeError) as unnamed:
        list(inner_events(big, end_pos=1, max_event_bytes=1 << 20, where="w",
                          oversized=lambda table, _: table is not None))
    assert unnamed.value.table is None


def test_payloads_binlake_cannot_read_are_refused() -> None:
    events = [query_event(b"BEGIN")]
    with pytest.raises(PayloadError, match="compression type 7"):
        list(inner_events(synthetic_payload(events, compression_type=7), end_pos=1, max_event_bytes=1 << 20, where=""))
    # The header's uncompressed size bounds what is read, both ways.
    with pytest.raises(PayloadError, match="more than the 10 bytes its header says"):
        list(inner_events(synthetic_payload(events, claimed=10), end_pos=1, max_event_bytes=1 << 20, where=""))
    with pytest.raises(PayloadError, match=r"decompresses to \d+ bytes, its header says 9999"):
        list(inner_events(synthetic_payload(events, claimed=9999), end_pos=1, max_event_bytes=1 << 20, where=""))
    corrupt = bytearray(synthetic_payload(events))
    corrupt[-6:] = b"\xff" * 6
    with pytest.raises(PayloadError, match="zstd"):
        list(inner_events(bytes(corrupt), end_pos=1, max_event_bytes=1 << 20, where=""))
    # Type 255 (none) is the format's uncompressed payload.
    assert list(inner_events(synthetic_payload(events, compression_type=255), end_pos=5, max_event_bytes=1 << 20,
                             where=""))[0][4] == QUERY


# -- through the read path -----------------------------------------------------------------------


class BinlogStub(MySQLStub):
    """The MySQL stub, whose binlog dump streams the events of one binlog file as a MySQL server sends them."""

    binlog: list[bytes]

    def _commands(self, wire: _Wire) -> None:
        while True:
            packet = wire.receive(new_command=True)
            command, payload = packet[0], packet[1:]
            if command == COM_BINLOG_DUMP:
                position = struct.unpack("<I", payload[:4])[0]
                self.queries.append(f"<COM_BINLOG_DUMP {position}>")
                wire.send(b"\x00" + fake_rotate(self.binlog_name, position))
                # As a server does: the file's FORMAT_DESCRIPTION, then the events from the position asked for.
                for event in self.binlog:
                    if event[4] == 15 or end_pos(event) - len(event) >= position:
                        wire.send(b"\x00" + event)
                wire.send(b"\xfe\0\0\0\0")  # end of a non-blocking dump
            elif command == COM_QUERY:
                sql = payload.decode()
                self.queries.append(sql)
                result = self.answer(sql)
                for reply in [_ok()] if result is None else _result_set(*result):
                    wire.send(reply)
            elif command == 0x01:  # COM_QUIT
                return
            else:
                wire.send(_ok())

    binlog_name = ""


def fake_rotate(name: str, position: int) -> bytes:
    """The artificial ROTATE a binlog dump starts with (timestamp 0, LOG_EVENT_ARTIFICIAL_F), with its CRC32."""
    body = struct.pack("<Q", position) + name.encode()
    header = struct.pack("<IBIIIH", 0, ROTATE, 1, 19 + len(body) + 4, 0, 0x20)
    return header + body + struct.pack("<I", zlib.crc32(header + body))


@pytest.fixture
def stub() -> Iterator[BinlogStub]:
    server = BinlogStub(version="8.0.32")
    server.variables.update(binlog_transaction_compression="ON", gtid_mode="OFF")
    server.start()
    yield server
    server.stop()


def source_for(server: MySQLStub) -> SourceConfig:
    return SourceConfig(host="127.0.0.1", port=server.port, user=server.user, password=server.password,
                        server_id=4243, tables=())


def cursor(name: str, path: Path, columns: list[tuple[str, str, str]]) -> TableCursor:
    schema = TableSchema(TableRef.parse(name), tuple(ColumnInfo(column, data_type, column_type, nullable=True,
                                                                 character_set="utf8mb4" if data_type == "varchar"
                                                                 else None)
                                                      for column, data_type, column_type in columns),
                         (columns[0][0],))
    return TableCursor(name, BinlogPosition(path.name, 4), schema)


def serve(stub: BinlogStub, path: Path) -> None:
    stub.binlog = events(path)
    stub.binlog_name = path.name


def with_column_names(path: Path, names: list[str]) -> list[bytes]:
    """The file's events, its payload's TABLE_MAP given COLUMN_NAME metadata (binlog_row_metadata=FULL).

    Both files were written with binlog_row_metadata=MINIMAL, whose columns binlake names from the schema by
    position; this is the same transaction as a FULL server writes it, matched by name: the table map gains the
    optional metadata field 4 (the column names), the payload is compressed again, and the sizes, positions
    and checksums that follow are rewritten to match.
    """
    file_events = events(path)
    index = next(i for i, event in enumerate(file_events) if event[4] == PAYLOAD)
    payload = file_events[index]
    inner = list(inner_events(body(payload), end_pos=0, max_event_bytes=1 << 20, where=""))
    named = b"".join(bytes([len(name)]) + name.encode() for name in names)
    table_map = inner[1] + bytes([4, len(named)]) + named
    inner[1] = table_map[:9] + struct.pack("<I", len(table_map)) + table_map[13:]
    file_events[index] = payload[:19] + synthetic_payload(inner) + b"\0\0\0\0"
    return renumbered(file_events)


def with_unknown_compression(path: Path) -> list[bytes]:
    """The file's events, its payload's compression type set to 1: not one MySQL defines, nor zstd."""
    file_events = events(path)
    index = next(i for i, event in enumerate(file_events) if event[4] == PAYLOAD)
    event = bytearray(file_events[index])
    event[19 + 2] = 1
    file_events[index] = bytes(event)
    return file_events


def renumbered(file_events: list[bytes]) -> list[bytes]:
    """The events laid one after another from offset 4: sizes, end positions and CRC32s rewritten to match."""
    laid, position = [], 4
    for event in file_events:
        position += len(event)
        header = event[:9] + struct.pack("<II", len(event), position) + event[17:19]
        laid.append(header + event[19:-4] + struct.pack("<I", zlib.crc32(header + event[19:-4])))
    return laid


def test_the_stream_yields_the_library_events_inside_a_payload(stub: BinlogStub, tmp_path: Path) -> None:
    """Inner events come out as the library's own event objects, rows decoded, as uncompressed ones would."""
    serve(stub, RUST)
    table = cursor("test.tb1", RUST, [("c1", "int", "int")])
    source = source_for(stub)
    read = BinlogRead(source, [table], None, SpillPlan(frozenset(), 1_000, tmp_path))
    stream = open_stream(source, read.start, events=None, tables=[table.schema.table])
    try:
        seen = list(PayloadsOpened(stream, 1 << 20, current_file=lambda: read.current_file).events())
    finally:
        stream.close()
    kinds = [type(event).__name__ for event in seen]
    assert kinds[-5:] == ["QueryEvent", "TableMapEvent", "WriteRowsEvent", "XidEvent", "RotateEvent"]
    query, table_map, rows, xid = seen[-5:-1]
    assert (query.query, query.schema) == ("BEGIN", b"test")
    assert (table_map.schema, table_map.table, table_map.table_id) == ("test", "tb1", 88)
    assert [row["values"] for row in rows.rows] == [{"UNKNOWN_COL0": 1}]  # @1=1 (MINIMAL metadata: no name)
    assert xid.xid == 462
    # Each carries the payload's end (431) as its position: a commit inside lands on the boundary after it.
    assert {event.packet.log_pos for event in (query, table_map, rows, xid)} == {431}


def test_read_batch_applies_the_row_inside_a_compressed_transaction(stub: BinlogStub) -> None:
    stub.binlog, stub.binlog_name = with_column_names(RUST, ["c1"]), RUST.name
    read = read_batch(source_for(stub), [cursor("test.tb1", RUST, [("c1", "int", "int")])], BatchConfig())
    assert not read.table_errors
    changes = read.changes["test.tb1"]
    assert (read.row_changes, read.transactions, changes.inserted) == (1, 1, 1)
    assert changes.rows[(1,)] == ("upsert", (1,))
    # The commit (xid 462) lands at the payload's end; the ROTATE at the file's end then moves on.
    assert read.end.pos == 4 and read.end.file == "binlog.000043" and read.reached_end


def test_the_real_files_minimal_metadata_is_named_by_position_as_uncompressed_it_would_be(stub: BinlogStub) -> None:
    """The files as written (binlog_row_metadata=MINIMAL): the inner TABLE_MAP reaches binlake's own mapping."""
    serve(stub, RUST)
    read = read_batch(source_for(stub), [cursor("test.tb1", RUST, [("c1", "int", "int")])], BatchConfig())
    assert not read.table_errors
    assert read.changes["test.tb1"].rows[(1,)] == ("upsert", (1,))
    # A schema the table map is not (a text column where the binlog has an INT) stops the table, at its offset.
    serve(stub, RUST)
    read = read_batch(source_for(stub), [cursor("test.tb1", RUST, [("c1", "varchar", "varchar(4)")])], BatchConfig())
    failure = read.table_errors["test.tb1"]
    assert "cannot be matched by position" in str(failure.error)
    assert failure.position.pos == 4


def test_a_batch_ends_after_a_payload_and_the_next_resumes_at_its_end(stub: BinlogStub) -> None:
    """Two compressed transactions, one row each, read one per batch: the offset is the payload's end."""
    file_events = with_column_names(RUST, ["c1"])
    index = next(i for i, event in enumerate(file_events) if event[4] == PAYLOAD)
    group = file_events[index - 1: index + 1]  # ANONYMOUS_GTID, TRANSACTION_PAYLOAD
    stub.binlog = renumbered([*file_events[:index + 1], *group, *file_events[index + 1:]])
    stub.binlog_name = RUST.name
    first_end, second_end = (end_pos(event) for event in stub.binlog if event[4] == PAYLOAD)
    table = cursor("test.tb1", RUST, [("c1", "int", "int")])
    first = read_batch(source_for(stub), [table], BatchConfig(max_events=1))
    assert (first.transactions, first.row_changes, first.reached_end) == (1, 1, False)
    assert (first.end.file, first.end.pos) == (RUST.name, first_end)
    resumed = TableCursor(table.name, first.end, table.schema)
    second = read_batch(source_for(stub), [resumed], BatchConfig(max_events=1))
    assert (second.transactions, second.row_changes) == (1, 1) and not second.table_errors
    assert second.changes["test.tb1"].rows[(1,)] == ("upsert", (1,))
    assert f"<COM_BINLOG_DUMP {first_end}>" in stub.queries and second_end > first_end


def test_read_batch_applies_the_update_inside_the_connector_java_payload(stub: BinlogStub) -> None:
    names = [f"c{i}" for i in range(1, 12)]
    stub.binlog, stub.binlog_name = with_column_names(JAVA, names), JAVA.name
    columns = [("c1", "int", "int"), ("c2", "varchar", "varchar(256)"), ("c3", "int", "int"),
               *[(f"c{i}", "varchar", "varchar(1024)") for i in range(4, 12)]]
    read = read_batch(source_for(stub), [cursor("demo.movies", JAVA, columns)], BatchConfig())
    assert not read.table_errors
    changes = read.changes["demo.movies"]
    assert (read.row_changes, read.transactions, changes.updated) == (1, 1, 1)
    kind, image = changes.rows[(1,)]
    assert kind == "upsert" and image is not None
    assert image[:5] == (1, "Once Upon a Time in the West", 1968, "Italy", "Western|Action")
    assert image[6] == "Sergio Leone" and image[10] == "Paramount Pictures"
    assert read.end.file == "mysql-bin.000005"


def test_read_batch_stops_the_table_of_a_payload_event_beyond_the_bound(stub: BinlogStub) -> None:
    serve(stub, JAVA)  # its largest inner event is the 800-odd-byte UPDATE
    table = cursor("demo.movies", JAVA, [("c1", "int", "int")])
    read = read_batch(source_for(stub), [table], BatchConfig(max_payload_event_bytes=500))
    failure = read.table_errors["demo.movies"]
    assert isinstance(failure.error, PayloadTooLargeError) and failure.error.table == "demo.movies"
    assert re.search(r"mysql-bin.compressed:724 holds an event of \d+ bytes for demo.movies", str(failure.error))
    assert "binlake resume --table demo.movies" in failure.error.remedy
    assert not read.changes.get("demo.movies")


def test_a_payload_event_beyond_the_bound_of_a_table_not_followed_is_passed_over(stub: BinlogStub) -> None:
    """The same oversized UPDATE, read by a pipeline that follows another table: nothing stops, the read ends."""
    serve(stub, JAVA)
    other = cursor("demo.other", JAVA, [("c1", "int", "int")])
    read = read_batch(source_for(stub), [other], BatchConfig(max_payload_event_bytes=500))
    assert not read.table_errors and read.reached_end and read.end.file == "mysql-bin.000005"


def test_read_batch_stops_every_table_on_a_payload_it_cannot_open(stub: BinlogStub) -> None:
    stub.binlog, stub.binlog_name = with_unknown_compression(RUST), RUST.name
    read = read_batch(source_for(stub), [cursor("test.tb1", RUST, [("c1", "int", "int")])], BatchConfig())
    failure = read.table_errors["test.tb1"]
    assert isinstance(failure.error, UnreadableEventError)
    assert "compression type 1" in str(failure.error)
    assert "SET GLOBAL binlog_transaction_compression=OFF" in failure.error.remedy
    assert not read.changes.get("test.tb1")


def test_the_bound_is_a_batch_setting() -> None:
    document = {"pipeline": "shop", "source": {"host": "h", "user": "u", "password": "p", "server_id": 5,
                                               "tables": ["a.b"]}, "sink": {"path": "/lake"}}
    assert parse_config(document).batch.max_payload_event_bytes == 256 * 1024 * 1024
    assert parse_config({**document, "batch": {"max_payload_event_bytes": 1 << 30}}).batch.max_payload_event_bytes \
        == 1 << 30
    with pytest.raises(ConfigError, match="max_payload_event_bytes"):
        parse_config({**document, "batch": {"max_payload_event_bytes": 100}})


# -- every reader of the binlog opens payloads: the snapshot's window scan, the schema probe ------


def test_the_snapshot_window_scan_reads_the_rows_inside_a_payload(stub: BinlogStub) -> None:
    """A history table's snapshot correction reads the table's row images between its watermarks; rows inside
    a compressed transaction are among them (passed over, the correction would keep a changed row's new value
    as of the snapshot's start)."""
    stub.binlog, stub.binlog_name = with_column_names(RUST, ["c1"]), RUST.name
    payload_end = next(end_pos(event) for event in stub.binlog if event[4] == PAYLOAD)
    schema = cursor("test.tb1", RUST, [("c1", "int", "int")]).schema
    collected = CollectedImages()
    scan = scan_window(source_for(stub), schema, BinlogPosition(RUST.name, 4), BinlogPosition(RUST.name, payload_end),
                       max_payload_event_bytes=1 << 20, staged=collected)  # type: ignore[arg-type]
    assert scan.images == 1
    (image,) = collected.rows
    assert image[0] == 1  # the INSERT of @1=1: no row before it (an `a` image)


class CollectedImages:
    """Where the scan's row images go (in place of the Spark-staged Parquet parts a correction writes)."""

    def __init__(self) -> None:
        self.rows: list[tuple[object, ...]] = []

    def add(self, rows: list[tuple[object, ...]]) -> None:
        self.rows.extend(rows)


def test_the_snapshot_window_scan_refuses_a_payload_it_cannot_open(stub: BinlogStub) -> None:
    stub.binlog, stub.binlog_name = with_unknown_compression(RUST), RUST.name
    payload_end = next(end_pos(event) for event in stub.binlog if event[4] == PAYLOAD)
    schema = cursor("test.tb1", RUST, [("c1", "int", "int")]).schema
    with pytest.raises(SnapshotWindowError, match="compression type 1") as refused:
        scan_window(source_for(stub), schema, BinlogPosition(RUST.name, 4), BinlogPosition(RUST.name, payload_end),
                    max_payload_event_bytes=1 << 20)
    assert "--restart" in refused.value.remedy


def test_the_schema_probe_finds_the_table_map_inside_a_payload(stub: BinlogStub) -> None:
    """The columns after a DDL come from the table's next TABLE_MAP, which on a compressing server is inside a
    payload: passed over, the probe would read on to the binlog's end (or to a later DDL) and guess."""
    stub.binlog, stub.binlog_name = with_column_names(RUST, ["c1"]), RUST.name
    schema = cursor("test.tb1", RUST, [("c1", "int", "int")]).schema
    assert columns_after_ddl(source_for(stub), schema, BinlogPosition(RUST.name, 4),
                             max_payload_event_bytes=1 << 20) == ["c1"]
