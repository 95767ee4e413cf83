"""Tagged GTIDs on real MySQL bytes: the GTID_TAGGED event and both PREVIOUS_GTIDS encodings.

The files are real binlogs (tests/fixtures/mysql-binlogs/PROVENANCE.md, rust_mysql_common): the expected values
are the ASSERTED ones of its tests gtid_tagged_log_event_from_binlog and untagged_previous_gtids_event_from_binlog.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cdc_lib.binlog.gtid_events import GTID_TAGGED_LOG_EVENT, tagged_gtid
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet

FIXTURES = Path(__file__).parents[2] / "fixtures" / "mysql-binlogs" / "rust_mysql_common"
PREVIOUS_GTIDS = 35


def _bodies(name: str) -> dict[int, bytes]:
    """Each event's body (no header, no CRC32) by type code; the files hold one event of each type used here."""
    data, pos, bodies = (FIXTURES / name).read_bytes(), 4, {}
    while pos < len(data):
        _, type_code, _, size = struct.unpack_from("<IBII", data, pos)
        bodies[type_code] = data[pos + 19:pos + size - 4]
        pos += size
    return bodies


def test_a_gtid_tagged_event_names_its_tagged_transaction() -> None:
    body = _bodies("binlog_transaction_with_GTID_TAG.000001")[GTID_TAGGED_LOG_EVENT]
    assert tagged_gtid(body) == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"


@pytest.mark.parametrize("cut", [2, 10, 30])
def test_a_cut_gtid_tagged_event_is_refused(cut: int) -> None:
    body = _bodies("binlog_transaction_with_GTID_TAG.000001")[GTID_TAGGED_LOG_EVENT]
    with pytest.raises(GtidSetError) as refused:
        tagged_gtid(body[:cut])
    assert "GTID_TAGGED" in refused.value.cause and refused.value.remedy


def test_previous_gtids_in_the_tagged_format() -> None:
    body = _bodies("binlog_transaction_with_GTID_TAG.000001")[PREVIOUS_GTIDS]
    previous = MysqlGtidSet.decode(body)
    assert str(previous) == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    assert previous.encode() == body  # what binlake sends in a COM_BINLOG_DUMP_GTID is what the server writes
    assert str(previous.add(tagged_gtid(_bodies("binlog_transaction_with_GTID_TAG.000001")[GTID_TAGGED_LOG_EVENT]))) \
        == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-3"


def test_previous_gtids_in_the_untagged_format() -> None:
    body = _bodies("binlog_transaction_previous_GTID_no_tag.000001")[PREVIOUS_GTIDS]
    previous = MysqlGtidSet.decode(body)
    assert str(previous) == "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"
    assert previous.encode() == body
