"""Binlog positions: a file and offset, the GTID state the server had there, and which server wrote them.

A file/offset pair is only meaningful on the server that wrote it: a replica holds the
same transactions at other offsets, and `RESET MASTER` restarts the numbering. The GTID
state (MariaDB `gtid_binlog_pos` form, ``domain-server-seq`` per domain; MySQL an executed
GTID set, tagged GTIDs included: `cdc_lib.model.gtid_sets`) names the same point on every server that
shares the history. The functions on GTID states below take either flavour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet, is_mysql_set

_SEQUENCE = re.compile(r"\.(\d+)$")
_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")


@dataclass(frozen=True)
class ServerIdentity:
    """Who wrote a position: `server_id` (unique within a replication topology) and, on MySQL, `server_uuid`.

    Equality (what a stored position is compared with) is `server_id` and `server_uuid` only. The other
    fields are a fingerprint of the server a connection reached, read alongside them and never stored:
    MariaDB has no server UUID, and two unrelated MariaDB servers often share a `server_id` (1 by
    default), so `same_server` also compares the host name, port and binlog base name the servers
    report about themselves when both sides know them.
    """

    server_id: int
    server_uuid: str | None = None
    hostname: str | None = field(default=None, compare=False)
    port: int | None = field(default=None, compare=False)
    binlog_basename: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"server_id {self.server_id}" + (f" (uuid {self.server_uuid})" if self.server_uuid else "")

    def describe(self) -> str:
        """Every known field, for an error that must tell two servers apart."""
        parts = [str(self)]
        if self.hostname is not None or self.port is not None:
            parts.append(f"@@hostname:@@port {self.hostname}:{self.port}")
        if self.binlog_basename:
            parts.append(f"binlog {self.binlog_basename}")
        return ", ".join(parts)

    def same_server(self, other: ServerIdentity) -> bool:
        """Whether two connections reached the same server: equal identities and no fingerprint field that differs."""
        if self != other:
            return False
        pairs = ((self.hostname, other.hostname), (self.port, other.port),
                 (self.binlog_basename, other.binlog_basename))
        return all(mine == theirs for mine, theirs in pairs if mine is not None and theirs is not None)

    def to_json(self) -> dict[str, Any]:
        return {"server_id": self.server_id, "server_uuid": self.server_uuid}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ServerIdentity | None:
        if not data:
            return None
        return cls(server_id=int(data["server_id"]), server_uuid=data.get("server_uuid"))


@dataclass(frozen=True, order=False)
class BinlogPosition:
    """A point in the server's binlog at a transaction boundary."""

    file: str
    pos: int
    gtid: str | None = None
    server: ServerIdentity | None = None

    @property
    def sort_key(self) -> tuple[int, str, int]:
        match = _SEQUENCE.search(self.file)
        return (int(match.group(1)) if match else -1, self.file, self.pos)

    @property
    def file_sequence(self) -> int:
        return self.sort_key[0]

    def __lt__(self, other: BinlogPosition) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: BinlogPosition) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: BinlogPosition) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: BinlogPosition) -> bool:
        return self.sort_key >= other.sort_key

    def same_point(self, other: BinlogPosition) -> bool:
        return self.file == other.file and self.pos == other.pos

    def written_on(self, server: ServerIdentity | None) -> bool:
        """Whether file/pos refer to `server`'s binlog; positions stored before identities were kept count as its."""
        return self.server is None or server is None or self.server == server

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid})" if self.gtid else "")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "pos": self.pos, "gtid": self.gtid}
        if self.server is not None:
            data["server"] = self.server.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BinlogPosition:
        return cls(
            file=str(data["file"]),
            pos=int(data["pos"]),
            gtid=data.get("gtid"),
            server=ServerIdentity.from_json(data.get("server")),
        )


def earliest(positions: list[BinlogPosition]) -> BinlogPosition:
    return min(positions, key=lambda position: position.sort_key)


# -- MariaDB GTID states --------------------------------------------------------------------------

#: domain id → (server id, sequence number) of the last transaction of that domain.
GtidState = dict[int, tuple[int, int]]


def is_mariadb_state(text: str | None) -> bool:
    """True for a MariaDB GTID state (``''`` or ``d-s-n[,d-s-n...]``); MySQL sets and None are not."""
    if text is None:
        return False
    return all(_MARIADB_GTID.match(part.strip()) for part in text.split(",") if part.strip())


def parse_state(text: str | None) -> GtidState:
    """Parse a MariaDB GTID state; a single GTID is the state of its own domain."""
    state: GtidState = {}
    for part in (text or "").split(","):
        match = _MARIADB_GTID.match(part.strip())
        if match:
            domain, server, sequence = (int(group) for group in match.groups())
            state[domain] = (server, sequence)
    return state


def format_state(state: GtidState) -> str:
    return ",".join(f"{domain}-{server}-{sequence}" for domain, (server, sequence) in sorted(state.items()))


def advance_state(text: str | None, gtid: str) -> str:
    """The state after the transaction `gtid` on top of the state `text`: per domain on MariaDB (``d-s-n``),
    the executed set grown by one GTID on MySQL (``uuid:n`` or ``uuid:tag:n``)."""
    if is_mysql_set(text) or is_mysql_set(gtid):
        return str(MysqlGtidSet.parse(text).add(gtid))
    state = parse_state(text)
    state.update(parse_state(gtid))
    return format_state(state)


def _mysql_sets(outer: str | None, inner: str | None) -> tuple[MysqlGtidSet, MysqlGtidSet] | None:
    """Both as MySQL sets when either is one (None and '' being the empty set), else None (MariaDB states)."""
    if not (is_mysql_set(outer) or is_mysql_set(inner)):
        return None
    try:
        return MysqlGtidSet.parse(outer), MysqlGtidSet.parse(inner)
    except GtidSetError:
        return None  # a MariaDB state next to a MySQL set: the flavours never share a history


def state_contains(outer: str | None, inner: str | None) -> bool:
    """Whether every transaction of state `inner` lies within state `outer`: per domain, by sequence number on
    MariaDB; as set inclusion on MySQL. A MariaDB state never contains a MySQL set, nor the reverse."""
    sets = _mysql_sets(outer, inner)
    if sets is not None:
        return sets[0].contains(sets[1])
    if is_mysql_set(outer) or is_mysql_set(inner):
        return False
    mine, theirs = parse_state(inner), parse_state(outer)
    return all(domain in theirs and theirs[domain][1] >= sequence for domain, (_, sequence) in mine.items())


def transaction_applied(state: str | None, gtid: str) -> bool:
    """Whether the transaction `gtid` is already within `state`."""
    return state_contains(state, gtid)


def earliest_state(states: list[str | None]) -> str:
    """The state no later than any of `states`: on MariaDB per domain (a domain some lack starts from its
    beginning); on MySQL the transactions every state holds (their intersection)."""
    if any(is_mysql_set(text) for text in states):
        sets = [MysqlGtidSet.parse(text) for text in states]
        common = sets[0]
        for other in sets[1:]:
            common = common.intersection(other)
        return str(common)
    parsed = [parse_state(text) for text in states]
    domains = set().union(*parsed) if parsed else set()
    earliest_by_domain: GtidState = {}
    for domain in domains:
        if all(domain in state for state in parsed):
            earliest_by_domain[domain] = min((state[domain] for state in parsed), key=lambda entry: entry[1])
    return format_state(earliest_by_domain)
