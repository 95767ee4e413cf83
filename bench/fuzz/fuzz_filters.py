"""The fuzzer's row filters (`sink.tables.<t>.filter`) and routes (`sink.routes`): drawn per round, and the oracle's
reading of them, which never uses binlake's `cdc_lib.model.row_filter` nor `cdc_lib.changes.routing`.

A filter's oracle is the source server itself: the rows the table must land are `SELECT … WHERE <the same
predicate>`, evaluated by MariaDB. The one rewrite is docs/row-filters.md's rule for zero and partial dates (they
land as NULL, so the filter sees NULL): the oracle's WHERE reads such a column as NULL there, by its own wrapper.

A route's oracle is the union of its shards' rows, each followed by its database and table name (docs/routing.md).
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Mapping, Sequence

from bench.fuzz.fuzz_values import ColumnKind

#: Share of rounds that draw a filter (with the `filters` family on), and of such a round's tables that get one.
ROUND_SHARE = 0.3
TABLE_SHARE = 0.8
#: Share of rounds that route one table's shards into one target (with the `routes` family on).
ROUTE_SHARE = 0.25

# The column types the filter subset compares (docs/row-filters.md): exact numbers, dates and datetimes. Text is
# refused today (binlake does not read collations yet), so it is only ever tested with IS [NOT] NULL.
_NUMBERS = ("tinyint", "smallint", "mediumint", "int", "bigint", "decimal")
_TEMPORAL = ("date", "datetime")
_TEXT = ("char", "varchar", "tinytext", "text")
_OPERATORS = ("=", "<>", "!=", "<", "<=", ">", ">=")


def _type_of(kind: ColumnKind) -> str:
    return kind.name.split("_")[0]


def _literal(rng: random.Random, kind: ColumnKind) -> str:
    """A constant near the values the workload writes into a column of `kind` (drawn from the same distribution,
    edges included), so that rows fall on both sides of it and UPDATEs carry rows across it."""
    data_type = _type_of(kind)
    text = kind.draw(rng)
    if data_type in _TEMPORAL:
        day = text.strip("'")
        if day[:4] == "0000" or day[5:7] == "00" or day[8:10] == "00":
            day = "1970-01-01" + day[10:]  # an impossible date is refused as a literal
        if data_type == "date" or (len(day) == 10 and rng.random() < 0.5):
            return rng.choice(("DATE ", "")) + f"'{day[:10]}'"
        if len(day) == 10:
            day += " 00:00:00"
        return f"TIMESTAMP '{day}'"
    if data_type in ("tinyint", "smallint", "mediumint", "int", "bigint") and rng.random() < 0.15:
        return text + ".5"  # an integer column compared with a decimal: exactly, as MySQL does
    return text


def _key_literal(rng: random.Random, key_kind: str) -> str:
    """A constant near the keys the generator hands out (`TableModel.new_key`: small counters; for BIGINT
    UNSIGNED keys also their mirror below 2^64), so that key changes move rows in and out."""
    if key_kind == "ubig" and rng.random() < 0.5:
        return str(rng.choice((9223372036854775807, 18446744073709551615 - rng.randint(0, 120))))
    return str(rng.randint(1, 120))


def draw_filter(rng: random.Random, key: Sequence[tuple[str, str]], columns: Mapping[str, ColumnKind]) -> str | None:
    """A random predicate within binlake's subset over the table's columns, or None (no column it can compare)."""
    literals: dict[str, ColumnKind | str] = {}
    for name, key_kind in key:
        if key_kind in ("int", "ubig"):
            literals[name] = key_kind
    literals.update({name: kind for name, kind in columns.items() if _type_of(kind) in (*_NUMBERS, *_TEMPORAL)})
    nullable = [name for name, kind in columns.items() if _type_of(kind) in (*_NUMBERS, *_TEMPORAL, *_TEXT)]
    if not literals:
        return None

    def constant(name: str) -> str:
        kind = literals[name]
        return _key_literal(rng, kind) if isinstance(kind, str) else _literal(rng, kind)

    def leaf() -> str:
        roll = rng.random()
        if nullable and roll < 0.12:
            return f"`{rng.choice(nullable)}` IS {rng.choice(('', 'NOT '))}NULL"
        name = rng.choice(list(literals))
        if roll < 0.62:
            return f"`{name}` {rng.choice(_OPERATORS)} {constant(name)}"
        if roll < 0.8:
            values = ", ".join(constant(name) for _ in range(rng.randint(1, 4)))
            return f"`{name}` {rng.choice(('', 'NOT '))}IN ({values})"
        return f"`{name}` {rng.choice(('', 'NOT '))}BETWEEN {constant(name)} AND {constant(name)}"

    def node(depth: int) -> str:
        roll = rng.random()
        if depth == 0 or roll < 0.45:
            return leaf()
        if roll < 0.6:
            return f"NOT ({node(depth - 1)})"
        word = rng.choice(("AND", "OR"))
        return f"({node(depth - 1)} {word} {node(depth - 1)})"

    return node(rng.choice((0, 1, 2, 2, 3)))


def filter_columns(text: str) -> set[str]:
    """The columns a drawn filter names (the generator backticks every name; literals hold no backtick)."""
    return set(re.findall(r"`([^`]+)`", text))


def oracle_where(text: str, temporal: Collection[str]) -> str:
    """The filter as the oracle's WHERE: each DATE/DATETIME column in `temporal` read as NULL where it holds a zero
    or partial date, as docs/row-filters.md says the filter sees it (MariaDB would compare '0000-00-00' as a
    date before every other)."""

    def read(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in temporal:
            return match.group(0)
        column = f"`{name}`"
        return f"IF(YEAR({column}) = 0 OR MONTH({column}) = 0 OR DAYOFMONTH({column}) = 0, NULL, {column})"

    return re.sub(r"`([^`]+)`", read, text)


def route_source(names: Sequence[str]) -> str:
    """A route's `source` regular expression matching exactly the shards `names` ('database.table')."""
    return "(?:" + "|".join(re.escape(name) for name in names) + ")"


__all__ = ["ROUND_SHARE", "ROUTE_SHARE", "TABLE_SHARE", "draw_filter", "filter_columns", "oracle_where",
           "route_source"]
