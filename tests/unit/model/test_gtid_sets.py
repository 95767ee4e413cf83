"""MySQL GTID sets: MySQL's text, the set arithmetic binlake resumes with, and Gtid_set::encode's two formats."""

from __future__ import annotations

import struct

import pytest

from cdc_lib.model.gtid_sets import (
    GtidSetError,
    MysqlGtidSet,
    decode_signed_varlen,
    decode_varlen,
    encode_varlen,
    is_mysql_set,
    parse_gtid,
)

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "55778904-0299-11f1-b1b8-4ef0c4956feb"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        (f"{A}:1-5", f"{A}:1-5"),
        # UUIDs sorted; after each its untagged intervals, then its tags in order; adjacent intervals merged.
        (f"{B}:zeta:4,{A}:7:1-3,{B}:1-2:3:alpha:9", f"{A}:1-3:7,{B}:1-3:alpha:9:zeta:4"),
        # MySQL's own output: upper-case UUID (as older servers print it), a newline after each comma.
        (f"{A.upper()}:1-57,\n{B}:1-13:MyTag:1-2", f"{A}:1-57,{B}:1-13:mytag:1-2"),
        (f"{A}:1-3:5-9:4", f"{A}:1-9"),
        (f"{A}:_t0:1", f"{A}:_t0:1"),
    ],
)
def test_text_is_mysqls_canonical_form(text: str, canonical: str) -> None:
    assert str(MysqlGtidSet.parse(text)) == canonical
    assert MysqlGtidSet.parse(canonical) == MysqlGtidSet.parse(text)


@pytest.mark.parametrize("text", [f"{A}:0", f"{A}:5-3", "not-a-uuid:1", f"{A}:9tag:1", f"{A}:{'t' * 33}:1",
                                  f"{A}:1-{1 << 63}"])
def test_bad_text_is_refused(text: str) -> None:
    with pytest.raises(GtidSetError) as refused:
        MysqlGtidSet.parse(text)
    assert refused.value.remedy


def test_one_gtid_at_a_time() -> None:
    assert parse_gtid(f"{B}:MyTag:3") == ((B, "mytag"), 3)
    assert parse_gtid(f"{A}:12") == ((A, ""), 12)
    executed = MysqlGtidSet.parse(f"{B}:1-13:mytag:1-2")
    grown = executed.add(f"{B}:mytag:3")
    assert str(grown) == f"{B}:1-13:mytag:1-3"
    assert grown.contains_gtid(f"{B}:mytag:3") and not executed.contains_gtid(f"{B}:mytag:3")
    assert not grown.contains_gtid(f"{B}:other:3") and grown.contains_gtid(f"{B}:13")
    assert str(executed.add(f"{A}:1")) == f"{A}:1,{B}:1-13:mytag:1-2"
    with pytest.raises(GtidSetError):
        parse_gtid(f"{A}:1-3")


def test_set_arithmetic() -> None:
    table = MysqlGtidSet.parse(f"{A}:1-10,{B}:1-5:mytag:1-2")
    server = MysqlGtidSet.parse(f"{A}:1-20,{B}:1-5:mytag:1-3")
    assert server.contains(table) and not table.contains(server)
    assert str(server.difference(table)) == f"{A}:11-20,{B}:mytag:3"
    assert str(table.difference(server)) == ""
    assert not table.difference(server)
    assert table.union(server) == server and table.intersection(server) == table
    gappy = MysqlGtidSet.parse(f"{A}:1-3:7-9:15")
    assert str(gappy.difference(MysqlGtidSet.parse(f"{A}:2:8-20"))) == f"{A}:1:3:7"
    assert str(gappy.intersection(MysqlGtidSet.parse(f"{A}:3-8,{B}:1"))) == f"{A}:3:7-8"
    # A tag is a transaction source of its own: untagged B:3 says nothing of B:mytag:3.
    assert not MysqlGtidSet.parse(f"{B}:1-3").contains(MysqlGtidSet.parse(f"{B}:mytag:3"))
    assert MysqlGtidSet().contains(MysqlGtidSet.parse(""))


def test_the_untagged_encoding_is_what_servers_before_8_3_read() -> None:
    gtids = MysqlGtidSet.parse(f"{A}:1-3:7")
    encoded = gtids.encode()
    assert encoded == (struct.pack("<Q", 1) + bytes.fromhex(A.replace("-", "")) + struct.pack("<Q", 2)
                       + struct.pack("<QQ", 1, 4) + struct.pack("<QQ", 7, 8))
    assert MysqlGtidSet.decode(encoded) == gtids
    assert MysqlGtidSet().encode() == bytes(8)


def test_the_tagged_encoding_format_1() -> None:
    gtids = MysqlGtidSet.parse(f"{B}:1-13:mytag:1-2")
    encoded = gtids.encode()
    uuid = bytes.fromhex(B.replace("-", ""))
    assert encoded == (b"\x01" + (2).to_bytes(6, "little") + b"\x01"
                       + uuid + b"\x00" + struct.pack("<QQQ", 1, 1, 14)
                       + uuid + b"\x0a" + b"mytag" + struct.pack("<QQQ", 1, 1, 3))
    assert MysqlGtidSet.decode(encoded) == gtids
    with pytest.raises(GtidSetError):
        MysqlGtidSet.decode(encoded[:-3])


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, (1 << 14) - 1, 1 << 14, 90600, 1_770_368_687_207_196,
                                   (1 << 56) - 1, 1 << 56, (1 << 64) - 1])
def test_variable_length_integers_round_trip(value: int) -> None:
    encoded = encode_varlen(value)
    assert decode_varlen(b"\x99" + encoded + b"\x77", 1) == (value, 1 + len(encoded))


def test_variable_length_integers_as_mysql_writes_them() -> None:
    # From the real GTID_TAGGED event (tests/fixtures/mysql-binlogs, binlog_transaction_with_GTID_TAG): the
    # tag's length 5, the transaction length 296, the server version 90600, the number 3 (signed: zigzag 6).
    assert encode_varlen(5) == b"\x0a"
    assert encode_varlen(296) == b"\xa1\x04"
    assert encode_varlen(90600) == b"\x43\x0f\x0b"
    assert decode_signed_varlen(b"\x0c", 0) == (3, 1)
    assert decode_signed_varlen(b"\x02", 0) == (-1, 1)  # zigzag 1


def test_which_text_is_a_mysql_set() -> None:
    assert is_mysql_set(f"{A}:1-5") and is_mysql_set(f"{B}:mytag:1")
    assert not is_mysql_set("") and not is_mysql_set(None) and not is_mysql_set("0-1-5,1-2-3")


def test_adding_one_gtid_equals_the_union_with_it() -> None:
    """`add` extends a source's last interval in place (the per-transaction path); anything else is a union."""
    executed = MysqlGtidSet.parse(f"{A}:1-3:7-9,{B}:1-2:mytag:5")
    for gtid in (f"{A}:10", f"{A}:4", f"{A}:6", f"{A}:8", f"{A}:12", f"{B}:3", f"{B}:mytag:6", f"{B}:mytag:4",
                 f"{B}:other:1", f"{A}:tag:1"):
        expected = executed.union(MysqlGtidSet.parse(gtid))
        assert executed.add(gtid) == expected, gtid
        executed = executed.add(gtid)
    assert str(executed) == f"{A}:1-4:6-10:12:tag:1,{B}:1-3:mytag:4-6:other:1"
