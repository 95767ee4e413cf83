"""Real MySQL binlog bytes through binlake's real sync, into Delta (issue 27, item 2).

Each binlog file under tests/fixtures/mysql-binlogs/ was written by a MySQL server (8.0.22 to 9.6.0) and comes
from an open-source project's test data (PROVENANCE.md there: origin, license, expected values and how far to
trust them). The protocol stub (tests/mysql_stub.py) serves a file as that server would: the version, server_id
and checksum it was written with, SHOW BINARY LOGS, the binlog status and a COM_BINLOG_DUMP that streams its
events; information_schema describes the table from the file's CREATE TABLE. `Pipeline.sync(until_caught_up=True)`
then reads the stream, buffers the transactions, folds them and writes Delta, one batch per transaction
(`batch.max_events: 1`), so each Delta version is the table after one source transaction. The versions are read
back with `deltalake` and compared with the values PROVENANCE.md gives; each expectation names its grade
(ASSERTED: the origin's own test checks it; REFERENCE: the origin's SQL transcript or mysqlbinlog dump;
OBSERVED: decoded while assembling the set, a hint only).

Where the sync starts: the table's state is an empty snapshot commit (`kind: snapshot`, its `end` the position
where the table's first row transaction begins, after its CREATE TABLE) written to the Delta table with
`deltalake`, as a snapshot that crashed before its offset write leaves it. The sync's first step
(`state.table_offsets.reconcile_with_delta`: the Delta log wins, invariant 3) adopts it as the table's offset.
That is the one documented way to give a table a state without a snapshot's JDBC read, which the stub cannot
serve; starting at the file's start would replay the CREATE (and DROP) TABLE of the origin's session, which
stops a followed table by design. A fixture whose first transaction updates a row gets that row in the snapshot.

Where the stub's table differs from the origin's (each case says so): most origin tables have no primary key,
which binlake refuses (docs/bad-input.md), so the stub's table declares one on a column whose values are unique
in the file (a key is not in the row images binlake reads, so the bytes are the same); a table whose CREATE is
not in the origin gets column names by position (c1, c2, ...).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from deltalake import DeltaTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.offsets import TableState
from tests.mysql_stub import (
    BINLOG_DUMP_NON_BLOCK,
    COM_BINLOG_DUMP,
    BinlogFile,
    MySQLStub,
    StubColumn,
    StubTable,
)
from tests.replay_start import stub_schema, write_snapshot_commit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs"
PIPELINE = "replay"

GTID_EVENTS = frozenset({33, 34, 42})  # GTID, ANONYMOUS_GTID, GTID_TAGGED
ROW_CARRYING = frozenset({19, 40})  # TABLE_MAP (a row transaction's first event after BEGIN), TRANSACTION_PAYLOAD

Row = dict[str, Any]

#: rust_mysql_common's strings (PROVENANCE.md, mysql-enum-string-set): S is 100 characters, L 298.
S = "0123456789" * 10
L = ("0123456789" * 12 + "012345678") * 2 + "0123456789" * 4


def col(name: str, column_type: str, **options: Any) -> StubColumn:
    return StubColumn(name, column_type, **options)


@dataclass(frozen=True)
class Replay:
    """One fixture file, the table its rows go to, and the table after each of its row transactions."""

    id: str
    path: str
    table: StubTable
    #: The Delta table after each row transaction of the file, in order (rows in key order).
    versions: list[list[Row]]
    #: Rows the snapshot holds at the start position (the before image of a first transaction that updates).
    snapshot: list[Row] = field(default_factory=list)
    #: The served file's name, when the fixture's own name is not a server's (e.g. "mysql-bin.compressed").
    served_as: str | None = None
    #: Executed_Gtid_Set at the start and end, when the file's GTIDs cannot be read here (tagged GTIDs).
    gtid_sets: tuple[str, str] | None = None

    def file(self) -> BinlogFile:
        return BinlogFile.read(FIXTURES / self.path, self.served_as)


INT_TABLE = StubTable("test", "int_table", (
    col("col1", "tinyint(4)"), col("col2", "smallint(6)"), col("col3", "mediumint(9)"), col("col4", "int(11)"),
    col("col5", "bigint(20)"), col("col6", "tinyint(1)"),
), primary_key=("col1",))  # no key in the origin (`int_table`, all DEFAULT NULL); col1 is 1 in every row
INT_ROW = {"col1": 1, "col2": 11, "col3": 111, "col4": 1111, "col5": 11111, "col6": 1}
INT_ROW_UPDATED = {**INT_ROW, "col2": 22, "col3": 222}

#: Fixtures binlake applies today. Values graded as commented.
APPLIED = [
    Replay(
        "rust_mysql_common/mysql-enum-string-set",
        "rust_mysql_common/mysql-enum-string-set.000001",
        StubTable("mysql", "t", (
            col("f1", "char(128)"), col("f2", "varchar(300)"), col("f3", "enum('var1','variant2','foo')"),
            col("f4", "set('one','two','three','four')"), col("f5", "text"),
        ), primary_key=("f1",)),  # no key in the origin; f1 differs in every row
        # ASSERTED (binlog_event_roundtrip): the images; ENUM as index 1/2 and SET as bitmask 0b0101/0b1010, whose
        # labels (binlake's mapping, docs/types.md) come from the file's ENUM_STR_VALUE / SET_STR_VALUE metadata.
        [
            [{"f1": S, "f2": L, "f3": "var1", "f4": "one,three", "f5": "0123456789"}],
            [{"f1": "field1", "f2": "field_2", "f3": "variant2", "f4": "two,four", "f5": L}],
            [],
        ],
    ),
    Replay(
        "rust_mysql_common/mysql_type_bit",
        "rust_mysql_common/mysql_type_bit.000001",
        StubTable("mysql", "foo", (col("a", "bit(3)"), col("b", "text"), col("c", "bit(8)")),
                  primary_key=("a",)),  # no key in the origin; one row
        # ASSERTED (binlog_event_roundtrip): a = 0x04, b = "foo", c = 0x20; BIT is a number in Delta (docs/types.md).
        [[{"a": 4, "b": "foo", "c": 32}]],
    ),
    Replay(
        "rust_mysql_common/binlog-invisible-columns",
        "rust_mysql_common/binlog-invisible-columns.000001",
        StubTable("mysql", "t1", (
            col("f1", "int unsigned"), col("f2", "int unsigned"), col("f3", "int", nullable=False), col("f4", "text"),
            col("f5", "blob"), col("f6", "bigint unsigned"),
        ), primary_key=("f3",)),  # no key in the origin; f3 differs in every row (-3, -33, then -333)
        # OBSERVED only (MariaDB's mysqlbinlog agrees); the origin asserts only that the metadata parses. The
        # INVISIBLE columns f1, f2, f6 are in the row images and in information_schema like any other.
        [
            [{"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": b"\x05", "f6": Decimal(6000000000)}],
            [{"f1": None, "f2": None, "f3": -33, "f4": "44", "f5": b"U", "f6": None},
             {"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": b"\x05", "f6": Decimal(6000000000)}],
            [{"f1": 111, "f2": 222, "f3": -333, "f4": "444", "f5": b"U", "f6": None},
             {"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": b"\x05", "f6": Decimal(6000000000)}],
        ],
    ),
]

#: mysql-cdc-rs 02_query_bigger's LINEITEM (its sql.sql), with the origin's own composite key.
LINEITEM = StubTable("test", "LINEITEM", (
    col("L_ORDERKEY", "bigint", nullable=False), col("L_PARTKEY", "int", nullable=False),
    col("L_SUPPKEY", "int", nullable=False), col("L_LINENUMBER", "bigint", nullable=False),
    col("L_QUANTITY", "decimal(12,3)", nullable=False), col("L_EXTENDEDPRICE", "decimal(13,2)", nullable=False),
    col("L_DISCOUNT", "decimal(10,1)", nullable=False), col("L_TAX", "decimal(12,1)", nullable=False),
    col("L_RETURNFLAG", "varchar(128)", nullable=False, charset="utf8mb3"),
    col("L_LINESTATUS", "varchar(8)", nullable=False, charset="utf8mb3"),
    col("L_SHIPDATE", "date", nullable=False), col("L_COMMITDATE", "date", nullable=False),
    col("L_RECEIPTDATE", "date", nullable=False),
    col("L_SHIPINSTRUCT", "varchar(128)", nullable=False, charset="utf8mb3"),
    col("L_SHIPMODE", "varchar(128)", nullable=False, charset="utf8mb3"),
    col("L_COMMENT", "varchar(128)", nullable=False, charset="utf8mb3"),
), primary_key=("L_ORDERKEY", "L_LINENUMBER", "L_SHIPDATE"))
CHINESE = (
    "使用箭头标记 -> 不是 SQL 语句的一部分，它仅仅表示一个新行，"
    "如果一条 SQL 语句太长，我们可以通过回车键来创建一个新行来编写 SQL 语句，SQL 语句的命令结束符为分号 ;。"
)


def _line(key: int, part: int, supplier: int, number: int, amounts: tuple[str, str, str, str],
          comment: str = "com") -> Row:
    """A LINEITEM row as sql.sql inserts it (its dates written with a time, stored as DATE)."""
    quantity, price, discount, tax = (Decimal(amount) for amount in amounts)
    return {
        "L_ORDERKEY": key, "L_PARTKEY": part, "L_SUPPKEY": supplier, "L_LINENUMBER": number, "L_QUANTITY": quantity,
        "L_EXTENDEDPRICE": price, "L_DISCOUNT": discount, "L_TAX": tax, "L_RETURNFLAG": "code", "L_LINESTATUS": "Y",
        "L_SHIPDATE": dt.date(1990, 8, 1), "L_COMMITDATE": dt.date(1990, 6, 1), "L_RECEIPTDATE": dt.date(1990, 1, 1),
        "L_SHIPINSTRUCT": "test@test.com", "L_SHIPMODE": "test", "L_COMMENT": comment,
    }


FIRST_LINE = _line(1234567890111, 1235111, 13711, 888878711, ("99.911", "76.11", "888.1", "109.1"))
LINES = [
    _line(12345678909876, 12356789, 13789, 888878787, ("99.998", "76.77", "888.7", "109.7")),
    _line(12345678909877, 12356790, 13789, 888878788, ("99.997", "76.88", "888.1", "109.8")),
    _line(12345678909878, 12356791, 13790, 888878789, ("99.999", "76.99", "888.5", "109.9"), CHINESE),
    _line(12345678909879, 12356792, 13791, 888878790, ("99.995", "76.01", "888.3", "109.1")),
    _line(12345678909880, 12356792, 13791, 888878791, ("99.999", "76.22", "888.8", "109.0")),
]
UPDATED_LINE = {**LINES[1], "L_QUANTITY": Decimal("88.880"), "L_RETURNFLAG": "update L_RETURNFLAG "}


#: mysql-bin.compressed's movie before its UPDATE (OBSERVED).
MOVIE: Row = {
    "c1": 1, "c2": "Once Upon a Time in the West", "c3": 1968, "c4": "Italy", "c5": "Western",
    "c6": "Claudia Cardinale|Charles Bronson|Henry Fonda|Gabriele Ferzetti|Frank Wolff|Al Mulock|Jason Robards"
          "|Woody Strode|Jack Elam|Lionel Stander|Paolo Stoppa|Keenan Wynn|Aldo Sambrell",
    "c7": "Sergio Leone", "c8": "Ennio Morricone", "c9": "Sergio Leone|Sergio Donati|Dario Argento|Bernardo Bertolucci",
    "c10": "Tonino Delli Colli", "c11": "Paramount Pictures",
}
#: json.binlog's people (OBSERVED): name, age, the letter their `data` repeats ten times.
PEOPLE = [("Joe", 24, "x"), ("Sue", 32, "y"), ("Pete", 40, "z")]


def _person(key: int, name: str, age: int, letter: str) -> Row:
    return {"id": key, "json_col": {"age": age, "data": letter * 10, "name": name}, "name": name, "age": age}


#: Fixtures written with binlog_row_metadata=MINIMAL (MySQL 8.0's and 8.4's default): their TABLE_MAPs name no
#: columns, so binlake names them from the table's schema by position (cdc_lib/binlog/column_positions.py); on
#: main before that, the first rows event stopped each table (a ServerSettingsError asking for FULL, or for
#: 02_query_bigger a CharsetError with the codec 'binlake_unknown'). The two compressed ones are
#: TRANSACTION_PAYLOAD (zstd) events around the same kind of table map.
APPLIED_BY_POSITION = [
    Replay(
        "mysql-cdc-rs/19_30", "mysql-cdc-rs/19_30_Table_map_event_Write_rows_log_event/binlog.000018", INT_TABLE,
        [[INT_ROW]],  # REFERENCE (dump.txt ###); ASSERTED: the TABLE_MAP and a 6-column WRITE
    ),
    Replay(
        "mysql-cdc-rs/31_update_rows_v2", "mysql-cdc-rs/31_update_rows_v2/binlog.000001", INT_TABLE,
        [[INT_ROW], [INT_ROW_UPDATED]],  # ASSERTED (test_update_rows_log_event): before and after images
    ),
    Replay(
        "mysql-cdc-rs/32_delete_rows_v2", "mysql-cdc-rs/32_delete_rows_v2/binlog.000001", INT_TABLE,
        [[INT_ROW], [INT_ROW_UPDATED], []],  # ASSERTED (test_delete_rows_log_event): the deleted image
    ),
    Replay(
        "mysql-cdc-rs/02_query_bigger", "mysql-cdc-rs/02_query_bigger/binlog.000733", LINEITEM,
        # REFERENCE (sql.sql: the statements; OBSERVED decoding agrees): DECIMALs, DATEs, a multi-byte utf8mb3
        # comment, an UPDATE keeping a trailing space, two DELETEs; then the Demo table's DDL and rows, not followed.
        # ASSERTED (test_context_position_check): only the file's length, 7843.
        [
            [FIRST_LINE],
            [FIRST_LINE, *LINES],
            [FIRST_LINE, LINES[0], UPDATED_LINE, *LINES[2:]],
            [FIRST_LINE, LINES[0], UPDATED_LINE, LINES[2], LINES[3]],
            [FIRST_LINE, LINES[0], UPDATED_LINE, LINES[2]],
        ],
    ),
    Replay(
        "rust_mysql_common/time_issue", "rust_mysql_common/time_issue.000001",
        StubTable("noria", "t", (col("c1", "time"),), primary_key=("c1",)),  # origin: no CREATE, no key
        [[{"c1": "-507:48:27"}]],  # ASSERTED (binlog_event_roundtrip): negative, 21 days 3:48:27
    ),
    Replay(
        "rust_mysql_common/transaction_compression", "rust_mysql_common/transaction_compression.000001",
        StubTable("test", "tb1", (col("c1", "int"),), primary_key=("c1",)),  # origin: no CREATE, no key
        [[{"c1": 1}]],  # ASSERTED: QUERY, TABLE_MAP, WRITE_ROWS, XID inside; OBSERVED: the row (1)
    ),
    Replay(
        "mysql-binlog-connector-java/mysql-bin.compressed", "mysql-binlog-connector-java/mysql-bin.compressed",
        StubTable("demo", "movies", tuple(
            col(f"c{n}", "int" if n in (1, 3) else {6: "varchar(1024)", 7: "varchar(512)"}.get(n, "varchar(256)"),
                nullable=False)
            for n in range(1, 12)
        ), primary_key=("c1",)),  # origin: no CREATE; c1 (NOT NULL, 1) taken as the key
        # OBSERVED only: the UPDATE's before image (in the snapshot) and after image (c5 'Western|Action').
        [[{**MOVIE, "c5": "Western|Action"}]],
        snapshot=[MOVIE],
        served_as="mysql-bin.000004",  # it rotates to mysql-bin.000005
    ),
    Replay(
        "rust_mysql_common/binlog_transaction_with_GTID_TAG",
        "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001",
        StubTable("test", "orders", (
            col("c1", "int", nullable=False), col("c2", "int"), col("c3", "decimal(10,2)"),
        ), primary_key=("c1",)),  # origin: no CREATE
        [[{"c1": 3, "c2": 100, "c3": Decimal("250.00")}]],  # OBSERVED: the row
        # ASSERTED (gtid_tagged_log_event_from_binlog): PREVIOUS_GTIDS, and the transaction's GTID mytag:3, which
        # binlake reads itself (cdc_lib/binlog/gtid_events.py; the library does not parse GTID_TAGGED): the
        # offset's set advances to mytag:1-3. Before that, it stayed at mytag:1-2.
        gtid_sets=("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2",
                   "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3"),
    ),
]


@dataclass(frozen=True)
class Stopped:
    """A fixture binlake cannot apply exactly to the end: what lands first, then the stop and its error."""

    replay: Replay
    #: Fragments of the table's error: its cause, and the remedy it names.
    cause: tuple[str, ...]
    remedy: tuple[str, ...]


#: Fixtures whose table binlake stops on purpose (invariant 11): Replay.versions holds what lands before the stop.
STOPPED = [
    Stopped(
        Replay(
            "rust_mysql_common/minimal_row_metadata", "rust_mysql_common/minimal_row_metadata.000001",
            StubTable("noria", "t1", (
                col("c1", "int", nullable=False), col("c2", "blob"), col("c3", "char(2)"), col("c4", "int"),
                col("c5", "int unsigned"),
            ), primary_key=("c1",)),  # origin: no CREATE
            # ASSERTED: c5 = 3230202323 (INT UNSIGNED) and c3's collation 255; OBSERVED: c1 = 1, c3 = 'a'. c2 and c4
            # are not in the (MINIMAL) row image: the row the server inserted has them NULL (not asserted anywhere).
            [],  # nothing lands: the row would be {"c1": 1, "c2": None, "c3": "a", "c4": None, "c5": 3230202323}
        ),
        # Its only WRITE has a MINIMAL row image (only c1, c3, c5): the values of c2 and c4 are not in the binlog
        # (MySQL's MINIMAL after image holds the columns the statement set; the others got their defaults, which
        # may be expressions such as CURRENT_TIMESTAMP), so the table stops instead of writing NULLs. The ASSERTED
        # c5 = 3230202323 (INT UNSIGNED) is proven on the decoder by tests/unit/binlog/test_column_positions.py.
        cause=("a rows event of the table has a row image without every column", "binlog_row_image is not FULL"),
        remedy=("SET GLOBAL binlog_row_image=FULL", "binlake snapshot --table noria.t1"),
    ),
    Stopped(
        Replay(
            "rust_mysql_common/json.binlog", "rust_mysql_common/json.binlog.000001",
            StubTable("mysql", "t", (
                col("id", "int", nullable=False), col("json_col", "json"),
                col("name", "varchar(100)", generated=True), col("age", "int", generated=True),
            ), primary_key=("id",)),  # the origin's own key
            # OBSERVED only: six rows, after the full UPDATE (ages + 1); then the PARTIAL_UPDATE_ROWS (JSON diff
            # REPLACE $.age) would make them age + 2, which is not applied (see below).
            [
                [_person(1, "Joe", 24, "x")],
                [_person(1, "Joe", 24, "x"), _person(2, "Sue", 32, "y")],
                [_person(1, "Joe", 24, "x"), _person(2, "Sue", 32, "y"), _person(3, "Pete", 40, "z")],
                [_person(n, name, age, letter) for n, (name, age, letter) in enumerate(PEOPLE * 2, 1)],
                [_person(n, name, age + 1, letter) for n, (name, age, letter) in enumerate(PEOPLE * 2, 1)],
            ],
        ),
        # The five transactions of binary JSON (inserts, a full UPDATE) land exactly; the PARTIAL_UPDATE_ROWS event
        # (#35, binlog_row_value_options=PARTIAL_JSON) of a session that logged MINIMAL row images has no old
        # document for its diff to apply to, so the table stops there (json_diff applies diffs to a FULL before
        # image only; tests/unit/binlog/test_json_diff.py applies them to #30's documents).
        cause=("partial JSON update", "the old JSON document", "is not in the binlog"),
        remedy=("SET GLOBAL binlog_row_image=FULL", "binlake snapshot --table mysql.t"),
    ),
]


# -- the fixtures and the stub's binlog dump ---------------------------------------------------------


def test_every_copied_fixture_file_has_the_checksum_its_provenance_gives() -> None:
    """The files are byte-exact copies (PROVENANCE.md, "Checksums"), and every file here is listed there."""
    text = (FIXTURES / "PROVENANCE.md").read_text()
    listed = dict(
        (path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", text, flags=re.MULTILINE)
    )
    present = {path.relative_to(FIXTURES).as_posix() for path in FIXTURES.rglob("*") if path.is_file()}
    assert set(listed) == present - {"PROVENANCE.md"}
    for path, digest in listed.items():
        assert hashlib.sha256((FIXTURES / path).read_bytes()).hexdigest() == digest, path


def _dump(stub: MySQLStub, name: str, position: int, *, checksum: bool = True) -> list[bytes]:
    """The packets of a non-blocking COM_BINLOG_DUMP, as a replica reads them (up to the EOF packet)."""
    connection = pymysql.connect(host="127.0.0.1", port=stub.port, user=stub.user, password=stub.password)
    try:
        if checksum:
            connection.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        connection._execute_command(COM_BINLOG_DUMP, struct.pack("<IHI", position, BINLOG_DUMP_NON_BLOCK, 99)
                                    + name.encode())
        packets = []
        while not (packet := connection._read_packet()).is_eof_packet():
            packets.append(packet.get_all_data())
        return packets
    finally:
        connection.close()


def _header(event: bytes) -> tuple[int, int, int, int, int, int]:
    """timestamp, type code, server_id, event size, log_pos, flags."""
    return struct.unpack_from("<IBIIIH", event)


def _digest(parts: Iterable[bytes]) -> str:
    return hashlib.sha256(b"".join(parts)).hexdigest()


def _crc_holds(event: bytes) -> bool:
    return struct.unpack("<I", event[-4:])[0] == zlib.crc32(event[:-4])


def test_the_stub_streams_a_binlog_file_as_mysqls_binlog_sender() -> None:
    file = BinlogFile.read(FIXTURES / "rust_mysql_common/mysql-enum-string-set.000001")
    with MySQLStub.serving([file], []) as stub:
        whole = _dump(stub, file.name, 4)
        middle = file.events[6].pos  # the GTID event of the first row transaction
        assert file.events[6].type_code == 33
        resumed = _dump(stub, file.name, middle)
        with pytest.raises(pymysql.err.OperationalError, match="1236.*Could not find first log file"):
            _dump(stub, "binlog.000099", 4)
        with pytest.raises(pymysql.err.OperationalError, match="1236.*invalid position"):
            _dump(stub, file.name, middle + 1)
        with pytest.raises(pymysql.err.OperationalError, match="1236.*checksum"):
            _dump(stub, file.name, 4, checksum=False)
    assert (stub.version, stub.variables["binlog_checksum"], stub.variables["server_id"]) == ("8.0.28", "CRC32", "1")
    # Each event after an OK byte; first a fake ROTATE (timestamp and log_pos 0, artificial) naming the start.
    assert all(packet[0] == 0 for packet in whole + resumed)
    rotate = whole[0][1:]
    assert _header(rotate)[:2] == (0, 4) and _header(rotate)[4:] == (0, 0x20) and _crc_holds(rotate)
    assert rotate[19:-4] == struct.pack("<Q", 4) + file.name.encode()
    # From the file's start: the file's bytes, checksums included, event for event (compared by digest: they hold
    # the SECRET event of PROVENANCE.md, which a failing comparison would print).
    assert [len(packet) - 1 for packet in whole[1:]] == [len(event.raw) for event in file.events]
    assert _digest(packet[1:] for packet in whole[1:]) == _digest([file.data[4:]])
    # From further on: the FORMAT_DESCRIPTION with log_pos 0 and a checksum that holds, then the file from there.
    description = resumed[1][1:]
    assert _header(description)[1] == 15 and _header(description)[4] == 0 and _crc_holds(description)
    original = file.format_description.raw
    assert description[:13] + description[17:-4] == original[:13] + original[17:-4]
    assert b"".join(packet[1:] for packet in resumed[2:]) == file.data[middle:]


def test_a_file_closed_by_a_rotate_is_followed_by_the_file_it_names() -> None:
    file = BinlogFile.read(FIXTURES / "rust_mysql_common/time_issue.000001")
    with MySQLStub.serving([file], []) as stub, pymysql.connect(
        host="127.0.0.1", port=stub.port, user=stub.user, password=stub.password
    ) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW BINARY LOGS")
        logs = cursor.fetchall()
        packets = _dump(stub, file.name, 4)
    assert logs == (("time_issue.000001", 472, "No"), ("binlog.000005", 4 + len(file.format_description.raw), "No"))
    events = [packet[1:] for packet in packets[1:]]
    assert b"".join(events[:-1]) == file.data[4:]
    assert events[-1] == file.format_description.raw  # the next file's FORMAT_DESCRIPTION, at its own position


# -- the replay -------------------------------------------------------------------------------------


def _gtid(event_raw: bytes) -> tuple[str, int]:
    """A GTID event's server UUID and transaction number (body: flags, 16-byte SID, 8-byte GNO)."""
    import uuid

    body = event_raw[19:]
    return str(uuid.UUID(bytes=body[1:17])), struct.unpack_from("<q", body, 17)[0]


def _start_and_gtid_sets(replay: Replay, file: BinlogFile) -> tuple[int, str | None, str | None]:
    """Where the file's first row transaction begins (its GTID event), and Executed_Gtid_Set there and at the end."""
    events = file.events
    first_rows = next(index for index, event in enumerate(events) if event.type_code in ROW_CARRYING)
    opening = max(index for index in range(first_rows) if events[index].type_code in GTID_EVENTS)
    if replay.gtid_sets is not None:
        return events[opening].pos, *replay.gtid_sets
    gtids = [_gtid(event.raw) for event in events if event.type_code == 33]
    if not gtids:
        return events[opening].pos, None, None
    previous = next(event for event in events if event.type_code == 35)  # PREVIOUS_GTIDS
    assert struct.unpack_from("<q", previous.raw, 19)[0] == 0, "derived sets assume an empty PREVIOUS_GTIDS"
    (uuid,) = {uuid for uuid, _ in gtids}
    before = [gno for _, gno in gtids[:sum(1 for event in events[:opening] if event.type_code == 33)]]
    assert before == list(range(1, len(before) + 1)) and [gno for _, gno in gtids] == list(range(1, len(gtids) + 1))
    return events[opening].pos, f"{uuid}:1-{len(before)}" if before else "", f"{uuid}:1-{len(gtids)}"


def _config(stub: MySQLStub, tmp_path: Path, table: StubTable) -> PipelineConfig:
    return parse_config({
        "pipeline": PIPELINE,
        "source": {"host": "127.0.0.1", "port": stub.port, "user": stub.user, "password": stub.password,
                   "server_id": 4242, "tables": [f"{table.database}.{table.name}"], "connect_timeout": 5},
        "sink": {"path": str(tmp_path / "lake")},
        "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
        # One source transaction per batch, so each Delta version is the table after one transaction.
        "batch": {"max_events": 1},
    })


def _comparable(rows: list[Row], table: StubTable) -> list[Row]:
    json_columns = [column.name for column in table.columns if column.data_type == "json"]
    # JSON compares as structure: Delta holds its text, the expectations the documents.
    parsed = [{**row, **{name: json.loads(row[name]) for name in json_columns if isinstance(row[name], str)}}
              for row in rows]
    return sorted(parsed, key=lambda row: tuple(row[key] for key in table.primary_key))


#: A replay ready to run: the fixture, the stub serving it, the pipeline config, the snapshot's position.
Replayed = tuple[Replay, MySQLStub, PipelineConfig, int]


@pytest.fixture
def replayed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replayed]:
    replay: Replay = request.param
    file = replay.file()
    start, start_gtids, end_gtids = _start_and_gtid_sets(replay, file)
    stub = MySQLStub.serving([file], [replay.table])
    if end_gtids is not None:
        stub.variables.update(gtid_mode="ON", gtid_executed=end_gtids,
                              server_uuid=end_gtids.split(":")[0])
    else:
        stub.variables.update(gtid_mode="OFF", gtid_executed="")
    stub.start()
    try:
        config = _config(stub, tmp_path, replay.table)
        identity = ServerIdentity(server_id=int(stub.variables["server_id"]), server_uuid=stub.variables["server_uuid"])
        write_snapshot_commit(config, stub_schema(replay.table), replay.snapshot,
                        BinlogPosition(file.name, start, start_gtids, identity))
        yield replay, stub, config, start
    finally:
        stub.stop()


def _replay(replay: Replay, config: PipelineConfig) -> tuple[list[list[Row]], TableState]:
    """Sync until caught up; the Delta table after each batch (read with `deltalake`), and the table's state."""
    name = f"{replay.table.database}.{replay.table.name}"
    Pipeline(config).sync(until_caught_up=True)
    table_state = Pipeline(config).read_state().tables[name]
    path = config.sink.table_path(replay.table.database, replay.table.name)
    latest = DeltaTable(path).version()
    versions = [
        _comparable(DeltaTable(path, version=version).to_pyarrow_table().to_pylist(), replay.table)
        for version in range(1, latest + 1)
    ]
    return versions, table_state


def _replay_and_compare(replay: Replay, stub: MySQLStub, config: PipelineConfig, start: int) -> None:
    versions, table_state = _replay(replay, config)
    stopped = f"the table stopped: {table_state.error}"
    assert versions == [_comparable(rows, replay.table) for rows in replay.versions], stopped
    assert table_state.error is None, stopped
    # The offset went past every transaction of the file, with the server's executed GTID set.
    assert table_state.position.gtid == (stub.variables["gtid_executed"] or None)
    assert table_state.position >= BinlogPosition(stub.binlogs[0].name, len(stub.binlogs[0].data))
    # A dump per batch, each from where the table's offset stood (past the file's start: the stub sent the
    # FORMAT_DESCRIPTION with log_pos 0 each time), the first from the snapshot's position.
    dumps = [int(query.rstrip(">").rsplit(":", 1)[1]) for query in stub.queries if query.startswith("<COM_BINLOG_DUMP")]
    assert len(dumps) >= len(replay.versions) and dumps == sorted(dumps) and dumps[0] == start


@pytest.mark.parametrize("replayed", APPLIED, ids=[replay.id for replay in APPLIED], indirect=True)
def test_real_mysql_binlog_replays_into_delta(replayed: Replayed) -> None:
    _replay_and_compare(*replayed)


@pytest.mark.parametrize("replayed", APPLIED_BY_POSITION, ids=[replay.id for replay in APPLIED_BY_POSITION],
                         indirect=True)
def test_real_mysql_binlog_with_minimal_row_metadata_replays_into_delta(replayed: Replayed) -> None:
    _replay_and_compare(*replayed)


@pytest.mark.parametrize(
    ("replayed", "stop"), [(stop.replay, stop) for stop in STOPPED], ids=[stop.replay.id for stop in STOPPED],
    indirect=["replayed"],
)
def test_real_mysql_binlog_stops_the_table_loudly_where_it_cannot_apply_exactly(
    replayed: Replayed, stop: Stopped
) -> None:
    replay, _, config, start = replayed
    versions, table_state = _replay(replay, config)
    # What the binlog holds exactly lands, one version per transaction; nothing after the stop does.
    assert versions == [_comparable(rows, replay.table) for rows in replay.versions]
    assert table_state.error is not None, "the table was not stopped"
    cause, _, remedy = table_state.error.partition(" — remedy: ")
    assert all(fragment in cause for fragment in stop.cause), cause
    assert all(fragment in remedy for fragment in stop.remedy), remedy
    # The table's offset stays before the transaction it could not apply, so a fix and a resume replays it.
    assert start <= table_state.position.pos < len(replay.file().data)
