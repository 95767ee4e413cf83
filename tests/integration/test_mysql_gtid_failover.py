"""MySQL GTID failover on real binlog bytes: a pipeline moves to a promoted replica and resumes from its GTID set.

Server 1 is the protocol stub (tests/mysql_stub.py) serving the real MySQL 8.0.28 file
rust_mysql_common/mysql-enum-string-set.000001 up to its third transaction (GTIDs U:1-3: a CREATE USER, the
CREATE TABLE, the first row transaction). The table's state starts as an empty snapshot commit before that row
transaction (as tests/integration/test_mysql_fixtures.py does), and a sync applies it.

Server 2 is a promoted replica: another server_id and server_uuid, its own binlog file name, and a binlog that
starts later (its PREVIOUS_GTIDS holds U:1, which it purged), so every transaction sits at another offset. It
holds the same transactions U:2-5 (the file's events, re-placed by `rewritten_binlog`) plus one of its own,
written with a tagged GTID (V:failover:1, a GTID_TAGGED event as MySQL 9.x writes one) that inserts the first
row again. Pointing the pipeline at it, the sync asks for the table's set (COM_BINLOG_DUMP_GTID U:1-3), gets
U:4, U:5 and V:failover:1, and its offset lands on server 2's binlog with server 2's executed set. Server 3 then
does the same from a tagged set (the dump's tagged encoding, format 1, decoded by the stub's own code).

Servers that lack a transaction the table applied, or purged one it still needs, are refused before anything is
written. The Delta table is read back with `deltalake`.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.display.report import format_status
from cdc_lib.errors import ServerHistoryError
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.pipeline.pipeline import Pipeline
from tests.mysql_stub import (
    GTID_TAGGED_EVENT,
    BinlogEvent,
    BinlogFile,
    MySQLStub,
    StubColumn,
    StubError,
    StubTable,
    make_event,
    parse_gtid_set,
    previous_gtids_event,
    rewritten_binlog,
    tagged_gtid_event,
    with_gtid,
)
from tests.replay_start import stub_schema, write_snapshot_commit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs"
FIXTURE = FIXTURES / "rust_mysql_common" / "mysql-enum-string-set.000001"
U = "93e95066-a2f4-11ec-9b69-9657f0ae95e2"  # the server that wrote the fixture
V = "a7c5e9d2-5b1f-11f1-8c3a-0242ac120002"  # the promoted replica
W = "c0ffee00-5b1f-11f1-8c3a-0242ac120003"  # the server after it
TABLE = StubTable("mysql", "t", (
    StubColumn("f1", "char(128)"), StubColumn("f2", "varchar(300)"), StubColumn("f3", "enum('var1','variant2','foo')"),
    StubColumn("f4", "set('one','two','three','four')"), StubColumn("f5", "text"),
), primary_key=("f1",))
NAME = "mysql.t"
# PROVENANCE.md (mysql-enum-string-set, ASSERTED): the row the first transaction writes and the second updates to.
S = "0123456789" * 10
L = ("0123456789" * 12 + "012345678") * 2 + "0123456789" * 4
WRITTEN = {"f1": S, "f2": L, "f3": "var1", "f4": "one,three", "f5": "0123456789"}
UPDATED = {"f1": "field1", "f2": "field_2", "f3": "variant2", "f4": "two,four", "f5": L}
# The fixture's events: 2-3 U:1 (CREATE USER), 4-5 U:2 (CREATE TABLE), 6-10 U:3 (WRITE), 11-15 U:4 (UPDATE),
# 16-20 U:5 (DELETE); U:3 starts at 791 and ends at 1560.
FIRST_ROW_TRANSACTION, AFTER_IT = 791, 1560


def _events() -> list[BinlogEvent]:
    return BinlogFile.read(FIXTURE).events


def _by(server_id: int, raw: bytes) -> bytes:
    """The event as written by `server_id` (`rewritten_binlog` computes its checksum again)."""
    return raw[:5] + struct.pack("<I", server_id) + raw[9:]


def _server(files: list[BinlogFile], uuid: str, executed: str, purged: str) -> MySQLStub:
    stub = MySQLStub.serving(files, [TABLE])
    stub.variables.update(gtid_mode="ON", server_uuid=uuid, gtid_executed=executed, gtid_purged=purged)
    return stub.start()


def _first_server() -> MySQLStub:
    fixture = BinlogFile.read(FIXTURE)
    return _server([BinlogFile("binlog.000001", fixture.data[:AFTER_IT])], U, f"{U}:1-3", "")


def _promoted_replica() -> MySQLStub:
    """Server 2: U:2-5 replicated (U:1 purged), then its own tagged transaction writing the first row again."""
    events = _events()
    own = [tagged_gtid_event(V, "failover", 1, 2)] + [_by(2, event.raw) for event in events[7:11]]
    binlog = rewritten_binlog(
        "replica-bin.000003",
        [events[0].raw, previous_gtids_event({(U, ""): [(1, 1)]}, 2)] + [event.raw for event in events[4:]] + own,
        server_id=2,
    )
    return _server([binlog], V, f"{U}:1-5,{V}:failover:1", f"{U}:1")


def _config(stub: MySQLStub, tmp_path: Path) -> PipelineConfig:
    return parse_config({
        "pipeline": "failover",
        "source": {"host": "127.0.0.1", "port": stub.port, "user": stub.user, "password": stub.password,
                   "server_id": 4242, "tables": [NAME], "connect_timeout": 5},
        "sink": {"path": str(tmp_path / "lake")},
        "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
        "batch": {"max_events": 1},  # one source transaction per batch: a Delta version per transaction
    })


def _snapshot_commit(config: PipelineConfig, end: BinlogPosition) -> None:
    """An empty snapshot commit whose `end` is the table's offset (the Delta log wins: the sync adopts it)."""
    write_snapshot_commit(config, stub_schema(TABLE), [], end)


def _versions(config: PipelineConfig) -> list[list[dict[str, Any]]]:
    path = config.sink.table_path(TABLE.database, TABLE.name)
    return [sorted(DeltaTable(path, version=version).to_pyarrow_table().to_pylist(), key=lambda row: row["f1"])
            for version in range(DeltaTable(path).version() + 1)]  # version 0: the snapshot


def _dumps(stub: MySQLStub) -> list[str]:
    return [query for query in stub.queries if query.startswith("<COM_BINLOG_DUMP")]


@pytest.fixture
def synced_on_server_1(tmp_path: Path) -> PipelineConfig:
    """The pipeline after syncing U:3 from server 1: Delta holds the first row, the offset is U:1-3 there."""
    first = _first_server()
    try:
        config = _config(first, tmp_path)
        _snapshot_commit(config, BinlogPosition("binlog.000001", FIRST_ROW_TRANSACTION, f"{U}:1-2",
                                                ServerIdentity(server_id=1, server_uuid=U)))
        Pipeline(config).sync(until_caught_up=True)
    finally:
        first.stop()
    position = Pipeline(config).read_state().tables[NAME].position
    assert (position.file, position.pos, position.gtid) == ("binlog.000001", AFTER_IT, f"{U}:1-3")
    assert _versions(config) == [[], [WRITTEN]]
    return config


def test_a_promoted_replica_resumes_the_table_from_its_gtid_set_tags_included(
    synced_on_server_1: PipelineConfig, tmp_path: Path
) -> None:
    second = _promoted_replica()
    try:
        config = _config(second, tmp_path)
        Pipeline(config).sync(until_caught_up=True)
        table = Pipeline(config).read_state().tables[NAME]
        binlog = second.binlogs[0]
        dumps = _dumps(second)
    finally:
        second.stop()
    assert table.error is None, table.error
    # One GTID dump from the table's set (the server skipped what the table has), then file/offset dumps on server 2.
    assert dumps[0] == f"<COM_BINLOG_DUMP_GTID {U}:1-3>"
    assert all(dump.startswith("<COM_BINLOG_DUMP replica-bin.000003:") for dump in dumps[1:])
    # U:4 (the update), U:5 (the delete), V:failover:1 (the row again): exactly, one Delta version each.
    assert _versions(config) == [[], [WRITTEN], [UPDATED], [], [WRITTEN]]
    # The offset is server 2's: its file, its end, its executed set with the tagged GTID, its identity.
    assert (table.position.file, table.position.pos) == ("replica-bin.000003", len(binlog.data))
    assert table.position.gtid == f"{U}:1-5,{V}:failover:1"
    assert table.position.server == ServerIdentity(server_id=2, server_uuid=V)

    # Server 3 took over from server 2: the table's set, tagged, goes in the dump (the tagged encoding, format 1).
    events = _events()
    third = _server([rewritten_binlog(
        "mysql-bin.000010",
        [events[0].raw, previous_gtids_event({(U, ""): [(1, 5)], (V, "failover"): [(1, 1)]}, 3),
         with_gtid(events[11], W, 1, 3)] + [_by(3, event.raw) for event in events[12:16]],
        server_id=3,
    )], W, f"{U}:1-5,{V}:failover:1,{W}:1", f"{U}:1-5,{V}:failover:1")
    try:
        config = _config(third, tmp_path)
        # Before the sync, status compares the table's set (written on server 2) with server 3's: one behind.
        (status,) = Pipeline(config).status()
        third.queries.clear()  # the status's runway reads the oldest binlog's first event: a dump of its own
        Pipeline(config).sync(until_caught_up=True)
        table = Pipeline(config).read_state().tables[NAME]
        dumps = _dumps(third)
    finally:
        third.stop()
    assert status.position == f"replica-bin.000003:{len(binlog.data)} (gtid {U}:1-5,{V}:failover:1)"
    assert status.lag_seconds and status.lag_seconds > 0
    assert f"(gtid {U}:1-5,{V}:failover:1)" in format_status([status])  # the tagged set whole, as `binlake status`

    assert table.error is None, table.error
    assert dumps[0] == f"<COM_BINLOG_DUMP_GTID {U}:1-5,{V}:failover:1>"
    assert _versions(config)[-1] == [UPDATED]  # W:1 is the update again
    assert table.position.gtid == f"{U}:1-5,{V}:failover:1,{W}:1"


@pytest.mark.parametrize("history", ["behind", "purged", "purged, gtid_purged unreadable"])
def test_a_server_without_the_tables_history_is_refused_before_anything_is_written(
    synced_on_server_1: PipelineConfig, tmp_path: Path, history: str
) -> None:
    events = _events()
    if history == "behind":  # a replica that has not applied U:3 yet
        binlog = rewritten_binlog("replica-bin.000001", [events[0].raw, previous_gtids_event({(U, ""): [(1, 1)]}, 2)]
                                  + [event.raw for event in events[4:6]], server_id=2)
        server = _server([binlog], V, f"{U}:1-2", f"{U}:1")
        expected = f"it lacks {U}:3"
    else:  # holds everything, but its binlog no longer has U:4, which the table has not applied
        binlog = rewritten_binlog("replica-bin.000009", [events[0].raw, previous_gtids_event({(U, ""): [(1, 4)]}, 2)]
                                  + [event.raw for event in events[16:]], server_id=2)
        server = _server([binlog], V, f"{U}:1-5", f"{U}:1-4")
        expected = f"has purged transactions this table has not applied: its gtid_purged is '{U}:1-4'"
    if history == "purged, gtid_purged unreadable":
        # Not checked up front: the GTID dump itself is refused (1236), and that refusal names the history too.
        server.extra["SELECT @@GLOBAL.gtid_purged"] = StubError(1193, "Unknown system variable 'gtid_purged'")
        expected = f"the server cannot send the binlog from GTID state '{U}:1-3'"
    before = Pipeline(synced_on_server_1).read_state().tables[NAME]
    try:
        config = _config(server, tmp_path)
        with pytest.raises(ServerHistoryError) as refused:
            Pipeline(config).sync(until_caught_up=True)
        dumps = _dumps(server)
    finally:
        server.stop()
    assert expected in str(refused.value), refused.value
    assert refused.value.remedy and "binlake snapshot --table" in refused.value.remedy
    # Refused up front (no binlog read), or by the one dump that asked for the table's set.
    assert dumps == ([f"<COM_BINLOG_DUMP_GTID {U}:1-3>"] if "unreadable" in history else [])
    assert _versions(config) == [[], [WRITTEN]]
    assert Pipeline(config).read_state().tables[NAME] == before
    assert parse_gtid_set(before.position.gtid or "") == {(U, ""): [(1, 3)]}


def test_an_unreadable_gtid_tagged_event_stops_the_table_at_its_transaction(
    synced_on_server_1: PipelineConfig, tmp_path: Path
) -> None:
    """Without its GTID, a transaction would be missing from the offset's set (a later failover would apply it
    twice, or skip it): the table stops before it, the transactions ahead of it applied."""
    events = _events()
    broken = make_event(GTID_TAGGED_EVENT, 2, tagged_gtid_event(V, "failover", 1, 2)[19:-4][:12])
    tail = [broken] + [_by(2, event.raw) for event in events[7:11]]
    binlog = rewritten_binlog("replica-bin.000003", [events[0].raw, previous_gtids_event({(U, ""): [(1, 1)]}, 2)]
                              + [event.raw for event in events[4:]] + tail, server_id=2)
    second = _server([binlog], V, f"{U}:1-5,{V}:failover:1", f"{U}:1")
    try:
        config = _config(second, tmp_path)
        Pipeline(config).sync(until_caught_up=True)
        table = Pipeline(config).read_state().tables[NAME]
    finally:
        second.stop()
    assert table.error is not None and "GTID_TAGGED" in table.error, table.error
    assert _versions(config) == [[], [WRITTEN], [UPDATED], []]  # U:4 and U:5 applied, nothing of the broken one
    broken_at = len(binlog.data) - sum(len(raw) for raw in tail)
    assert (table.position.file, table.position.pos, table.position.gtid) == (
        "replica-bin.000003", broken_at, f"{U}:1-5")
