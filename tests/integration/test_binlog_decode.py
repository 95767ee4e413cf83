"""`binlake binlog decode` on real MySQL and MariaDB binlog bytes (issue 27, item 1).

Every binlog file under tests/fixtures/mysql-binlogs/ (15; PROVENANCE.md there: origin, license, expected values and
their grade) is decoded offline through the sync's own reader, and its values are compared with the ones PROVENANCE.md
gives, each graded as there: ASSERTED (the origin's own test checks it), REFERENCE (the origin's SQL or Oracle
`mysqlbinlog -vvvvvv` output, compared event for event where it exists), OBSERVED (a hint). Values are binlake's
(docs/types.md): BIT as a number, ENUM and SET as their labels, JSON as its text, TIME as MySQL's text. Then the
command itself, run as a user runs it: text and JSON Lines, --start/--stop, several files, and bad input.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.binlog.decode import DecodedEvent, decode_files
from cdc_lib.display.binlog_events import JSON_KEYS, text_value
from cdc_lib.errors import BinlogFileError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs"
RUST = FIXTURES / "rust_mysql_common"
CDC_RS = FIXTURES / "mysql-cdc-rs"

#: rust_mysql_common's strings (PROVENANCE.md, mysql-enum-string-set): S is 100 characters, L 298.
S = "0123456789" * 10
L = ("0123456789" * 12 + "012345678") * 2 + "0123456789" * 4

Row = dict[str, Any]


def decode(path: Path, **options: Any) -> list[DecodedEvent]:
    return list(decode_files([path], **options))


def rows(events: list[DecodedEvent], *, verdict: str = "applied",
         table: str | None = None) -> list[tuple[str | None, Row | None, Row | None]]:
    """(operation, before, after) of every row of the rows events with `verdict` (of `table`), in order."""
    return [(event.operation, row.before, row.after) for event in events if event.operation and
            event.verdict == verdict and table in (None, event.table) for row in event.rows]


def of_type(events: list[DecodedEvent], name: str) -> list[DecodedEvent]:
    return [event for event in events if event.type == name]


def every_event_read(path: Path, events: list[DecodedEvent]) -> None:
    """Every event of the file was read, back to back, to the file's last byte (ASSERTED by the origins: every
    event parses), and none stops every table."""
    outer = sorted({(event.pos, event.end) for event in events})
    assert outer[0][0] == 4 and outer[-1][1] == path.stat().st_size
    assert all(end == following for (_, end), (following, _) in zip(outer, outer[1:], strict=False))
    assert not [event for event in events if event.verdict == "stops_all"]


# -- mysqlbinlog's own text (REFERENCE) ------------------------------------------------------------------------


def mysqlbinlog_rows(dump: Path) -> list[tuple[str, str, list[dict[str, str]]]]:
    """The `###` rows of an Oracle `mysqlbinlog -vvv` dump: (operation, table, images as {@N: text}) per row."""
    found: list[tuple[str, str, list[dict[str, str]]]] = []
    image: dict[str, str] | None = None
    for line in dump.read_text(encoding="utf-8").splitlines():
        statement = re.match(r"### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`\.`([^`]*)`", line)
        if statement:
            operation = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}[statement.group(1)]
            found.append((operation, f"{statement.group(2)}.{statement.group(3)}", []))
        elif line.strip() in ("### WHERE", "### SET"):
            image = {}
            found[-1][2].append(image)
        else:
            value = re.match(r"###   (@\d+)=(.*?)(?: /\*.*\*/)?$", line)
            if value and image is not None:
                image[value.group(1)] = value.group(2)
    return found


def dump_ends(dump: Path) -> list[int]:
    return [int(end) for end in re.findall(r"end_log_pos (\d+) CRC32", dump.read_text(encoding="utf-8"))]


def as_mysqlbinlog(events: list[DecodedEvent]) -> list[tuple[str, str, list[dict[str, str]]]]:
    """The decoded rows in the dump's shape, each value as binlake's text output writes it."""
    shaped = []
    for event in events:
        for row in event.rows:
            images = [image for image in (row.before, row.after) if image is not None]
            shaped.append((event.operation or "", event.table or "",
                           [{name: text_value(value) for name, value in image.items()} for image in images]))
    return shaped


# -- one test per fixture file ---------------------------------------------------------------------------------

INT_ROW = {"@1": 1, "@2": 11, "@3": 111, "@4": 1111, "@5": 11111, "@6": 1}
INT_UPDATED = {**INT_ROW, "@2": 22, "@3": 222}
INT_TYPES = ["tinyint", "smallint", "mediumint", "int", "bigint", "tinyint"]


@pytest.mark.parametrize(("folder", "expected"), [
    ("19_30_Table_map_event_Write_rows_log_event/binlog.000018", [("insert", None, INT_ROW)]),
    ("31_update_rows_v2/binlog.000001", [("insert", None, INT_ROW), ("update", INT_ROW, INT_UPDATED)]),
    ("32_delete_rows_v2/binlog.000001",
     [("insert", None, INT_ROW), ("update", INT_ROW, INT_UPDATED), ("delete", INT_UPDATED, None)]),
], ids=["19_30", "31_update_rows_v2", "32_delete_rows_v2"])
def test_mysql_cdc_rs_int_table_as_mysqlbinlog_shows_it(folder: str, expected: list[Any]) -> None:
    path = CDC_RS / folder
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED (test_8_0.rs): the TABLE_MAP of int_table, 6 columns, MINIMAL metadata (no names: @1 … @6 here), and
    # the row images; table_id 90/91 is the library's.
    maps = of_type(events, "TABLE_MAP_EVENT")
    assert {event.table for event in maps} == {"test.int_table"}
    assert all(event.metadata == "minimal" for event in maps)
    assert [(column["name"], column["type"]) for column in maps[0].columns] == [
        (f"@{n}", kind) for n, kind in enumerate(INT_TYPES, 1)
    ]
    assert rows(events) == expected
    # REFERENCE: Oracle mysqlbinlog's dump of the same file, event for event (end positions) and row for row.
    dump = path.parent / "dump.txt"
    assert [event.end for event in events if event.in_payload is None] == dump_ends(dump)
    assert as_mysqlbinlog([event for event in events if event.operation]) == mysqlbinlog_rows(dump)


CHINESE = (
    "使用箭头标记 -> 不是 SQL 语句的一部分，它仅仅表示一个新行，"
    "如果一条 SQL 语句太长，我们可以通过回车键来创建一个新行来编写 SQL 语句，SQL 语句的命令结束符为分号 ;。"
)


def test_mysql_cdc_rs_02_query_bigger() -> None:
    path = CDC_RS / "02_query_bigger/binlog.000733"
    events = decode(path)
    every_event_read(path, events)  # ASSERTED (test_context_position_check): the parse ends at 7843, the length
    assert path.stat().st_size == 7843
    lineitem = rows(events, table="test.LINEITEM")
    # REFERENCE (sql.sql; OBSERVED decoding agrees): DECIMALs, DATEs (written with a time, stored as DATE), a
    # multi-byte utf8mb3 comment, an UPDATE keeping a trailing space, two DELETEs.
    first = lineitem[0][2]
    assert first == {
        "@1": 1234567890111, "@2": 1235111, "@3": 13711, "@4": 888878711, "@5": Decimal("99.911"),
        "@6": Decimal("76.11"), "@7": Decimal("888.1"), "@8": Decimal("109.1"), "@9": "code", "@10": "Y",
        "@11": dt.date(1990, 8, 1), "@12": dt.date(1990, 6, 1), "@13": dt.date(1990, 1, 1), "@14": "test@test.com",
        "@15": "test", "@16": "com",
    }
    inserted = [after or {} for _, _, after in lineitem[1:6]]
    assert [row["@1"] for row in inserted] == list(range(12345678909876, 12345678909881))
    assert [row["@16"] for row in inserted] == ["com", "com", CHINESE, "com", "com"]
    operation, before, after = lineitem[6]
    assert operation == "update" and before is not None and after is not None
    assert (before["@1"], before["@5"], before["@9"]) == (12345678909877, Decimal("99.997"), "code")
    assert (after["@5"], after["@9"]) == (Decimal("88.880"), "update L_RETURNFLAG ")
    assert [(operation, before["@1"]) for operation, before, _ in lineitem[7:] if before] == [
        ("delete", 12345678909880), ("delete", 12345678909879)]
    demo = [after for _, _, after in rows(events, table="test.Demo")]
    # OBSERVED: Demo's @10 is NULL in rows 1 and 3, @16 in all rows.
    assert [row["@10"] if row else "?" for row in demo] == [None, "Y", None, "Y", "Y"]
    assert all(row is not None and row["@16"] is None for row in demo)
    # Demo is dropped and created again in the file: the sync stops a followed table there.
    assert [event.verdict for event in of_type(events, "QUERY_EVENT") if event.statement
            and event.statement.startswith("DROP TABLE")] == ["stops_table"]


def test_rust_json_binlog_partial_json_diff() -> None:
    path = RUST / "json.binlog.000001"
    events = decode(path)
    every_event_read(path, events)  # ASSERTED (binlog_event_roundtrip): every event parses
    documents = [(n, name, age, letter) for n, (name, age, letter) in
                 enumerate([("Joe", 24, "x"), ("Sue", 32, "y"), ("Pete", 40, "z")] * 2, 1)]

    def person(n: int, name: str, age: int, letter: str) -> Row:
        return {"@1": n, "@2": {"age": age, "data": letter * 10, "name": name}, "@3": name, "@4": age}

    def parsed(image: Row | None) -> Row | None:
        return None if image is None else {**image, "@2": json.loads(image["@2"])}

    applied = [(operation, parsed(before), parsed(after)) for operation, before, after in rows(events)]
    # OBSERVED: three single-row WRITEs, one of three rows, then the UPDATE of all six, age + 1.
    assert applied == [("insert", None, person(*doc)) for doc in documents] + [
        ("update", person(n, name, age, letter), person(n, name, age + 1, letter))
        for n, name, age, letter in documents
    ]
    (partial,) = of_type(events, "PARTIAL_UPDATE_ROWS_EVENT")
    # OBSERVED: a MINIMAL before image (@1 only) and one REPLACE of $.age per row. The sync stops the table here:
    # the old document the diff applies to is not in the binlog (docs/bad-input.md).
    assert partial.verdict == "stops_table" and "before image without every column" in (partial.error or "")
    assert [row.before for row in partial.rows] == [{"@1": n} for n in range(1, 7)]
    assert [row.diffs for row in partial.rows] == [
        {"@2": [{"operation": "REPLACE", "path": "$.age", "value": age + 2}]} for _, _, age, _ in documents
    ]
    assert [(row.after or {}).get("@4") for row in partial.rows] == [age + 2 for _, _, age, _ in documents]
    # The ALTER USER statement (SECRET in PROVENANCE.md) is shown without its hash.
    secret = [event for event in events if event.statement and "ALTER USER" in event.statement]
    assert secret and all(event.statement == "ALTER USER 'root'@'localhost' IDENTIFIED <redacted>" for event in secret)


def test_rust_transaction_compression() -> None:
    path = RUST / "transaction_compression.000001"
    events = decode(path)
    every_event_read(path, events)
    inside = [event for event in events if event.in_payload is not None]
    # ASSERTED: the payload decompresses to exactly QUERY, TABLE_MAP, WRITE_ROWS (v2), XID.
    assert [(event.in_payload, event.type) for event in inside] == [
        (1, "QUERY_EVENT"), (2, "TABLE_MAP_EVENT"), (3, "WRITE_ROWS_EVENT_V2"), (4, "XID_EVENT")]
    assert {(event.pos, event.end) for event in inside} == {(274, 431)}  # all at the payload event's place
    # OBSERVED: BEGIN, the row (1), xid 462.
    assert inside[0].statement == "BEGIN"
    assert rows(events) == [("insert", None, {"@1": 1})]
    assert "xid 462" in inside[3].why
    # PROVENANCE: the TABLE_MAP's one optional field is SIGNEDNESS [signed], 3 bytes at the inner event's end, which
    # python-mysql-replication alone would take for a checksum (inner events have none) and skip.
    assert not [note for note in inside[1].notes if "SIGNEDNESS" in note], inside[1].notes


def test_connector_java_compressed_update() -> None:
    path = FIXTURES / "mysql-binlog-connector-java/mysql-bin.compressed"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED (testNextEventCompressed): 5 events, the payload counted as one.
    assert len({event.pos for event in events}) == 5
    # OBSERVED: the movie's row, before and after: only @5 changes.
    ((operation, before, after),) = rows(events)
    assert operation == "update" and before is not None and after is not None
    assert (before["@1"], before["@2"], before["@3"], before["@5"]) == (1, "Once Upon a Time in the West", 1968,
                                                                          "Western")
    assert after == {**before, "@5": "Western|Action"}
    assert before["@6"].startswith("Claudia Cardinale|Charles Bronson") and before["@11"] == "Paramount Pictures"
    assert "xid 31" in of_type(events, "XID_EVENT")[0].why


def test_rust_gtid_tag_row() -> None:
    path = RUST / "binlog_transaction_with_GTID_TAG.000001"
    events = decode(path)
    every_event_read(path, events)
    assert rows(events) == [("insert", None, {"@1": 3, "@2": 100, "@3": Decimal("250.00")})]  # OBSERVED
    (tagged,) = of_type(events, "GTID_TAGGED_LOG_EVENT")
    assert tagged.verdict == "applied" and tagged.transaction == 1


def test_rust_gtid_tag_gtids() -> None:
    events = decode(RUST / "binlog_transaction_with_GTID_TAG.000001")
    # ASSERTED (gtid_tagged_log_event_from_binlog): the set before the file and the transaction's tagged GTID.
    assert of_type(events, "PREVIOUS_GTIDS_LOG_EVENT")[0].gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    assert of_type(events, "GTID_TAGGED_LOG_EVENT")[0].gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


def test_rust_previous_gtids_untagged() -> None:
    path = RUST / "binlog_transaction_previous_GTID_no_tag.000001"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED (untagged_previous_gtids_event_from_binlog): one entry, uuid b9b88c66-…, interval [1, 3).
    assert [(event.type, event.verdict, event.gtid) for event in events] == [
        ("FORMAT_DESCRIPTION_EVENT", "harmless", None),
        ("PREVIOUS_GTIDS_LOG_EVENT", "harmless", "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"),
        ("ROTATE_EVENT", "applied", None),
    ]
    assert "binlog.000008" in events[2].why


def test_rust_enum_string_set() -> None:
    path = RUST / "mysql-enum-string-set.000001"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED (binlog_event_roundtrip): ENUM index 1/2 and SET bitmask 0b0101/0b1010, as binlake's labels from the
    # ENUM_STR_VALUE / SET_STR_VALUE metadata; full metadata, so the columns keep their names.
    written = {"f1": S, "f2": L, "f3": "var1", "f4": "one,three", "f5": "0123456789"}
    updated = {"f1": "field1", "f2": "field_2", "f3": "variant2", "f4": "two,four", "f5": L}
    assert rows(events) == [("insert", None, written), ("update", written, updated), ("delete", updated, None)]
    assert of_type(events, "TABLE_MAP_EVENT")[0].columns[2:4] == [
        {"name": "f3", "type": "enum('var1','variant2','foo')", "nullable": True, "charset": "utf8mb4", "key": False},
        {"name": "f4", "type": "set('one','two','three','four')", "nullable": True, "charset": "utf8mb4",
         "key": False},
    ]
    assert [event.gtid for event in of_type(events, "GTID_LOG_EVENT")] == [
        f"93e95066-a2f4-11ec-9b69-9657f0ae95e2:{n}" for n in range(1, 6)]


def test_rust_minimal_row_metadata() -> None:
    path = RUST / "minimal_row_metadata.000001"
    events = decode(path)
    every_event_read(path, events)
    (table_map,) = of_type(events, "TABLE_MAP_EVENT")
    assert table_map.metadata == "minimal" and any("MINIMAL" in note for note in table_map.notes)
    # ASSERTED: @3 has collation 255 (utf8mb4_0900_ai_ci); @5 is INT UNSIGNED 3230202323 (SIGNEDNESS applied
    # though the TABLE_MAP has no names; signed it would be -1064764973).
    assert table_map.columns[2]["charset"] == "utf8mb4" and table_map.columns[1]["type"] == "blob"
    assert table_map.columns[4]["type"] == "int unsigned"
    # A MINIMAL row image (@1, @3, @5 only): the sync stops the table; the decode shows what the image holds.
    (write,) = of_type(events, "WRITE_ROWS_EVENT_V2")
    assert write.verdict == "stops_table" and "row image without every column" in (write.error or "")
    assert rows(events, verdict="stops_table") == [("insert", None, {"@1": 1, "@3": "a", "@5": 3230202323})]


def test_rust_time_issue() -> None:
    path = RUST / "time_issue.000001"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED: negative, 21 days 3:48:27 — MySQL's text -507:48:27 (binlake's TIME mapping).
    assert rows(events) == [("insert", None, {"@1": "-507:48:27"})]
    (table_map,) = of_type(events, "TABLE_MAP_EVENT")
    assert table_map.columns == [{"name": "@1", "type": "time", "nullable": True, "charset": None, "key": False}]


def test_rust_bit() -> None:
    path = RUST / "mysql_type_bit.000001"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED: a = 0x04, b = "foo", c = 0x20; BIT is a number in binlake (docs/types.md).
    assert rows(events) == [("insert", None, {"a": 4, "b": "foo", "c": 32})]
    assert [(column["name"], column["type"]) for column in of_type(events, "TABLE_MAP_EVENT")[0].columns] == [
        ("a", "bit(3)"), ("b", "text"), ("c", "bit(8)")]


def test_rust_invisible_columns() -> None:
    path = RUST / "binlog-invisible-columns.000001"
    events = decode(path)
    every_event_read(path, events)
    # ASSERTED: the optional metadata reads (names, signedness, charsets of all three TABLE_MAPs).
    assert [[column["type"] for column in event.columns] for event in of_type(events, "TABLE_MAP_EVENT")] == [
        ["int unsigned", "int unsigned", "int", "text", "blob", "bigint unsigned"]] * 3
    # OBSERVED: invisible columns are in the images like any other; BIGINT UNSIGNED is a DECIMAL(20,0) in binlake.
    first = {"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": b"\x05", "f6": Decimal(6000000000)}
    second = {"f1": None, "f2": None, "f3": -33, "f4": "44", "f5": b"U", "f6": None}
    assert rows(events) == [("insert", None, first), ("insert", None, second),
                            ("update", second, {**second, "f1": 111, "f2": 222, "f3": -333, "f4": "444"})]
    assert events[-1].type == "STOP_EVENT" and events[-1].verdict == "harmless"


def test_rust_mariadb() -> None:
    path = RUST / "mariadb-bin.000001"
    events = decode(path)
    every_event_read(path, events)
    maps = of_type(events, "TABLE_MAP_EVENT")
    # ASSERTED: names, PRI_KEY on id only, and the charsets 45 (utf8mb4_general_ci) of topic and event_type, 63
    # (binary) of event.
    assert [(column["name"], column["type"], column["charset"], column["key"]) for column in maps[0].columns] == [
        ("id", "int", None, True), ("topic", "varchar(1020)", "utf8mb4", False),
        ("event_type", "enum('BLOB','JSON','PROTOBUF')", "utf8mb4", False), ("event", "blob", None, False),
        ("created", "timestamp", None, False),
    ]
    # OBSERVED: MariaDB GTIDs 0-1-1 and 0-1-2, ANNOTATE_ROWS passed as harmless, v1 WRITE_ROWS, xids 800 and 820.
    assert [event.gtid for event in of_type(events, "GTID_EVENT")] == ["0-1-1", "0-1-2"]
    assert [(event.verdict, event.statement) for event in of_type(events, "ANNOTATE_ROWS_EVENT")] == [
        ("harmless", "insert into outbox (topic, event_type, event) values ('foo', 'JSON', '{\"foo\":1}')")] * 2
    created = [dt.datetime(2022, 4, 20, 22, 18, 4, tzinfo=dt.UTC), dt.datetime(2022, 4, 20, 22, 19, 55, tzinfo=dt.UTC)]
    assert rows(events) == [
        ("insert", None, {"id": key, "topic": "foo", "event_type": "JSON", "event": b'{"foo":1}', "created": when})
        for key, when in zip((62, 63), created, strict=True)
    ]
    assert ["xid 800" in event.why or "xid 820" in event.why for event in of_type(events, "XID_EVENT")] == [True, True]


def test_every_fixture_file_has_a_decode_test() -> None:
    binlogs = sorted(path.relative_to(FIXTURES).as_posix() for path in FIXTURES.rglob("*")
                     if path.is_file() and path.read_bytes()[:4] == b"\xfebin")
    assert len(binlogs) == 15
    source = Path(__file__).read_text()
    for name in binlogs:
        assert Path(name).name in source or Path(name).parent.name.split("_")[0] in source, name


# -- the command ----------------------------------------------------------------------------------------------


def binlake(*arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "TZ": "UTC"}
    environment.pop("BINLAKE_CONFIG", None)  # the command needs no config
    return subprocess.run([sys.executable, "-m", "cdc_lib.cli", "binlog", "decode", *arguments],
                          capture_output=True, text=True, env=environment, timeout=120)


def test_the_command_writes_json_lines_with_stable_keys() -> None:
    done = binlake(str(RUST / "mysql-enum-string-set.000001"), "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(list(line) == list(JSON_KEYS) for line in lines)
    assert [line["pos"] for line in lines][:3] == [4, 126, 157]
    (write,) = [line for line in lines if line["type"] == "WRITE_ROWS_EVENT_V2"]
    assert write["rows"] == [{"before": None, "after": {"f1": S, "f2": L, "f3": "var1", "f4": "one,three",
                                                         "f5": "0123456789"}, "diffs": {}}]
    assert (write["verdict"], write["table"], write["operation"], write["transaction"]) == (
        "applied", "mysql.t", "insert", 3)
    assert write["gtid"] == "93e95066-a2f4-11ec-9b69-9657f0ae95e2:3"
    bits = binlake(str(RUST / "binlog-invisible-columns.000001"), "--json")
    first = next(json.loads(line) for line in bits.stdout.splitlines() if '"WRITE_ROWS_EVENT_V2"' in line)
    assert first["rows"][0]["after"] == {"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": {"hex": "05"}, "f6": "6000000000"}


def test_the_command_writes_a_block_per_transaction() -> None:
    done = binlake(str(CDC_RS / "31_update_rows_v2/binlog.000001"))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("# file binlog.000001\n")
    block = text[text.index("# transaction 4"):]
    assert re.search(r"^at 1355 +UPDATE_ROWS_EVENT_V2 +applied  update test.int_table", block, re.MULTILINE)
    assert "    before: @1=1, @2=11, @3=111, @4=1111, @5=11111, @6=1\n" in block
    assert "    after : @1=1, @2=22, @3=222, @4=1111, @5=11111, @6=1\n" in block
    assert "metadata minimal: @1 tinyint, @2 smallint, @3 mediumint, @4 int, @5 bigint, @6 tinyint" in block
    assert re.search(r"^at 234 +QUERY_EVENT +stops_table  test.int_table", text, re.MULTILINE)  # the DROP TABLE


def test_start_and_stop_are_byte_positions_and_several_files_are_one_stream() -> None:
    path = RUST / "mysql-enum-string-set.000001"
    done = binlake(str(path), "--json", "--start", "1560", "--stop", "2659")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # The FORMAT_DESCRIPTION is read (the events need it) but not shown; the update's transaction only.
    assert [line["pos"] for line in lines] == [1560, 1639, 1724, 1855, 2628]
    assert [line["operation"] for line in lines if line["operation"]] == ["update"]
    inside = binlake(str(path), "--start", "1561")
    assert inside.returncode != 0 and inside.stdout == ""
    assert "--start 1561 is not where an event of mysql-enum-string-set.000001 starts" in inside.stderr
    assert "remedy:" in inside.stderr
    both = list(decode_files([RUST / "time_issue.000001", RUST / "minimal_row_metadata.000001"], stop=312))
    assert [(event.file, event.pos) for event in both] == [
        ("time_issue.000001", pos) for pos in (4, 126, 157, 236, 312, 358, 397, 428)
    ] + [("minimal_row_metadata.000001", pos) for pos in (4, 126, 157, 236)]


def test_a_file_that_is_not_a_binlog_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a binlog\n")
    done = binlake(str(text))
    assert done.returncode != 0 and done.stdout == ""
    assert f"{text} is not a binlog file: it does not start with the bytes fe 62 69 6e — remedy:" in done.stderr


def test_a_truncated_file_prints_what_came_before_then_the_error(tmp_path: Path) -> None:
    cut = tmp_path / "binlog.000001"
    cut.write_bytes((RUST / "mysql-enum-string-set.000001").read_bytes()[:2000])
    done = binlake(str(cut))
    assert done.returncode != 0
    assert re.search(r"^at 1724 +TABLE_MAP_EVENT", done.stdout, re.MULTILINE)  # the last whole event before the cut
    assert "UPDATE_ROWS" not in done.stdout
    assert ("binlog.000001 ends at byte 2000, inside its 773-byte event starting at 1855: the file is cut short"
            in done.stderr)
    assert "remedy: copy the file again once the server has rotated past it, or decode up to the cut: --stop 1855" \
        in done.stderr
    with pytest.raises(BinlogFileError):
        list(decode_files([cut]))


def _event(code: int, flags: int, body: bytes, pos: int) -> bytes:
    """A checksummed v4 event: timestamp, type, server_id, size, next position, flags, body, CRC32."""
    size = 19 + len(body) + 4
    header = struct.pack("<IBIIIH", 1700000000, code, 1, size, pos + size, flags)
    return header + body + struct.pack("<I", zlib.crc32(header + body))


def test_an_unknown_event_type_stops_every_table_and_says_so(tmp_path: Path) -> None:
    data = (RUST / "time_issue.000001").read_bytes()
    unknown = tmp_path / "binlog.000002"
    unknown.write_bytes(data + _event(200, 0, b"who knows", len(data)))
    done = binlake(str(unknown))
    assert done.returncode == 1
    assert "@1='-507:48:27'" in done.stdout  # everything before it is printed
    assert re.search(r"^at 472 +event type 200 +stops_all", done.stdout, re.MULTILINE)
    assert ("binlake: error: the sync stops every table at binlog.000002:472: event type 200 (unknown to binlake, "
            "and not flagged ignorable): binlake cannot turn it into row changes" in done.stderr)
    assert "remedy: re-snapshot the tables" in done.stderr
    ignorable = tmp_path / "binlog.000003"
    ignorable.write_bytes(data + _event(200, 0x80, b"who knows", len(data)))
    passed = binlake(str(ignorable), "--json")
    assert passed.returncode == 0, passed.stderr
    last = json.loads(passed.stdout.splitlines()[-1])
    assert (last["pos"], last["verdict"], last["why"]) == (472, "harmless", "unknown, flagged ignorable by the server")


def _without_optional_metadata(data: bytes) -> bytes:
    """The binlog with every TABLE_MAP's optional metadata cut (as a server with binlog_row_metadata MINIMAL and no
    charset or signedness to log would write it), sizes and checksums made right again. Positions after a cut move;
    the decode places events by their bytes in the file."""
    out, pos = bytearray(data[:4]), 4
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        event = data[pos:pos + size]
        if event[4] == 19:
            body = event[19:-4]
            at = 8 + 1 + body[8] + 1
            at += 1 + body[at] + 1
            columns = body[at]  # fewer than 251 columns: one byte
            at += 1 + columns
            at += 1 + body[at]  # metadata block (shorter than 251 bytes)
            at += (columns + 7) // 8
            body = body[:at]
            header = event[:9] + struct.pack("<I", 19 + len(body) + 4) + event[13:19]
            event = header + body + struct.pack("<I", zlib.crc32(header + body))
        out += event
        pos += size
    return bytes(out)


def test_a_table_map_without_optional_metadata_decodes_as_mysqlbinlog_would(tmp_path: Path) -> None:
    bare = tmp_path / "binlog.000001"
    bare.write_bytes(_without_optional_metadata((RUST / "mysql-enum-string-set.000001").read_bytes()))
    events = decode(bare)
    every_event_read(bare, events)
    table_map = of_type(events, "TABLE_MAP_EVENT")[0]
    assert [(column["name"], column["type"]) for column in table_map.columns] == [
        ("@1", "varbinary(512)"), ("@2", "varbinary(1200)"), ("@3", "enum (no labels)"), ("@4", "set (no labels)"),
        ("@5", "blob")]
    assert any("ENUM/SET without labels" in note for note in table_map.notes)
    assert any("shown as bytes" in note for note in table_map.notes)
    # No charset: text as its bytes (CHAR or BINARY, unknown which: as stored); ENUM index 1, SET bits 0b0101.
    ((_, _, after), _, _) = rows(events)
    assert after == {"@1": S.encode(), "@2": L.encode(), "@3": "1", "@4": "1,4",
                     "@5": b"0123456789"}


def test_an_event_the_library_cannot_parse_ends_the_decode_with_its_place(tmp_path: Path) -> None:
    data = (RUST / "time_issue.000001").read_bytes()
    broken = tmp_path / "binlog.000004"
    broken.write_bytes(data + _event(2, 0, b"x", len(data)))  # a QUERY event one byte long
    done = binlake(str(broken))
    assert done.returncode == 2
    assert "@1='-507:48:27'" in done.stdout
    assert "binlake: error: the event at binlog.000004:472 could not be read by python-mysql-replication" in done.stderr
    assert "remedy: check that the file is a byte-exact copy; to see what follows, decode past it: --start 496" \
        in done.stderr


def _images(event: bytes, columns: int = 4) -> list[bytes]:
    """The row images of a v2 rows event of json.binlog's table (INT, JSON, VARCHAR(100) utf8mb4, INT; none NULL)."""
    at = 19 + 10 + 1 + 2 * ((columns + 7) // 8)  # header, post-header with v2 extra data, count, two bitmaps
    images, end = [], len(event) - 4
    while at < end:
        start = at
        at += 1 + 4  # null bitmap, @1
        at += 4 + struct.unpack_from("<I", event, at)[0]  # @2: JSON, 4 length bytes
        at += 2 + struct.unpack_from("<H", event, at)[0]  # @3: VARCHAR of 400 bytes at most, 2 length bytes
        at += 4  # @4
        images.append(event[start:at])
    return images


def test_a_partial_json_update_with_a_full_before_image_is_applied(tmp_path: Path) -> None:
    """json.binlog's PARTIAL_UPDATE_ROWS (#35) has a MINIMAL before image; the same event with the FULL before image
    a server with binlog_row_image=FULL writes (the after images of the UPDATE #30, real bytes) and #35's own diff
    (REPLACE $.age) is applied: the decode shows the diff and the document it gives."""
    data = (RUST / "json.binlog.000001").read_bytes()
    update, partial = data[2612:3496], data[3750:3980]  # events #30 and #35 (PROVENANCE.md)
    assert update[4] == 31 and partial[4] == 39
    afters = _images(update)[1::2]  # ages 25, 33, 41, 25, 33, 41
    rows_bytes = b""
    for image in afters:
        age = struct.unpack_from("<i", image, len(image) - 4)[0]
        diff = bytes([0, 5]) + b"$.age" + bytes([3, 5]) + struct.pack("<h", age + 1)  # REPLACE $.age, int16
        json_length = struct.unpack_from("<I", image, 5)[0]
        name = image[9 + json_length:len(image) - 4]
        after = b"\x01" + b"\x01" + b"\x00" + image[1:5] + struct.pack("<I", len(diff)) + diff + name \
            + struct.pack("<i", age + 1)  # value_options PARTIAL_JSON, partial bitmap, null bitmap, @1..@4
        rows_bytes += image + after
    body = partial[19:29] + b"\x04\x0f\x0f" + rows_bytes
    header = partial[:9] + struct.pack("<I", 19 + len(body) + 4) + partial[13:19]
    event = header + body + struct.pack("<I", zlib.crc32(header + body))
    full = tmp_path / "json.binlog.000002"
    full.write_bytes(data[:3750] + event + data[3980:])
    events = decode(full)
    every_event_read(full, events)
    (applied,) = of_type(events, "PARTIAL_UPDATE_ROWS_EVENT")
    assert applied.verdict == "applied", applied.error
    people = [("Joe", 25, "x"), ("Sue", 33, "y"), ("Pete", 41, "z")] * 2
    assert [(json.loads((row.before or {})["@2"])["age"], json.loads((row.after or {})["@2"]))
            for row in applied.rows] == [
        (age, {"age": age + 1, "data": letter * 10, "name": name}) for name, age, letter in people]
    assert [(row.after or {})["@4"] for row in applied.rows] == [age + 1 for _, age, _ in people]
    assert [row.diffs for row in applied.rows] == [
        {"@2": [{"operation": "REPLACE", "path": "$.age", "value": age + 1}]} for _, age, _ in people]
