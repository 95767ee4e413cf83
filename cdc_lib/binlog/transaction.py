"""The state of the binlog transaction the reader is inside: its pending row changes, savepoints and XA branch.

A transaction's rows are collected per table in *segments*: a SAVEPOINT starts a new segment, so
`ROLLBACK TO SAVEPOINT` drops the later segments' changes of transactional tables without copying
anything, and keeps those of non-transactional tables (MyISAM, Aria, MEMORY …), whose rows stay
changed in reality. A full ROLLBACK logged in the binlog (a transaction that also touched a
non-transactional table) likewise keeps only the non-transactional tables' changes.

XA: the rows of an `XA PREPARE`d branch are parked by XID until the `XA COMMIT` or `XA ROLLBACK`
event group that resolves it; they take effect at the commit only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from cdc_lib.changes.events import TableChanges, transaction_changes
from cdc_lib.model.positions import BinlogPosition

#: How a table keeps rolled-back changes: "yes" (rolled back with the transaction), "no" (persist), or
#: "unknown" (an engine binlake does not know: a partial rollback touching it cannot be followed exactly).
Transactional = Literal["yes", "no", "unknown"]

_TRANSACTIONAL_ENGINES = frozenset({"innodb", "xtradb", "rocksdb", "tokudb", "ndbcluster", "ndb"})
_NON_TRANSACTIONAL_ENGINES = frozenset(
    {"myisam", "aria", "memory", "heap", "csv", "archive", "mrg_myisam", "merge", "blackhole", "federated",
     "federatedx", "sequence"}
)


def engine_kind(engine: str | None) -> Transactional:
    """Whether a storage engine rolls changes back (by its name in information_schema.TABLES.ENGINE)."""
    name = (engine or "").lower()
    if name in _TRANSACTIONAL_ENGINES:
        return "yes"
    if name in _NON_TRANSACTIONAL_ENGINES:
        return "no"
    return "unknown"


@dataclass(frozen=True)
class XaId:
    """An XA transaction id as the server logs it: global transaction id, branch qualifier, format id."""

    gtrid: bytes
    bqual: bytes = b""
    format_id: int = 1

    def __str__(self) -> str:
        shown = self.gtrid.decode("utf-8", errors="replace")
        return shown if not self.bqual else f"{shown},{self.bqual.decode('utf-8', errors='replace')}"


_XID_PART = r"(?:X'(?P<{0}hex>[0-9A-Fa-f]*)'|'(?P<{0}str>(?:[^'\\]|\\.|'')*)'|0x(?P<{0}bin>[0-9A-Fa-f]*))"
_XID = re.compile(
    _XID_PART.format("g") + r"(?:\s*,\s*" + _XID_PART.format("b") + r"(?:\s*,\s*(?P<fmt>\d+))?)?",
)


def parse_xid(text: str) -> XaId | None:
    """The XID of an XA statement's argument text, e.g. `X'7831',X'',1` (as logged) or `'x1'`."""
    match = _XID.search(text)
    if match is None:
        return None

    def part(prefix: str) -> bytes:
        hex_value = match.group(f"{prefix}hex") if match.group(f"{prefix}hex") is not None else match.group(
            f"{prefix}bin"
        )
        if hex_value is not None:
            return bytes.fromhex(hex_value)
        quoted = match.group(f"{prefix}str")
        return (quoted or "").replace("''", "'").encode()

    return XaId(part("g"), part("b"), int(match.group("fmt") or 1))


@dataclass
class Segment:
    """The changes made from a savepoint (`savepoint`, None for the transaction's start) to the next one."""

    savepoint: str | None
    changes: dict[str, TableChanges] = field(default_factory=dict)


@dataclass
class OpenTransaction:
    """The event group being read: where it started, its GTID, its changes by savepoint segment, its XA id.

    `key_positions` gives each table's primary-key columns and `mode_of` its table mode (config.TableMode),
    to create its fold (events.transaction_changes).
    """

    start: BinlogPosition
    key_positions: Callable[[str], tuple[int, ...]]
    gtid: str | None = None
    xa: XaId | None = None
    segments: list[Segment] = field(default_factory=lambda: [Segment(None)])
    mode_of: Callable[[str], str] = field(default=lambda _table: "mirror")
    #: The fold of a table the read spills (cdc_lib.changes.spill.SpillSegment), None for one folded in memory.
    spill_fold: Callable[[str], TableChanges | None] = field(default=lambda _table: None)

    # -- rows ------------------------------------------------------------------------------

    def changes_for(self, table: str) -> TableChanges:
        """The current segment's changes of `table`, where new rows are folded in."""
        current = self.segments[-1].changes
        changes = current.get(table)
        if changes is None:
            changes = self.spill_fold(table) or transaction_changes(self.mode_of(table), self.key_positions(table))
            current[table] = changes
        return changes

    def buffered(self, table: str) -> int:
        """Row images of `table` this transaction holds in memory (cdc_lib.changes.spill)."""
        return sum(segment.changes[table].buffered for segment in self.segments if table in segment.changes)

    def discard_table(self, table: str) -> None:
        """Forget every change of `table` in this transaction (the table stopped)."""
        for segment in self.segments:
            segment.changes.pop(table, None)

    @property
    def tables(self) -> set[str]:
        return {name for segment in self.segments for name in segment.changes}

    @property
    def empty(self) -> bool:
        return not any(segment.changes for segment in self.segments)

    # -- savepoints ------------------------------------------------------------------------

    def savepoint(self, name: str) -> None:
        """SAVEPOINT name: a later ROLLBACK TO returns here. A savepoint of the same name is replaced."""
        self._forget_savepoint(name)
        self.segments.append(Segment(name))

    def release(self, name: str) -> None:
        """RELEASE SAVEPOINT name: the savepoint (and later ones) go; their changes stay."""
        index = self._segment_of(name)
        if index is not None:
            for segment in self.segments[index:]:
                segment.savepoint = None

    def rollback_to(self, name: str, transactional: Callable[[str], Transactional]) -> set[str]:
        """ROLLBACK TO SAVEPOINT name; returns the tables whose rolled-back changes cannot be followed.

        Changes of transactional tables since the savepoint are dropped; those of non-transactional
        tables persisted on the server and stay. A savepoint the reader never saw (the transaction began
        before the read, which cannot happen at a boundary) rolls back everything transactional.
        """
        index = self._segment_of(name)
        first = index if index is not None else 0
        unknown: set[str] = set()
        kept = Segment(None)
        for segment in self.segments[first:]:
            for table, changes in segment.changes.items():
                kind = transactional(table)
                if kind == "yes":
                    continue
                if kind == "unknown":
                    unknown.add(table)
                existing = kept.changes.get(table)
                if existing is None:
                    kept.changes[table] = changes
                else:
                    existing.merge_from(changes)
        # What persisted stays before the savepoint, which remains (a second ROLLBACK TO it is legal).
        restart = Segment(self.segments[index].savepoint if index is not None else None)
        self.segments = [*self.segments[:first], *([kept] if kept.changes else []), restart]
        return unknown

    def rollback(self, transactional: Callable[[str], Transactional]) -> set[str]:
        """A logged ROLLBACK: only non-transactional tables keep their changes; returns the unknown ones."""
        unknown = self.rollback_to("\0whole transaction", transactional)
        return unknown

    def _segment_of(self, name: str) -> int | None:
        lowered = name.lower()  # savepoint names are case-insensitive
        for index in range(len(self.segments) - 1, -1, -1):
            savepoint = self.segments[index].savepoint
            if savepoint is not None and savepoint.lower() == lowered:
                return index
        return None

    def _forget_savepoint(self, name: str) -> None:
        index = self._segment_of(name)
        if index is not None:
            self.segments[index].savepoint = None

    # -- end -------------------------------------------------------------------------------

    def folded(self) -> dict[str, TableChanges]:
        """The transaction's net changes per table, segments folded in order."""
        result: dict[str, TableChanges] = {}
        for segment in self.segments:
            for table, changes in segment.changes.items():
                existing = result.get(table)
                if existing is None:
                    result[table] = existing = changes.empty_like()
                existing.merge_from(changes)
        return result

    @property
    def row_changes(self) -> int:
        return sum(changes.change_count for segment in self.segments for changes in segment.changes.values())


@dataclass(kw_only=True)
class PreparedXa:
    """An XA branch whose PREPARE the reader has read and whose COMMIT or ROLLBACK it has not (yet)."""

    xid: XaId
    start: BinlogPosition
    gtid: str | None
    changes: dict[str, TableChanges]
    row_changes: int


@dataclass
class PreparedXas:
    """XA branches prepared in the part of the binlog read so far, by XID, in prepare order."""

    by_xid: dict[XaId, PreparedXa] = field(default_factory=dict)

    def prepare(self, transaction: OpenTransaction, xid: XaId) -> PreparedXa:
        prepared = PreparedXa(
            xid=xid, start=transaction.start, gtid=transaction.gtid, changes=transaction.folded(),
            row_changes=transaction.row_changes,
        )
        self.by_xid[xid] = prepared
        return prepared

    def resolve(self, xid: XaId) -> PreparedXa | None:
        """The branch an XA COMMIT / XA ROLLBACK ends; None when its PREPARE lies before the read."""
        return self.by_xid.pop(xid, None)

    def holding(self, table: str) -> BinlogPosition | None:
        """The start of the earliest unresolved prepared branch with changes of `table`, if any."""
        starts = [prepared.start for prepared in self.by_xid.values() if table in prepared.changes]
        return min(starts, key=lambda position: position.sort_key) if starts else None

    def tables(self) -> Iterable[str]:
        return {table for prepared in self.by_xid.values() for table in prepared.changes}


_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|--[^\n]*(?:\n|$)|#[^\n]*(?:\n|$))*", re.DOTALL)
_NAME = r"(?:`(?P<q>(?:[^`]|``)+)`|(?P<n>[\w$]+))"
_CONTROL = (
    ("begin", re.compile(r"(?:BEGIN(?:\s+WORK)?|START\s+TRANSACTION\b.*)\s*;?\s*$", re.IGNORECASE | re.DOTALL)),
    ("commit", re.compile(r"COMMIT\b(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?\s*;?\s*$",
                          re.IGNORECASE)),
    ("rollback_to", re.compile(r"ROLLBACK(?:\s+WORK)?\s+TO\s+(?:SAVEPOINT\s+)?" + _NAME, re.IGNORECASE)),
    ("rollback", re.compile(r"ROLLBACK\b(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?\s*;?\s*$",
                            re.IGNORECASE)),
    ("savepoint", re.compile(r"SAVEPOINT\s+" + _NAME, re.IGNORECASE)),
    ("release", re.compile(r"RELEASE\s+SAVEPOINT\s+" + _NAME, re.IGNORECASE)),
    ("xa_start", re.compile(r"XA\s+(?:START|BEGIN)\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_end", re.compile(r"XA\s+END\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_prepare", re.compile(r"XA\s+PREPARE\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_commit", re.compile(r"XA\s+COMMIT\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_rollback", re.compile(r"XA\s+ROLLBACK\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
)


@dataclass(frozen=True)
class Control:
    """A transaction-control statement: its kind, and the savepoint name or XA id it names."""

    kind: str
    name: str = ""
    xid: XaId | None = None
    one_phase: bool = False


def transaction_control(statement: str) -> Control | None:
    """The transaction-control statement `statement` is (leading comments aside), or None for any other."""
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    for kind, pattern in _CONTROL:
        match = pattern.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        name = (groups.get("q") or "").replace("``", "`") or groups.get("n") or ""
        xid_text = groups.get("xid")
        xid = parse_xid(xid_text) if xid_text is not None else None
        one_phase = kind == "xa_commit" and bool(re.search(r"\bONE\s+PHASE\b", xid_text or "", re.IGNORECASE))
        return Control(kind, name, xid, one_phase)
    return None
