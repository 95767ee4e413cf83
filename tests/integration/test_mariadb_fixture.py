"""A real MariaDB 10.5 binlog through binlake's real sync, into Delta (issue 27: each fixture with row events is
replayed through the stub and read back with deltalake).

tests/fixtures/mysql-binlogs/rust_mysql_common/mariadb-bin.000001 was written by MariaDB 10.5.15 (PROVENANCE.md
there): two transactions, GTIDs 0-1-1 and 0-1-2, each an ANNOTATE_ROWS, a TABLE_MAP with full metadata and a
WRITE_ROWS_V1 into `toddy_test`.`outbox` (INT key, VARCHAR, ENUM, BLOB, TIMESTAMP). The MariaDB-flavoured stub
(tests/mariadb_stub.py) serves it as a MariaDB 10.5 would; `Pipeline.sync(until_caught_up=True)` reads it, one
batch per transaction, and the Delta versions are read back with `deltalake`.

The start state is an empty snapshot commit written with `deltalake` whose `end` is where the first transaction
begins (tests/integration/test_mysql_fixtures.py explains why; its helpers are repeated here, test files do not
import each other). The values: the column names, order and character sets are ASSERTED by the origin
(`binlog_event_roundtrip`); the row values are OBSERVED (MariaDB's mysqlbinlog agrees) — ids 62 and 63, topic
'foo', ENUM index 2 ('JSON'), the BLOB '{"foo":1}', TIMESTAMPs 1650493084 and 1650493195 (UTC).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from deltalake import DeltaTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ServerHistoryError
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, CDC_USER
from tests.mariadb_stub import BINLOG_SEND_ANNOTATE_ROWS_EVENT, MariaDBStub
from tests.mysql_stub import BINLOG_DUMP_NON_BLOCK, COM_BINLOG_DUMP, BinlogFile, StubColumn, StubTable
from tests.replay_start import stub_schema, write_snapshot_commit

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs" / "rust_mysql_common" / "mariadb-bin.000001"
PIPELINE = "replay"
OUTBOX = StubTable("toddy_test", "outbox", (
    StubColumn("id", "int(11)", nullable=False),
    StubColumn("topic", "varchar(255)", nullable=False),  # maxbytes 1020: utf8mb4
    StubColumn("event_type", "enum('BLOB','JSON','PROTOBUF')"),
    StubColumn("event", "blob", nullable=False),
    StubColumn("created", "timestamp", nullable=False),
), primary_key=("id",))  # SIMPLE_PRIMARY_KEY [0] in the TABLE_MAP
FIRST = {"id": 62, "topic": "foo", "event_type": "JSON", "event": b'{"foo":1}',
         "created": dt.datetime(2022, 4, 20, 22, 18, 4, tzinfo=dt.UTC)}
SECOND = {**FIRST, "id": 63, "created": dt.datetime(2022, 4, 20, 22, 19, 55, tzinfo=dt.UTC)}
#: The file's events by position: the first transaction's GTID event, its end (XID), the second's GTID event.
FIRST_GTID_AT, FIRST_END, SECOND_GTID_AT = 330, 702, 702
ANNOTATE_ROWS, GTID_EVENT, GTID_LIST_EVENT, BINLOG_CHECKPOINT = 160, 162, 163, 161

Row = dict[str, Any]


def _config(stub: MariaDBStub, tmp_path: Path) -> PipelineConfig:
    return parse_config({
        "pipeline": PIPELINE,
        "source": {"host": "127.0.0.1", "port": stub.port, "user": stub.user, "password": stub.password,
                   "server_id": 4242, "tables": ["toddy_test.outbox"], "connect_timeout": 5},
        "sink": {"path": str(tmp_path / "lake")},
        "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
        "batch": {"max_events": 1},  # one source transaction per batch: a Delta version per transaction
    })


def _versions(path: str) -> list[list[Row]]:
    """Every Delta version after the snapshot's (version 0), read with deltalake, rows in key order."""
    latest = DeltaTable(path).version()
    return [sorted(DeltaTable(path, version=version).to_pyarrow_table().to_pylist(), key=lambda row: row["id"])
            for version in range(1, latest + 1)]


def _ends(path: str) -> list[tuple[str, int, str]]:
    """File, offset and GTID state each Delta version after the snapshot's records as its end (commit metadata,
    read with deltalake), oldest first."""
    history = sorted(DeltaTable(path).history(), key=lambda commit: int(commit["version"]))
    ends = [json.loads(commit["userMetadata"])["end"] for commit in history[1:]]
    return [(end["file"], end["pos"], end["gtid"]) for end in ends]


@pytest.fixture
def stub() -> Iterator[MariaDBStub]:
    server = MariaDBStub.serving([BinlogFile.read(FIXTURE)], [OUTBOX]).start()
    try:
        yield server
    finally:
        server.stop()


# -- the replay ------------------------------------------------------------------------------------


def test_mariadb_105_binlog_replays_into_delta(stub: MariaDBStub, tmp_path: Path) -> None:
    config = _config(stub, tmp_path)
    start = BinlogPosition(FIXTURE.name, FIRST_GTID_AT, "", ServerIdentity(server_id=1))
    path = write_snapshot_commit(config, stub_schema(OUTBOX), [], start)
    Pipeline(config).sync(until_caught_up=True)
    state = Pipeline(config).read_state().tables["toddy_test.outbox"]
    # The ENUM as its label (ENUM_STR_VALUE metadata), the BLOB as bytes, the TIMESTAMP as UTC; one version per
    # transaction.
    assert _versions(path) == [[FIRST], [FIRST, SECOND]], f"the table stopped: {state.error}"
    assert state.error is None
    # Each commit ends at its transaction's end (the XID) with the GTID state there.
    assert _ends(path) == [(FIXTURE.name, FIRST_END, "0-1-1"), (FIXTURE.name, len(FIXTURE.read_bytes()), "0-1-2")]
    # The offset: past the file, with the MariaDB GTID state of its last transaction.
    assert state.position.gtid == "0-1-2"
    assert state.position >= BinlogPosition(FIXTURE.name, len(FIXTURE.read_bytes()))
    # A file/position dump per batch (same server), the first from the snapshot's position.
    dumps = [query for query in stub.queries if query.startswith("<COM_BINLOG_DUMP")]
    assert dumps[0] == f"<COM_BINLOG_DUMP {FIXTURE.name}:{FIRST_GTID_AT}>"
    assert "SET @mariadb_slave_capability=4" in stub.queries
    assert not any(query.startswith("SET @slave_connect_state") for query in stub.queries)


def test_status_counts_the_lag_in_mariadbs_binlog_events(stub: MariaDBStub, tmp_path: Path) -> None:
    """`binlake status` reads the lag with SHOW BINLOG EVENTS from the table's offset on."""
    config = _config(stub, tmp_path)
    start = BinlogPosition(FIXTURE.name, FIRST_GTID_AT, "", ServerIdentity(server_id=1))
    write_snapshot_commit(config, stub_schema(OUTBOX), [], start)
    Pipeline(config).sync()  # one batch: the first transaction
    (behind,) = Pipeline(config).status()
    # The second transaction is left: GTID, ANNOTATE_ROWS, TABLE_MAP, WRITE_ROWS_V1, XID; 372 bytes.
    assert (behind.lag_events, behind.lag_bytes) == (5, len(FIXTURE.read_bytes()) - FIRST_END)
    Pipeline(config).sync(until_caught_up=True)
    (caught_up,) = Pipeline(config).status()
    assert (caught_up.lag_events, caught_up.lag_bytes, caught_up.error) == (0, 0, None)
    assert f"SHOW BINLOG EVENTS IN '{FIXTURE.name}' FROM {FIRST_END} LIMIT 100001" in stub.queries


def test_mariadb_gtid_resume_on_another_server_applies_only_the_missing_transaction(
    stub: MariaDBStub, tmp_path: Path
) -> None:
    """The table applied 0-1-1 on another server (server_id 2, its own file names); on this one its file/offset mean
    nothing, so binlake resumes from its GTID state (MariaDB's domain-based resume): the stub skips 0-1-1 and
    streams 0-1-2 only."""
    config = _config(stub, tmp_path)
    elsewhere = BinlogPosition("replica-bin.000009", 4711, "0-1-1", ServerIdentity(server_id=2))
    path = write_snapshot_commit(config, stub_schema(OUTBOX), [FIRST], elsewhere)
    Pipeline(config).sync(until_caught_up=True)
    state = Pipeline(config).read_state().tables["toddy_test.outbox"]
    # One version after the snapshot's (version 0, holding 62): 0-1-2's row added, 0-1-1's not applied again.
    assert _versions(path) == [[FIRST, SECOND]], f"the table stopped: {state.error}"
    assert state.error is None
    assert _ends(path) == [(FIXTURE.name, len(FIXTURE.read_bytes()), "0-1-2")]  # a position on this server
    assert state.position.gtid == "0-1-2"
    assert state.position.file == FIXTURE.name and state.position.pos >= len(FIXTURE.read_bytes())
    # One GTID dump: the state in @slave_connect_state, strict mode, and no file name (python-mysql-replication
    # sends NUL bytes, an empty C string to MariaDB; its packet length leaves out the last of the four it writes).
    assert "SET @slave_connect_state = '0-1-1'" in stub.queries
    assert "SET @slave_gtid_strict_mode=1" in stub.queries
    assert [query for query in stub.queries if query.startswith("<COM_BINLOG_DUMP")] == [
        "<COM_BINLOG_DUMP \0\0\0:4>"]


def test_a_gtid_state_the_server_never_logged_stops_the_sync_naming_the_table_and_the_servers_reason(
    stub: MariaDBStub, tmp_path: Path
) -> None:
    """0-7-1 (server 7's first transaction in domain 0) is within the server's domain 0 by sequence number, so
    binlake asks for a GTID dump; MariaDB refuses it (the replica diverged). Nothing is written, and the error says
    which table to re-snapshot and why the server refused."""
    config = _config(stub, tmp_path)
    path = write_snapshot_commit(config, stub_schema(OUTBOX), [FIRST],
                                 BinlogPosition("replica-bin.000009", 4711, "0-7-1", ServerIdentity(server_id=2)))
    with pytest.raises(ServerHistoryError) as raised:
        Pipeline(config).sync(until_caught_up=True)
    assert "SET @slave_connect_state = '0-7-1'" in stub.queries
    assert "binlake snapshot --table toddy_test.outbox" in raised.value.remedy
    assert "the slave has diverged due to executing extra erroneous transactions" in str(raised.value)
    assert DeltaTable(path).version() == 0
    assert Pipeline(config).read_state().tables["toddy_test.outbox"].position.gtid == "0-7-1"


# -- the stub's binlog dump, as MariaDB's binlog sender ---------------------------------------------


def _dump(stub: MariaDBStub, name: str, position: int, *, flags: int = 0, state: str | None = None,
          capability: bool = True) -> list[bytes]:
    """The events of a non-blocking COM_BINLOG_DUMP (up to the EOF packet), without their OK byte."""
    connection = pymysql.connect(host="127.0.0.1", port=stub.port, user=stub.user, password=stub.password)
    try:
        connection.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        if capability:
            connection.query("SET @mariadb_slave_capability=4")
        if state is not None:
            connection.query(f"SET @slave_connect_state = '{state}'")
        connection._execute_command(
            COM_BINLOG_DUMP, struct.pack("<IHI", position, BINLOG_DUMP_NON_BLOCK | flags, 99) + name.encode())
        packets = []
        while not (packet := connection._read_packet()).is_eof_packet():
            packets.append(packet.get_all_data()[1:])
        return packets
    finally:
        connection.close()


def _header(event: bytes) -> tuple[int, int, int, int, int, int]:
    """timestamp, type code, server_id, event size, log_pos, flags."""
    return struct.unpack_from("<IBIIIH", event)


def _crc_holds(event: bytes) -> bool:
    return struct.unpack("<I", event[-4:])[0] == zlib.crc32(event[:-4])


def test_the_stub_streams_the_file_as_mariadbs_binlog_sender(stub: MariaDBStub) -> None:
    file = stub.binlogs[0]
    events = {event.pos: event.raw for event in file.events}
    whole = _dump(stub, file.name, 4)
    # A fake ROTATE naming the start, then the FORMAT_DESCRIPTION without its in-use flag (its CRC32 holds: the
    # server computes it without that flag), then the file's events, the ANNOTATE_ROWS left out (not asked for).
    assert _header(whole[0])[:2] == (0, 4) and _header(whole[0])[4:] == (0, 0x20) and _crc_holds(whole[0])
    assert whole[0][19:-4] == struct.pack("<Q", 4) + file.name.encode()
    assert _header(events[4])[5] & 1 and not _header(whole[1])[5] & 1 and _crc_holds(whole[1])
    assert whole[2:] == [raw for pos, raw in events.items() if pos > 4 and _header(raw)[1] != ANNOTATE_ROWS]
    # Asked for, the ANNOTATE_ROWS events come too: the file byte for byte after the FORMAT_DESCRIPTION.
    assert b"".join(_dump(stub, file.name, 4, flags=BINLOG_SEND_ANNOTATE_ROWS_EVENT)[2:]) == file.data[256:]
    # From further on: the FORMAT_DESCRIPTION with log_pos and `created` 0, its CRC32 computed again.
    resumed = _dump(stub, file.name, SECOND_GTID_AT)
    assert _header(resumed[1])[4] == 0 and resumed[1][21:71] == events[4][21:71]
    assert resumed[1][71:75] == bytes(4) and _crc_holds(resumed[1])
    assert [_header(event)[1] for event in resumed[2:]] == [GTID_EVENT, 19, 23, 16]


def test_the_stub_serves_a_gtid_dump_as_mariadb(stub: MariaDBStub) -> None:
    file = stub.binlogs[0]
    events = {event.pos: event.raw for event in file.events}
    resumed = _dump(stub, "", 4, state="0-1-1")
    # From the file's start (the position is ignored): its GTID_LIST and BINLOG_CHECKPOINT, 0-1-1's group skipped,
    # then a made-up GTID_LIST with the state reached (0-1-1) ending where the skipped group ends, then 0-1-2.
    assert resumed[0][19:-4] == struct.pack("<Q", 4) + file.name.encode()
    assert [_header(event)[1] for event in resumed[2:4]] == [GTID_LIST_EVENT, BINLOG_CHECKPOINT]
    fake = resumed[4]
    assert _header(fake)[1:2] == (GTID_LIST_EVENT,) and _header(fake)[4:] == (FIRST_END, 0x20) and _crc_holds(fake)
    assert fake[19:-4] == struct.pack("<IIIQ", 1, 0, 1, 1)
    assert resumed[5:] == [raw for pos, raw in events.items() if pos >= SECOND_GTID_AT and _header(raw)[1] != 160]
    # Everything applied: only the made-up GTID_LIST after the last group.
    assert [_header(event)[1] for event in _dump(stub, "", 4, state="0-1-2")[2:]] == [163, 161, 163]
    with pytest.raises(pymysql.err.OperationalError, match="1236.*GTID 0-1-5, which is not in the master's binlog"):
        _dump(stub, "", 4, state="0-1-5")
    with pytest.raises(pymysql.err.OperationalError, match="1236.*impossible position"):
        _dump(stub, file.name, len(file.data) + 1)
    with pytest.raises(pymysql.err.OperationalError, match="1105.*mariadb_slave_capability"):
        _dump(stub, file.name, 4, capability=False)


# -- the statements, against the suite's MariaDB -------------------------------------------------------

#: What binlake and python-mysql-replication send to a MariaDB (its general log, during a sync by file/position and
#: one by GTID), minus SETs; the answers' columns (and, for the variables, the names) must be the server's.
STATEMENTS = [
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image', "
    "'binlog_row_metadata', 'binlog_row_value_options', 'slave_exec_mode', 'replica_exec_mode', "
    "'log_slave_updates', 'log_replica_updates')",
    "SELECT VERSION(), @@version_comment",
    "SHOW GRANTS",
    "SELECT @@GLOBAL.server_id",
    "SELECT @@hostname, @@port, @@GLOBAL.log_bin_basename",
    "SELECT @@GLOBAL.gtid_binlog_pos",
    "SHOW BINLOG STATUS",
    "SHOW MASTER STATUS",
    "SHOW BINARY LOGS",
    "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'",
    "SHOW VARIABLES LIKE 'BINLOG_ROW_METADATA'",
    "SHOW BINLOG EVENTS LIMIT 3",  # binlake status; a file's first events: FORMAT_DESCRIPTION, GTID_LIST, CHECKPOINT
]
#: What a MariaDB answers with an error, both flavours: a MySQL-only statement and MySQL-only variables.
REFUSED = ["SHOW BINARY LOG STATUS", "SELECT @@GLOBAL.gtid_executed", "SELECT @@GLOBAL.server_uuid"]


def _answers(port: int, user: str, password: str) -> tuple[str, list[Any]]:
    with pymysql.connect(host="127.0.0.1", port=port, user=user, password=password) as connection:
        answers: list[Any] = []
        for statement in STATEMENTS + REFUSED:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(statement)
                    rows = cursor.fetchall()
                    columns = [column[0] for column in cursor.description or ()]
                    if columns[0].startswith("Grants for"):  # the grants as written, the host and hash left out
                        answers.append([re.sub(r"@`[^`]*`|'\*[0-9A-F]{40}'", "…", grant) for grant, in rows])
                    elif columns[0] == "Log_name" and len(columns) == 6:  # and the event types' names
                        answers.append((columns, [row[2] for row in rows]))
                    elif columns == ["Variable_name", "Value"]:
                        answers.append((columns, sorted(name for name, _ in rows)))  # the names, not the settings
                    else:  # the columns, and the Python types of the values (each binlog file is one row)
                        shapes = {tuple(type(value).__name__ for value in row) for row in rows}
                        answers.append((columns, sorted(shapes)))
            except pymysql.MySQLError as exc:
                answers.append(exc.args[0])
        return connection.server_version, answers


def test_the_stub_answers_binlakes_statements_as_the_suites_mariadb(mariadb: LocalMariaDB) -> None:
    """The suite's MariaDB is 10.11; these answers are the same on 10.5 (10.5.2 added SHOW BINLOG STATUS and BINLOG
    MONITOR; the variables binlake asks for exist since 10.5.0), so the stub must give them too."""
    server_version, server = _answers(mariadb.port, CDC_USER, CDC_PASSWORD)
    with MariaDBStub.serving([BinlogFile.read(FIXTURE)], [OUTBOX], user=CDC_USER, password=CDC_PASSWORD) as stub:
        stub_version, answered = _answers(stub.port, CDC_USER, CDC_PASSWORD)
    assert server_version.startswith("5.5.5-") and "MariaDB" in server_version
    assert stub_version == "5.5.5-10.5.15-MariaDB-1:10.5.15+maria~focal-log"
    for statement, theirs, ours in zip(STATEMENTS + REFUSED, server, answered, strict=True):
        assert ours == theirs, statement
    assert stub.logins == ["native"]  # mysql_native_password, MariaDB's default plugin
