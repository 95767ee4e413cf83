"""Pure parts of `binlake binlog decode`: what a statement shows, where a file is not a binlog, a PREVIOUS_GTIDS set.
(The decode itself runs on the real binlog files in tests/integration/test_binlog_decode.py.)"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from cdc_lib.binlog.binlog_file import FileEvent, FileEvents, previous_gtids
from cdc_lib.binlog.decode_rows import redacted
from cdc_lib.errors import BinlogFileError
from cdc_lib.model.gtid_sets import MysqlGtidSet


@pytest.mark.parametrize(("statement", "shown"), [
    ("ALTER USER 'root'@'localhost' IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$x\\'y'",
     "ALTER USER 'root'@'localhost' IDENTIFIED <redacted>"),
    ("CREATE USER u IDENTIFIED BY 'secret'", "CREATE USER u IDENTIFIED <redacted>"),
    ("SET PASSWORD FOR u = 'secret'", "SET PASSWORD <redacted>"),
    ("SELECT PASSWORD('secret')", "SELECT PASSWORD <redacted>"),
    ("CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD = 'secret'",
     "CHANGE REPLICATION SOURCE TO SOURCE_PASSWORD <redacted>"),
    ("CREATE TABLE t (id INT, password VARCHAR(64))", "CREATE TABLE t (id INT, password VARCHAR(64))"),
])
def test_a_statement_never_shows_a_password(statement: str, shown: str) -> None:
    assert redacted(statement) == shown
    assert "secret" not in redacted(statement)


def test_a_file_without_the_magic_bytes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "binlog.000001"
    path.write_bytes(b"\xfebiX" + bytes(200))
    with pytest.raises(BinlogFileError, match="is not a binlog file") as refused:
        FileEvents([path])
    assert "remedy" in str(refused.value)
    with pytest.raises(BinlogFileError, match="no binlog file given"):
        FileEvents([])


def _previous_gtids(body: bytes) -> FileEvent:
    header = struct.pack("<IBIIIH", 0, 35, 1, 19 + len(body), 0, 0)
    return FileEvent("binlog.000001", 4, header + body)


def test_previous_gtids_sets_are_read_in_both_formats() -> None:
    sid = uuid.UUID("b9b88c66-0755-11f1-9899-4a9da94c4d71")
    # Untagged: an 8-byte count; a UUID listed twice keeps all its intervals (MySQL writes each once).
    body = struct.pack("<Q", 2) + sid.bytes + struct.pack("<Qqqqq", 2, 1, 3, 5, 6) + sid.bytes + struct.pack(
        "<Qqq", 1, 9, 10)
    assert previous_gtids(_previous_gtids(body), checksum=False) == f"{sid}:1-2:5:9"
    assert previous_gtids(_previous_gtids(struct.pack("<Q", 0)), checksum=False) == ""
    # Tagged (MySQL 8.3+): format 1, a 6-byte count, format 1 again, then per entry its tag (a varlen length).
    tagged = MysqlGtidSet.parse(f"{sid}:1-2:mytag:3").encode()
    assert tagged[0] == 1 and tagged[7] == 1
    assert previous_gtids(_previous_gtids(tagged), checksum=False) == f"{sid}:1-2:mytag:3"
    # Bytes that are no encoded set: no set (the decode says so in a note).
    assert previous_gtids(_previous_gtids(bytes([1, 2, 0, 0, 0, 0, 0, 1]) + bytes(3)), checksum=False) is None
