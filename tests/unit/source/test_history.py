"""GTID states and the resume decision: pure logic, no server."""

from __future__ import annotations

import pytest

from cdc_lib.errors import ServerHistoryError
from cdc_lib.model.positions import (
    BinlogPosition,
    ServerIdentity,
    advance_state,
    earliest_state,
    is_mariadb_state,
    state_contains,
)
from cdc_lib.source.history import plan_resume

PRIMARY, REPLICA = ServerIdentity(1), ServerIdentity(2)
LOGS = [("bin.000001", 5000), ("bin.000002", 800)]


def at(file: str, pos: int, gtid: str | None, server: ServerIdentity | None = PRIMARY) -> BinlogPosition:
    return BinlogPosition(file, pos, gtid, server)


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        ("0-1-10", "0-1-10", True),
        ("0-2-11", "0-1-10", True),
        ("0-1-9", "0-1-10", False),
        ("", "0-1-10", False),
        ("0-1-10,1-3-4", "1-3-5", False),
        ("0-1-10,1-3-4", "", True),
    ],
)
def test_state_contains(outer: str, inner: str, expected: bool) -> None:
    assert state_contains(outer, inner) is expected


def test_state_arithmetic() -> None:
    assert advance_state("0-1-10,1-3-4", "1-5-6") == "0-1-10,1-5-6"
    assert advance_state("", "0-1-1") == "0-1-1"
    assert earliest_state(["0-1-10,1-3-4", "0-1-7"]) == "0-1-7"
    assert is_mariadb_state("") and is_mariadb_state("0-1-2,3-4-5")
    assert not is_mariadb_state(None) and not is_mariadb_state("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
    position = at("bin.000002", 10, "0-1-3", REPLICA)
    assert BinlogPosition.from_json(position.to_json()) == position
    assert BinlogPosition.from_json({"file": "bin.000001", "pos": 4, "gtid": None}).server is None


def test_same_server_resumes_by_position_and_detects_a_reset() -> None:
    end = at("bin.000002", 800, "0-1-20")
    assert plan_resume("d.t", at("bin.000001", 4000, "0-1-15"), end, LOGS).mode == "position"
    assert plan_resume("d.t", at("bin.000001", 4000, "0-1-15", None), end, LOGS).mode == "position"
    with pytest.raises(ServerHistoryError, match="RESET MASTER"):
        plan_resume("d.t", at("bin.000001", 6000, "0-1-15"), end, LOGS)  # past the file's end
    with pytest.raises(ServerHistoryError, match="RESET MASTER"):
        plan_resume("d.t", at("bin.000007", 100, "0-1-15"), end, LOGS)  # a file the server never reached
    with pytest.raises(ServerHistoryError, match="RESET MASTER") as raised:
        plan_resume("d.t", at("bin.000001", 400, "0-1-15"), at("bin.000001", 500, ""), LOGS)  # GTIDs restarted
    assert raised.value.table == "d.t" and "binlake snapshot --table d.t" in raised.value.remedy


def test_other_server_resumes_by_gtid_only_with_our_history() -> None:
    stored = at("bin.000009", 123, "0-1-15")
    assert plan_resume("d.t", stored, at("bin.000002", 800, "0-1-20", REPLICA), LOGS).mode == "gtid"
    caught_up = at("bin.000002", 800, "0-1-15", REPLICA)
    assert plan_resume("d.t", stored, caught_up, LOGS).translated == caught_up
    with pytest.raises(ServerHistoryError, match="another history"):
        plan_resume("d.t", stored, at("bin.000002", 800, "0-2-3", REPLICA), LOGS)
    with pytest.raises(ServerHistoryError, match="without a GTID"):
        plan_resume("d.t", at("bin.000001", 4, None), at("bin.000002", 800, "0-1-20", REPLICA), LOGS)
    with pytest.raises(ServerHistoryError, match="several GTID domains"):
        plan_resume("d.t", at("bin.000001", 4, "0-1-3,1-1-2"), at("bin.000002", 8, "0-1-20,1-1-9", REPLICA), LOGS)


U, V = "93e95066-a2f4-11ec-9b69-9657f0ae95e2", "a7c5e9d2-5b1f-11f1-8c3a-0242ac120002"
MYSQL_1, MYSQL_2 = ServerIdentity(1, U), ServerIdentity(2, V)


def test_mysql_sets_compare_as_sets_tags_included() -> None:
    assert state_contains(f"{U}:1-5,{V}:t:1-2", f"{U}:1-3,{V}:t:2")
    assert not state_contains(f"{U}:1-5,{V}:1-2", f"{V}:t:1")  # a tagged GTID is not its untagged twin
    assert not state_contains(f"{U}:1-2:4-5", f"{U}:3")  # a hole is a missing transaction
    assert state_contains(f"{U}:1-5", None) and not state_contains(None, f"{U}:1")
    assert not state_contains("0-1-10", f"{U}:1") and not state_contains(f"{U}:1", "0-1-10")  # never across flavours
    assert advance_state(f"{U}:1-5", f"{V}:Tag:1") == f"{U}:1-5,{V}:tag:1"
    assert advance_state(None, f"{U}:1") == f"{U}:1"
    # A read for several tables starts from what all of them applied.
    assert earliest_state([f"{U}:1-9,{V}:t:1-3", f"{U}:1-5:7-12", f"{U}:1-20,{V}:t:2"]) == f"{U}:1-5:7-9"
    assert earliest_state([f"{U}:1-9", None]) == ""


def test_mysql_resumes_on_another_server_holding_the_tables_set() -> None:
    stored = BinlogPosition("binlog.000001", 1560, f"{U}:1-3,{V}:t:1", MYSQL_1)
    assert plan_resume("d.t", stored, BinlogPosition("r.000003", 900, f"{U}:1-5,{V}:t:1", MYSQL_2), LOGS,
                       purged=f"{U}:1").mode == "gtid"
    caught_up = BinlogPosition("r.000003", 900, f"{V}:t:1,{U}:1-3", MYSQL_2)  # the same set, written otherwise
    assert plan_resume("d.t", stored, caught_up, LOGS).translated == caught_up


def test_mysql_refuses_a_server_lacking_a_transaction_or_having_purged_one() -> None:
    stored = BinlogPosition("binlog.000001", 1560, f"{U}:1-3,{V}:t:1", MYSQL_1)
    with pytest.raises(ServerHistoryError, match=f"it lacks {V}:t:1") as refused:
        plan_resume("d.t", stored, BinlogPosition("r.000003", 900, f"{U}:1-5", MYSQL_2), LOGS)
    assert "binlake snapshot --table d.t" in refused.value.remedy
    with pytest.raises(ServerHistoryError, match=f"so {U}:4 are no longer in its binlog"):
        plan_resume("d.t", stored, BinlogPosition("r.000003", 900, f"{U}:1-5,{V}:t:1", MYSQL_2), LOGS,
                    purged=f"{U}:1-4")
    # The same server after RESET MASTER (binary logs and GTID set start again) is refused too.
    with pytest.raises(ServerHistoryError, match="RESET MASTER"):
        plan_resume("d.t", stored, BinlogPosition("binlog.000001", 157, f"{U}:1", MYSQL_1), LOGS)
    # A server that reports no executed set (gtid_mode OFF) keeps reading the same server by file/offset.
    assert plan_resume("d.t", stored, BinlogPosition("binlog.000001", 1600, None, MYSQL_1),
                       [("binlog.000001", 1600)]).mode == "position"
