"""Every binlog event type code the library or the servers know is classified (the reader's closed world)."""

from __future__ import annotations

from pymysqlreplication.constants import BINLOG
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc_lib.binlog.event_types import EVENT_TYPES, LOG_EVENT_IGNORABLE_F, handling_of

#: Log_event_type codes from MySQL 8.4/9.x (libbinlogevents/include/binlog_event.h, 0..42) and MariaDB 10.x/11.x
#: (sql/log_event.h: 160..171), written down from the servers' sources and documentation.
SERVER_CODES = {
    **{code: "mysql" for code in range(0, 43)},
    **{code: "mariadb" for code in range(160, 172)},
}


def test_every_code_the_library_knows_is_classified() -> None:
    library = {value for name, value in vars(BINLOG).items() if name.endswith("_EVENT") and isinstance(value, int)}
    event_map = BinLogPacketWrapper._BinLogPacketWrapper__event_map
    assert library and set(event_map) <= library | set(event_map)
    missing = sorted((library | set(event_map)) - set(EVENT_TYPES))
    assert missing == []


def test_every_code_the_servers_write_is_classified() -> None:
    missing = sorted(set(SERVER_CODES) - set(EVENT_TYPES))
    assert missing == []
    # What the reader does with the events that carry or may carry row changes.
    assert {code for code, kind in EVENT_TYPES.items() if kind.handling == "rows"} == {
        23, 24, 25, 30, 31, 32, 39, 166, 167, 168, 169, 170, 171}
    assert EVENT_TYPES[40].handling == "payload"  # MySQL TRANSACTION_PAYLOAD: opened (cdc_lib/binlog/payload.py)
    assert EVENT_TYPES[26].handling == "stop_all"  # INCIDENT: the server lost events
    assert EVENT_TYPES[39].handling == "rows"  # PARTIAL_UPDATE_ROWS: JSON diffs applied to the FULL before image
    assert EVENT_TYPES[165].handling == "query" and EVENT_TYPES[18].handling == "query"
    assert EVENT_TYPES[38].handling == "xa_prepare" and EVENT_TYPES[16].handling == "xid"
    assert all(kind.handling for kind in EVENT_TYPES.values())


def test_unknown_codes_pass_only_when_the_server_flags_them_ignorable() -> None:
    for code in (43, 99, 172, 255):
        assert code not in EVENT_TYPES
        assert handling_of(code, LOG_EVENT_IGNORABLE_F).handling == "harmless"
        assert handling_of(code, 0).handling == "stop_all"
