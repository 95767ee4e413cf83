"""MySQL's partial JSON updates (`binlog_row_value_options=PARTIAL_JSON`), applied as the server applies them.

A PARTIAL_UPDATE_ROWS event (type 39) logs an UPDATE like UPDATE_ROWS, except that in the after image a JSON
column the partial-bits bitmap marks holds a *diff vector* instead of the document: diffs back to back, each an
operation byte (0 REPLACE, 1 INSERT, 2 REMOVE), a packed-length path text (`$.a[2]."b c"`) and, except for
REMOVE, a packed-length value in MySQL's binary JSON. The server writes it in `Json_diff_vector::write_binary` and
a replica applies it in `apply_json_diffs` (sql/json_diff.cc): each diff in order, to the document of the before
image; a path the document lacks (or the root, or an INSERT of a member that exists) makes it reject the update.
This module does the same on the python-mysql-replication form of the document (objects as dicts with bytes keys,
strings as bytes), so the result goes through the very converter a full after image goes through
(`types.binlog_converter`).

binlake applies a diff only to the before image's own document: the reader has no other copy of it (the Delta
table is not read back). So it needs the before image to carry the column, as `binlog_row_image=FULL` (which
binlake requires anyway) does; anything it cannot apply exactly — a missing old document, an unknown operation,
a path with a wildcard or range, a path the document lacks, an array step on a non-array (no auto-wrap) —
raises `DiffNotApplicable`, and the caller stops the table rather than write a guess. What the replica rejects is
refused here too: a binlog MySQL itself could not apply has no exact result.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

REPLACE, INSERT, REMOVE = 0, 1, 2
OPERATIONS = {REPLACE: "REPLACE", INSERT: "INSERT", REMOVE: "REMOVE"}


class DiffNotApplicable(ValueError):
    """A JSON diff cannot be read or applied exactly; the table stops (the caller adds the table and remedy)."""


@dataclass(frozen=True)
class Member:
    """`.name`: an object member."""

    name: str


@dataclass(frozen=True)
class Cell:
    """`[n]` (from_end False) or `[last - n]` (from_end True): an array cell."""

    index: int
    from_end: bool = False


Leg = Member | Cell


@dataclass(frozen=True)
class DiffVector:
    """A partial JSON column's value as read from the after image: the diff vector's bytes, not yet parsed."""

    data: bytes


@dataclass(frozen=True)
class JsonDiff:
    """One diff: the operation, its path as logged and parsed, and the new value (None for REMOVE)."""

    operation: int
    path_text: str
    path: tuple[Leg, ...]
    value: Any = None


# -- the path grammar ----------------------------------------------------------------------------

_SPACE = " \t\n\r"
_UNQUOTED_END = frozenset(_SPACE + '.[]*"')


def parse_path(text: str) -> tuple[Leg, ...]:
    """The legs of a MySQL JSON path (`$`, `.member`, `."quoted member"`, `[n]`, `[last]`, `[last-n]`).

    Wildcards (`.*`, `[*]`, `**`) and ranges (`[1 to 3]`) never name one location, and the server never logs
    them in a diff; they are refused, as is anything else that is not a path.
    """
    pos = _skip(text, 0)
    if not text.startswith("$", pos):
        raise DiffNotApplicable(f"JSON path {text!r} does not start with '$'")
    pos = _skip(text, pos + 1)
    legs: list[Leg] = []
    while pos < len(text):
        char = text[pos]
        if char == ".":
            pos = _skip(text, pos + 1)
            if text.startswith('"', pos):
                try:
                    name, pos = json.JSONDecoder().raw_decode(text, pos)
                except ValueError:
                    raise DiffNotApplicable(f"JSON path {text!r} has a badly quoted member name") from None
            else:
                end = pos
                while end < len(text) and text[end] not in _UNQUOTED_END:
                    end += 1
                name, pos = text[pos:end], end
                if not name:
                    raise DiffNotApplicable(f"JSON path {text!r} has a wildcard or an empty member name")
            legs.append(Member(name))
        elif char == "[":
            close = text.find("]", pos)
            if close < 0:
                raise DiffNotApplicable(f"JSON path {text!r} has an unclosed '['")
            legs.append(_cell(text[pos + 1:close].strip(_SPACE), text))
            pos = close + 1
        else:
            raise DiffNotApplicable(f"JSON path {text!r} has {char!r} where a '.' or '[' should be")
        pos = _skip(text, pos)
    return tuple(legs)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _cell(inner: str, text: str) -> Cell:
    if inner.isascii() and inner.isdigit():
        return Cell(int(inner))
    if inner.startswith("last"):
        rest = inner[4:].strip(_SPACE)
        if not rest:
            return Cell(0, from_end=True)
        if rest.startswith("-"):
            offset = rest[1:].strip(_SPACE)
            if offset.isascii() and offset.isdigit():
                return Cell(int(offset), from_end=True)
    raise DiffNotApplicable(f"JSON path {text!r} has an array step [{inner}] that is not one cell (a wildcard or "
                            "a range) or not a number")


def path_text(legs: Sequence[Leg]) -> str:
    """A path's text in the server's form (for messages and tests)."""
    parts = ["$"]
    for leg in legs:
        if isinstance(leg, Member):
            plain = leg.name.isidentifier() and leg.name.isascii()
            parts.append(f".{leg.name}" if plain else "." + json.dumps(leg.name, ensure_ascii=False))
        else:
            parts.append(f"[last-{leg.index}]" if leg.from_end and leg.index else
                         "[last]" if leg.from_end else f"[{leg.index}]")
    return "".join(parts)


# -- the diff vector ----------------------------------------------------------------------------


def read_diffs(data: bytes, parse_value: Callable[[bytes], Any]) -> list[JsonDiff]:
    """The diffs of one column's diff vector (its bytes after the 4-byte length), in order.

    `parse_value` turns a value's binary JSON into the library's form (`replication_library.parse_binary_json`).
    The diffs must fill the bytes exactly: a shorter or longer vector is not what the server wrote.
    """
    diffs = []
    pos = 0
    while pos < len(data):
        operation = data[pos]
        if operation not in OPERATIONS:
            raise DiffNotApplicable(f"a JSON diff has operation {operation}, which binlake does not know "
                                    "(MySQL writes 0 REPLACE, 1 INSERT, 2 REMOVE)")
        length, pos = _packed_length(data, pos + 1)
        raw_path = _take(data, pos, length)
        pos += length
        try:
            text = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            raise DiffNotApplicable(f"a JSON diff's path {raw_path!r} is not UTF-8") from None
        value = None
        if operation != REMOVE:
            length, pos = _packed_length(data, pos)
            raw_value = _take(data, pos, length)
            pos += length
            if not raw_value:
                raise DiffNotApplicable(f"the JSON diff {OPERATIONS[operation]} {text} has an empty value")
            try:
                value = parse_value(raw_value)
            except Exception as exc:  # noqa: BLE001 - any unreadable value stops the table, named
                raise DiffNotApplicable(f"the value of the JSON diff {OPERATIONS[operation]} {text} is not "
                                        f"readable binary JSON ({exc.__class__.__name__}: {exc})") from None
        diffs.append(JsonDiff(operation, text, parse_path(text), value))
    return diffs


def _packed_length(data: bytes, pos: int) -> tuple[int, int]:
    """MySQL's packed integer (net_store_length): one byte below 251, else 252/253/254 and 2/3/8 bytes."""
    first = _take(data, pos, 1)[0]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}.get(first)
    if size is None:
        raise DiffNotApplicable(f"a JSON diff has a length prefix byte {first}, which is no length")
    return int.from_bytes(_take(data, pos + 1, size), "little"), pos + 1 + size


def _take(data: bytes, pos: int, length: int) -> bytes:
    if pos + length > len(data):
        raise DiffNotApplicable("a JSON diff vector ends in the middle of a diff")
    return data[pos:pos + length]


# -- applying -----------------------------------------------------------------------------------


def apply_diffs(document: Any, diffs: Sequence[JsonDiff]) -> Any:
    """The document after the diffs, each applied in order as MySQL's `apply_json_diffs` does.

    `document` (the library's form of the before image's value) is not changed; the result shares no
    containers with it.
    """
    result = copy.deepcopy(document)
    for diff in diffs:
        result = _apply(result, diff)
    return result


def _apply(document: Any, diff: JsonDiff) -> Any:
    legs, name = diff.path, f"{OPERATIONS[diff.operation]} {diff.path_text}"
    if not legs:
        # The server logs a new whole document as a full value, never as a diff, and a replica rejects one.
        raise DiffNotApplicable(f"the JSON diff {name} names the whole document, which MySQL rejects in a diff")
    parent = _seek(document, legs[:-1], name)
    last = legs[-1]
    if diff.operation == INSERT:
        _insert(parent, last, copy.deepcopy(diff.value), name)
        return document
    if isinstance(last, Member):
        key = _member_key(parent, last, name)
        if diff.operation == REPLACE:
            parent[key] = copy.deepcopy(diff.value)
        else:
            del parent[key]
        return document
    position = _cell_position(parent, last, name)
    if diff.operation == REPLACE:
        parent[position] = copy.deepcopy(diff.value)
    else:
        del parent[position]
    return document


def _seek(document: Any, legs: Sequence[Leg], name: str) -> Any:
    """The one value `legs` name, without auto-wrapping a non-array (as the replica's seek); a path the
    document lacks is refused, as the replica rejects it."""
    current = document
    for leg in legs:
        if isinstance(leg, Member):
            current = current[_member_key(current, leg, name)]
        else:
            current = current[_cell_position(current, leg, name)]
    return current


def _member_key(container: Any, leg: Member, name: str) -> Any:
    if not isinstance(container, dict):
        raise DiffNotApplicable(f"the JSON diff {name} names member {leg.name!r} of a value that is no object")
    wanted = leg.name.encode("utf-8", errors="surrogateescape")
    for key in container:
        if _key_bytes(key) == wanted:
            return key
    raise DiffNotApplicable(f"the JSON diff {name} names member {leg.name!r}, which the old document lacks")


def _cell_position(container: Any, leg: Cell, name: str) -> int:
    if not isinstance(container, list):
        # No auto-wrap of a non-array into a one-cell array: the replica rejects such a diff too.
        raise DiffNotApplicable(f"the JSON diff {name} names an array cell of a value that is no array")
    if leg.index >= len(container):
        raise DiffNotApplicable(f"the JSON diff {name} names a cell past the end of a {len(container)}-cell array")
    return len(container) - 1 - leg.index if leg.from_end else leg.index


def _insert(parent: Any, leg: Leg, value: Any, name: str) -> None:
    if isinstance(leg, Member) and isinstance(parent, dict):
        wanted = leg.name.encode("utf-8", errors="surrogateescape")
        if any(_key_bytes(key) == wanted for key in parent):
            raise DiffNotApplicable(f"the JSON diff {name} inserts member {leg.name!r}, which the old document "
                                    "has already (MySQL rejects it)")
        kept = [*parent.items(), (wanted, value)]
        # MySQL keeps an object's members ordered by key length, then by key bytes (Json_key_comparator): the
        # full after image would list them so, and the library reads them in that order.
        kept.sort(key=lambda entry: (len(_key_bytes(entry[0])), _key_bytes(entry[0])))
        parent.clear()
        parent.update(kept)
        return
    if isinstance(leg, Cell) and isinstance(parent, list):
        size = len(parent)
        # As Json_array_index: a cell past the end appends; [last-n] before the start inserts first.
        if leg.from_end:
            position = size - 1 - leg.index if leg.index < size else 0
        else:
            position = min(leg.index, size)
        parent.insert(position, value)
        return
    wanted_kind = "object" if isinstance(leg, Member) else "array"
    raise DiffNotApplicable(f"the JSON diff {name} inserts into a value that is no {wanted_kind}")


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    return str(key).encode("utf-8", errors="surrogateescape")
