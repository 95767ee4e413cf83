"""MySQL-shaped differential fuzzer: random MySQL 8.x binlogs (compressed transactions, partial JSON diffs),
served by the protocol stub, synced by binlake, and Delta compared with a Python model of the tables.

    python -m bench.fuzz.mysql_fuzz --minutes 10 --seed 1      # rounds until the time is up
    python -m bench.fuzz.mysql_fuzz --seed 1 --round 7         # replay one round (prints its transactions)

The differential fuzzer (bench/fuzz/fuzz.py) drives a real MariaDB, which never writes MySQL's
TRANSACTION_PAYLOAD or PARTIAL_UPDATE_ROWS events. Here the source is a binlog written by the test-side encoder
(tests/mysql_binlog_writer.py, from MySQL's documented format, independent of binlake's decoder) and served by
the MySQL 8.4 protocol stub (tests/mysql_stub.py: COM_BINLOG_DUMP, information_schema from `StubTable`s). The
truth is a Python model of each table that applies the same changes (`Model`); a partial JSON diff is applied
to the model's document with MySQL's rules as `apply_json_diffs` states them (sql/json_diff.cc), written here
apart from binlake's `json_diff`.

Every round derives from (seed, round) alone (`random.Random(f"{seed}:{round}")`): 1–2 tables of random columns
(INT and BIGINT signed and unsigned, VARCHAR utf8mb4, DECIMAL, DATETIME(6), JSON, ENUM, SET; a key of 1–2
columns), rows already in the snapshot, then phases of random transactions (inserts, updates that may change the
key, deletes, partial JSON updates with REPLACE / INSERT / REMOVE diffs on paths MySQL would log, each
transaction compressed or not), the binlog rotated to a new file at random points. The snapshot is an empty-state
commit written with `deltalake` that the first sync adopts (as tests/integration/test_mysql_fixtures.py does);
after each phase the stub serves the grown binlog and binlake syncs it in one or more batches of random size
(`batch.max_events`). Some rounds set `batch.max_payload_event_bytes` below a compressed transaction's event:
binlake must stop that row's table (`PayloadTooLargeError`, nothing of it applied from there), which is an expected
stop, until the limit is raised and the table resumed; Delta must
then equal the model as of the offset binlake kept, and the sync goes on once the limit is raised (the remedy).

At the end, every table is read with `deltalake` (never binlake) and compared with the model, JSON documents
with their key order and number types; the table offset must carry the stub's executed GTID set.

Outcomes: `ok`; `expected-stop` (the payload refusal, and everything matched before and after it);
`difference` (a row Delta holds wrongly: always a bug); `unexpected-stop` (a stopped table or a failed sync
the round did not call for). A failure prints its seed, round and the transaction list.

`--spark` adds BIGINT UNSIGNED and DECIMAL past 15 digits, which binlake writes with Spark only (deltalake's
statistics of them are inexact), so a SparkSession starts. 30 % of rounds write TABLE_MAPs without column names
(binlog_row_metadata=MINIMAL, MySQL 8's default, and the stub says so), which binlake names from the table's schema by
position (`cdc_lib.binlog.column_positions`); `--full-metadata-only` turns them off.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import random
import shutil
import string
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc_lib.binlog.payload import PayloadTooLargeError
from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.pipeline.pipeline import Pipeline
from tests.mysql_binlog_writer import (
    DELETE_ROWS,
    JSON_INSERT,
    JSON_REMOVE,
    JSON_REPLACE,
    PARTIAL_UPDATE_ROWS,
    UPDATE_ROWS,
    WRITE_ROWS,
    BinlogWriter,
    Column,
    JsonDiff,
    Table,
    json_key_order,
)
from tests.mysql_stub import BinlogFile, MySQLStub, StubColumn, StubTable
from tests.replay_start import stub_schema, write_snapshot_commit

DATABASE = "shop"
PIPELINE = "mysqlfuzz"
Row = dict[str, Any]
Key = tuple[Any, ...]

# -- values ------------------------------------------------------------------------------------------

_TEXT = string.ascii_letters + string.digits + " _-'\"\\%,.;" + "éßøçŁ中文字キ" + "😀🚀"
_KEY_TEXT = string.ascii_lowercase + string.digits + "é中"


def _text(rng: random.Random, most: int, alphabet: str = _TEXT) -> str:
    length = rng.choice([0, 1, 2, rng.randint(0, most), most]) if most else 0
    return "".join(rng.choice(alphabet) for _ in range(min(length, most)))


def _integer(rng: random.Random, low: int, high: int) -> int:
    edges = [low, high, 0, 1, -1, low + 1, high - 1]
    pick = rng.random()
    if pick < 0.3:
        return max(low, min(high, rng.choice(edges)))
    if pick < 0.6:
        return rng.randint(max(low, -1000), min(high, 1000))
    return rng.randint(low, high)


def _decimal(rng: random.Random, precision: int, scale: int) -> Decimal:
    digits = precision - scale
    whole = rng.choice([0, rng.randint(0, 10 ** min(digits, 3) - 1), rng.randint(0, 10**digits - 1)]) if digits else 0
    fraction = rng.randint(0, 10**scale - 1) if scale else 0
    sign = "-" if rng.random() < 0.4 else ""
    return Decimal(f"{sign}{whole}.{fraction:0{scale}d}" if scale else f"{sign}{whole}")


def _datetime(rng: random.Random) -> dt.datetime:
    start = dt.datetime(1000, 1, 1)
    span = (dt.datetime(9999, 12, 31, 23, 59, 59) - start).total_seconds()
    value = start + dt.timedelta(seconds=rng.randint(0, int(span)))
    return value.replace(microsecond=rng.choice([0, 1, 999_999, rng.randint(0, 999_999)]))


_KEY_NAMES = ["a", "b", "id", "x1", "name", "tags", "n", "deep", "é", "key with space", "q\"uote", "ключ", "", "$"]


def _json_scalar(rng: random.Random) -> Any:
    pick = rng.randrange(8)
    if pick == 0:
        return rng.choice([None, True, False])
    if pick == 1:
        return _integer(rng, -(1 << 15), (1 << 15) - 1)  # int16
    if pick == 2:
        return _integer(rng, -(1 << 31), (1 << 31) - 1)  # int32
    if pick == 3:
        return _integer(rng, -(1 << 63), (1 << 64) - 1)  # int64, uint64
    if pick == 4:
        return rng.choice([0.1, -2.5, 1e300, -1e-300, 3.0, 123456.789, rng.uniform(-1e6, 1e6)])
    return _text(rng, 12)


def _json(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth >= 3 or pick < 0.3 and depth:
        return _json_scalar(rng)
    if pick < 0.65:
        keys = rng.sample(_KEY_NAMES, rng.randint(0, 5))
        return {key: _json(rng, depth + 1) for key in json_key_order(keys)}
    return [_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]


@dataclass(frozen=True)
class ColumnPlan:
    """A column: its SQL type and how to draw a value of it."""

    column: Column

    def value(self, rng: random.Random, *, key: bool = False) -> Any:
        column = self.column
        if column.nullable and not key and rng.random() < 0.1:
            return None
        kind, unsigned = column.kind, column.unsigned
        if kind == "int":
            return _integer(rng, 0, (1 << 32) - 1) if unsigned else _integer(rng, -(1 << 31), (1 << 31) - 1)
        if kind == "bigint":
            return _integer(rng, 0, (1 << 64) - 1) if unsigned else _integer(rng, -(1 << 63), (1 << 63) - 1)
        if kind == "varchar":
            return _text(rng, column.arguments[0], _KEY_TEXT if key else _TEXT)
        if kind == "decimal":
            precision, scale = column.arguments
            return _decimal(rng, precision, scale)
        if kind == "datetime":
            return _datetime(rng)
        if kind == "enum":
            return rng.choice(column.labels)
        if kind == "set":
            return ",".join(label for label in column.labels if rng.random() < 0.4)
        if kind == "json":
            if rng.random() < 0.03:  # past 64 KiB: the large format
                return {"n": [1, 2.5], "big": "x" * rng.randint(65_536, 70_000)}  # keys in MySQL's order
            return _json(rng)
        raise ValueError(column.sql_type)


def _column_types(rng: random.Random, wide: bool) -> list[str]:
    """The SQL types of a round's non-key columns. Without `wide`, those delta-rs writes exactly: no BIGINT
    UNSIGNED (Delta decimal(20,0)) and no DECIMAL past 15 digits, whose statistics deltalake writes inexactly
    (binlake then refuses delta-rs for the table, `sink/choice.py`, and only Spark writes it)."""
    most = 38 if wide else 15
    return [
        "int", "int unsigned", "bigint", f"varchar({rng.choice([1, 5, 40, 64, 100])})",
        f"decimal({(p := rng.randint(1, most))},{rng.randint(0, min(p, 12))})", "datetime(6)", "json", "json",
        "enum('a','bb','ccc','é')", "set('x','y','z','w')",
    ] + (["bigint unsigned"] if wide else [])


def _key_types(wide: bool) -> list[str]:
    return ["int", "int unsigned", "bigint", "varchar(8)", "varchar(40)"] + (["bigint unsigned"] if wide else [])


# -- the model -----------------------------------------------------------------------------------


@dataclass
class TablePlan:
    table: Table
    columns: list[ColumnPlan]

    @property
    def name(self) -> str:
        return self.table.name

    def key(self, row: Row) -> Key:
        return tuple(_key_part(row[name]) for name in self.table.primary_key)

    def stub(self) -> StubTable:
        return StubTable(DATABASE, self.name, tuple(
            StubColumn(c.name, c.sql_type, nullable=c.nullable) for c in self.table.columns), self.table.primary_key)


def _key_part(value: Any) -> Any:
    # MySQL compares utf8mb4_0900_ai_ci keys without case or accents and ignores no trailing space (PAD SPACE is
    # off for 0900 collations); the fuzzer keeps string keys apart by their lowercased, accent-free form so that
    # two keys it calls different are different to MySQL too.
    if isinstance(value, str):
        return value.lower().replace("é", "e")
    return value


class Model:
    """The tables as MySQL holds them after each transaction: rows by key."""

    def __init__(self, tables: Sequence[TablePlan]) -> None:
        self.rows: dict[str, dict[Key, Row]] = {plan.name: {} for plan in tables}

    def copy(self) -> dict[str, dict[Key, Row]]:
        return {name: dict(rows) for name, rows in self.rows.items()}


# -- partial JSON: MySQL's rules (sql/json_diff.cc apply_json_diffs), on the model's documents -----------------

Leg = str | int  # a member name, or an array index


def _path_text(legs: Sequence[Leg], from_end: dict[int, int] | None = None) -> str:
    """A path as MySQL prints it (Json_path::to_string): `.name` for an ECMAScript identifier, `."..."` else,
    `[n]`, or `[last]` / `[last-k]` for the legs `from_end` marks."""
    out = "$"
    for position, leg in enumerate(legs):
        if isinstance(leg, str):
            plain = leg and (leg[0].isalpha() or leg[0] in "_$") and all(c.isalnum() or c in "_$" for c in leg)
            out += f".{leg}" if plain else "." + json.dumps(leg, ensure_ascii=False)
        elif from_end and position in from_end:
            out += "[last]" if from_end[position] == 0 else f"[last-{from_end[position]}]"
        else:
            out += f"[{leg}]"
    return out


def _nodes(document: Any, prefix: tuple[Leg, ...] = ()) -> list[tuple[tuple[Leg, ...], Any]]:
    """Every value of the document with its path (the root first)."""
    found: list[tuple[tuple[Leg, ...], Any]] = [(prefix, document)]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _nodes(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _nodes(value, (*prefix, index))
    return found


def _at(document: Any, legs: Sequence[Leg]) -> Any:
    for leg in legs:
        document = document[leg]
    return document


def _resorted(document: dict[str, Any]) -> dict[str, Any]:
    return {key: document[key] for key in json_key_order(list(document))}


def _apply(document: Any, operation: int, legs: tuple[Leg, ...], value: Any) -> Any:
    """The document after one diff, as the replica applies it: REPLACE and REMOVE on a value that exists,
    INSERT of an object member the object lacks or of an array cell (past the end: appended)."""
    parent_legs, last = legs[:-1], legs[-1]
    parent = _at(document, parent_legs)
    if operation == JSON_REPLACE:
        parent[last] = value
    elif operation == JSON_REMOVE:
        del parent[last]
    elif isinstance(parent, dict):
        assert isinstance(last, str) and last not in parent
        parent[last] = value
        replaced = _resorted(parent)
        parent.clear()
        parent.update(replaced)  # members stay in MySQL's key order
    else:
        assert isinstance(last, int)
        parent.insert(min(last, len(parent)), value)
    return document


def _draw_diffs(rng: random.Random, document: Any) -> tuple[list[JsonDiff], Any]:
    """1–4 diffs MySQL could log for JSON_SET / JSON_REPLACE / JSON_REMOVE on `document`, and the document after
    them. Each diff is drawn on the document as the diffs before it left it."""
    document = json.loads(json.dumps(document))  # a copy the diffs change
    diffs: list[JsonDiff] = []
    for _ in range(rng.randint(1, 4)):
        nodes = _nodes(document)
        inner = [(path, node) for path, node in nodes if path]
        containers = [(path, node) for path, node in nodes if isinstance(node, dict | list)]
        choices = ["insert"] + (["replace", "remove"] if inner else [])
        operation = rng.choice(choices)
        from_end: dict[int, int] = {}
        if operation == "insert":
            path, node = rng.choice(containers)
            if isinstance(node, dict):
                fresh = [key for key in _KEY_NAMES + ["new", "zz", "añadido"] if key not in node]
                legs: tuple[Leg, ...] = (*path, rng.choice(fresh))
            else:  # JSON_SET on a cell past the end appends
                legs = (*path, len(node) + rng.choice([0, 0, 1, 5]))
            value = _json(rng, 2)
            code = JSON_INSERT
        else:
            legs, _ = rng.choice(inner)
            value = _json(rng, 2) if operation == "replace" else None
            code = JSON_REPLACE if operation == "replace" else JSON_REMOVE
        for position, leg in enumerate(legs):
            if isinstance(leg, int) and rng.random() < 0.15:
                size = len(_at(document, legs[:position]))
                if leg < size:
                    from_end[position] = size - 1 - leg
        diffs.append(JsonDiff(code, _path_text(legs, from_end), value))
        document = _apply(document, code, legs, json.loads(json.dumps(value)))
    return diffs, document


#: DDL on a table no round follows (`scratch`), as an application's migrations write it between transactions.
_UNFOLLOWED_DDL = [
    "CREATE TABLE IF NOT EXISTS scratch (id INT PRIMARY KEY, j JSON)",
    "ALTER TABLE scratch ADD COLUMN extra VARCHAR(10)",
    "DROP TABLE IF EXISTS scratch",
    "CREATE TABLE `scratch` (`id` int NOT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
    "COLLATE=utf8mb4_0900_ai_ci",
]


# -- a round's plan ------------------------------------------------------------------------------


@dataclass
class Statement:
    """One statement of a transaction: the rows event's type, the table, its rows (as rows_event takes them)."""

    event_type: int
    table: str
    rows: list[Any]

    def describe(self) -> str:
        kind = {WRITE_ROWS: "INSERT", UPDATE_ROWS: "UPDATE", DELETE_ROWS: "DELETE",
                PARTIAL_UPDATE_ROWS: "PARTIAL UPDATE"}[self.event_type]
        shown = [_short(row) for row in self.rows]
        return f"{kind} {self.table} {len(self.rows)} row(s): {'; '.join(shown)}"


def _short(row: Any) -> str:
    text = repr(row)
    return text if len(text) < 300 else text[:300] + "…"


@dataclass
class Transaction:
    statements: list[Statement]
    compressed: bool
    rotate_after: bool
    #: A DDL statement on a table binlake does not follow, written before the transaction (its own GTID,
    #: no BEGIN/XID): it changes no followed row, so it must change nothing.
    ddl: str | None = None


@dataclass
class Phase:
    transactions: list[Transaction]
    #: The batch sizes of the syncs after the phase (None: until caught up in one call).
    syncs: list[int | None]


@dataclass
class RoundPlan:
    seed: int
    round: int
    tables: list[TablePlan]
    snapshot: dict[str, list[Row]]
    phases: list[Phase]
    #: batch.max_payload_event_bytes for the first syncs (None: the default), to provoke the refusal.
    payload_limit: int | None
    minimal_metadata: bool
    first_gno: int
    #: BIGINT UNSIGNED and DECIMAL past 15 digits, written by Spark (batch.writer auto), not delta-rs alone.
    wide: bool = False

    def transactions(self) -> list[Transaction]:
        return [transaction for phase in self.phases for transaction in phase.transactions]

    def script(self) -> str:
        lines = [f"tables: {', '.join(f'{p.name}({p.table.columns}) key {p.table.primary_key}' for p in self.tables)}",
                 f"snapshot rows: { {name: len(rows) for name, rows in self.snapshot.items()} }",
                 f"payload limit: {self.payload_limit}, minimal metadata: {self.minimal_metadata}"]
        for number, phase in enumerate(self.phases, 1):
            lines.append(f"phase {number}: syncs {phase.syncs}")
            for transaction in phase.transactions:
                flags = ("compressed " if transaction.compressed else "") + ("then rotate" if transaction.rotate_after
                                                                               else "")
                if transaction.ddl:
                    lines.append(f"  DDL {transaction.ddl}")
                lines.append(f"  transaction {flags}")
                lines += [f"    {statement.describe()}" for statement in transaction.statements]
        return "\n".join(lines)


class Generator:
    """Draws a round from (seed, round) alone."""

    def __init__(self, seed: int, round_number: int, *, minimal_metadata: bool = False, wide: bool = False) -> None:
        self.rng = random.Random(f"{seed}:{round_number}")
        self.seed, self.round = seed, round_number
        self.minimal_metadata, self.wide = minimal_metadata, wide

    def table(self, number: int) -> TablePlan:
        rng = self.rng
        key_types = rng.sample(_key_types(self.wide), rng.choice([1, 1, 2]))
        keys = [Column(f"k{index}", sql_type, nullable=False) for index, sql_type in enumerate(key_types)]
        others = [Column(f"c{index}", rng.choice(_column_types(rng, self.wide)), nullable=rng.random() < 0.85)
                  for index in range(rng.randint(1, 6))]
        if not any(column.kind == "json" for column in others):
            others.append(Column(f"c{len(others)}", "json"))  # every table has a JSON column to diff
        columns = keys + others
        rng.shuffle(columns)  # the key need not come first
        table = Table(100 + number, DATABASE, f"t{number}", tuple(columns), tuple(column.name for column in keys))
        return TablePlan(table, [ColumnPlan(column) for column in columns])

    def row(self, plan: TablePlan, rows: dict[Key, Row], taken: set[Key]) -> Row | None:
        for _ in range(20):
            row = {cp.column.name: cp.value(self.rng, key=cp.column.name in plan.table.primary_key)
                   for cp in plan.columns}
            if plan.key(row) not in rows and plan.key(row) not in taken:
                return row
        return None

    def statement(self, plan: TablePlan, rows: dict[Key, Row]) -> Statement | None:
        rng = self.rng
        kinds = ["insert"] + (["update", "update", "delete", "partial", "partial"] if rows else [])
        kind = rng.choice(kinds)
        if kind == "insert":
            new: list[Row] = []
            for _ in range(rng.randint(1, 5)):
                row = self.row(plan, rows, {plan.key(r) for r in new})
                if row is not None:
                    new.append(row)
            for row in new:
                rows[plan.key(row)] = row
            return Statement(WRITE_ROWS, plan.name, new) if new else None
        if kind == "delete":
            chosen = rng.sample(sorted(rows, key=repr), min(len(rows), rng.randint(1, 3)))
            gone = [rows.pop(key) for key in chosen]
            return Statement(DELETE_ROWS, plan.name, gone)
        changes: list[Any] = []
        for _ in range(rng.randint(1, 4)):
            if not rows:
                break
            key = rng.choice(sorted(rows, key=repr))
            before = rows[key]
            after = dict(before)
            for cp in plan.columns:
                name = cp.column.name
                if name in plan.table.primary_key:
                    if rng.random() < 0.15:  # a key change
                        after[name] = cp.value(rng, key=True)
                elif rng.random() < 0.4:
                    after[name] = cp.value(rng)
            diffs: dict[str, list[JsonDiff]] = {}
            if kind == "partial":
                for column in plan.table.json_columns:
                    document = before[column.name]
                    if isinstance(document, dict | list) and rng.random() < 0.8:
                        diffs[column.name], after[column.name] = _draw_diffs(rng, document)
            new_key = plan.key(after)
            if new_key != key and new_key in rows:
                continue  # the new key is taken: MySQL would refuse the statement
            del rows[key]
            rows[new_key] = after
            changes.append((before, after, diffs) if kind == "partial" else (before, after))
        if not changes:
            return None
        return Statement(PARTIAL_UPDATE_ROWS if kind == "partial" else UPDATE_ROWS, plan.name, changes)

    def plan(self) -> RoundPlan:
        rng = self.rng
        tables = [self.table(number) for number in range(1, rng.choice([2, 2, 3]))]
        state: dict[str, dict[Key, Row]] = {plan.name: {} for plan in tables}
        for plan in tables:
            for _ in range(rng.choice([0, 3, 10])):
                row = self.row(plan, state[plan.name], set())
                if row is not None:
                    state[plan.name][plan.key(row)] = row
        snapshot = {name: list(rows.values()) for name, rows in state.items()}
        compress_share = rng.choice([0.0, 0.5, 1.0])
        # Some rounds hold a compressed event past batch.max_payload_event_bytes (at least 64 KiB): binlake
        # must refuse its batch until the limit is raised.
        payload_limit = 1 << 16 if compress_share and rng.random() < 0.25 else None
        phase_count = rng.randint(1, 4)
        big_phase = rng.randrange(phase_count) if payload_limit else -1
        phases = []
        for number in range(phase_count):
            transactions = []
            if number == big_phase:
                plan = rng.choice(tables)
                row = self.row(plan, state[plan.name], set())
                if row is not None:
                    column = rng.choice(plan.table.json_columns)
                    row[column.name] = {"n": [1], "big": "y" * rng.randint(66_000, 80_000)}
                    state[plan.name][plan.key(row)] = row
                    transactions.append(Transaction([Statement(WRITE_ROWS, plan.name, [row])], True, False))
            for _ in range(rng.randint(1, 8)):
                statements = []
                for _ in range(rng.randint(1, 4)):
                    plan = rng.choice(tables)
                    statement = self.statement(plan, state[plan.name])
                    if statement is not None:
                        statements.append(statement)
                if statements:
                    ddl = rng.choice(_UNFOLLOWED_DDL) if rng.random() < 0.1 else None
                    transactions.append(Transaction(statements, rng.random() < compress_share, rng.random() < 0.15,
                                                    ddl))
            syncs = [rng.choice([None, 1, 2, 3, 7, 50]) for _ in range(rng.randint(1, 3))]
            phases.append(Phase(transactions, syncs))
        minimal = self.minimal_metadata and rng.random() < 0.3
        return RoundPlan(self.seed, self.round, tables, snapshot, phases, payload_limit, minimal,
                         rng.choice([1, 1, 58]), self.wide)


# -- running a round -------------------------------------------------------------------------------


@dataclass
class Outcome:
    result: str = "ok"  # ok | expected-stop | difference | unexpected-stop | harness-error
    detail: str = ""
    rows_compared: int = 0
    batches: int = 0
    seconds: float = 0.0
    payload_refusals: int = 0

    @property
    def failed(self) -> bool:
        return self.result in ("difference", "unexpected-stop", "harness-error")


class UnexpectedStop(Exception):
    pass


def _config(stub: MySQLStub, lake: Path, plan: RoundPlan, *, max_events: int | None,
            payload_limit: int | None) -> PipelineConfig:
    tables = plan.tables
    batch: dict[str, Any] = {"writer": "auto" if plan.wide else "delta-rs"}
    if max_events is not None:
        batch["max_events"] = max_events
    if payload_limit is not None:
        batch["max_payload_event_bytes"] = payload_limit
    return parse_config({
        "pipeline": PIPELINE,
        "source": {"host": "127.0.0.1", "port": stub.port, "user": stub.user, "password": stub.password,
                   "server_id": 4243, "tables": [f"{DATABASE}.{plan.name}" for plan in tables],
                   "connect_timeout": 5},
        "sink": {"path": str(lake)},
        "offsets": {"uri": str(lake / "_offsets")},
        "batch": batch,
    })


def _delta_value(column: Column, value: Any) -> Any:
    """A model value as the snapshot holds it in Delta (docs/types.md)."""
    if value is None:
        return None
    if column.kind == "json":
        return json.dumps(value, ensure_ascii=False)
    if column.kind == "bigint" and column.unsigned:
        return Decimal(value)
    return value


def _write_snapshot(config: PipelineConfig, plan: TablePlan, rows: list[Row], end: BinlogPosition) -> None:
    """The round's snapshot rows as binlake's one-shot snapshot leaves them (tests/replay_start.py)."""
    values = [{column.name: _delta_value(column, row[column.name]) for column in plan.table.columns} for row in rows]
    write_snapshot_commit(config, stub_schema(plan.stub()), values, end)


def _tagged(value: Any) -> Any:
    """A JSON value compared with its types and key order: 1 and 1.0 differ, as do {"a","b"} and {"b","a"}."""
    if isinstance(value, dict):
        return ("object", [(key, _tagged(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("array", [_tagged(item) for item in value])
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, float):
        return ("double", repr(value))
    return (type(value).__name__, value)


def _comparable(column: Column, value: Any, *, from_delta: bool) -> Any:
    if value is None:
        return None
    if column.kind == "json":
        if from_delta:
            value = json.loads(value, object_pairs_hook=dict)
        return _tagged(value)
    if column.kind in ("bigint", "int") or column.kind == "decimal":
        return Decimal(value)
    return value


def _read_delta(path: str) -> list[Row]:
    from bench.fuzz.fuzz import read_delta  # deltalake's scan, deletion vectors honoured

    return read_delta(path)[1]


def compare(plan: TablePlan, path: str, expected: dict[Key, Row]) -> tuple[int, list[str]]:
    """Delta against the model: rows by key, each column compared as `_comparable` says."""
    found = _read_delta(path)
    columns = plan.table.columns
    delta_rows: dict[Key, Any] = {}
    problems: list[str] = []
    for row in found:
        key = plan.key({name: row[name] for name in plan.table.primary_key})
        if key in delta_rows:
            problems.append(f"{plan.name}: key {key} twice in Delta")
        delta_rows[key] = row
    for key in sorted(set(expected) | set(delta_rows), key=repr):
        want, got = expected.get(key), delta_rows.get(key)
        if want is None or got is None:
            problems.append(f"{plan.name}: key {key} {'missing from' if got is None else 'extra in'} Delta "
                            f"(model {_short(want)}, Delta {_short(got)})")
            continue
        for column in columns:
            a = _comparable(column, want[column.name], from_delta=False)
            b = _comparable(column, got[column.name], from_delta=True)
            if a != b:
                problems.append(f"{plan.name}: key {key} column {column.name} ({column.sql_type}): model "
                                f"{_short(want[column.name])}, Delta {_short(got[column.name])}")
    return len(expected), problems


@dataclass
class Built:
    """The round's binlog, written phase by phase, and the model after each transaction."""

    writer: BinlogWriter
    #: Per phase: the files as they stand after it.
    files: list[list[BinlogFile]]
    #: (file, end position) of each transaction, with the model after it.
    states: list[tuple[BinlogPosition, dict[str, dict[Key, Row]]]]
    start: BinlogPosition


def build(plan: RoundPlan) -> Built:
    tables = {table_plan.name: table_plan for table_plan in plan.tables}
    writer = BinlogWriter(first_gno=plan.first_gno, column_names=not plan.minimal_metadata,
                          server_version="8.4.3")
    start = BinlogPosition(writer.name, writer.position, writer.executed or None)
    model = Model(plan.tables)
    for name, rows in plan.snapshot.items():
        model.rows[name] = {tables[name].key(row): row for row in rows}
    files, states = [], []
    for phase in plan.phases:
        for transaction in phase.transactions:
            if transaction.ddl:
                writer.ddl(DATABASE, transaction.ddl)
            changes = [(s.event_type, tables[s.table].table, s.rows) for s in transaction.statements]
            writer.transaction(DATABASE, changes, compressed=transaction.compressed)
            for statement in transaction.statements:
                _apply_statement(model, tables[statement.table], statement)
            states.append((BinlogPosition(writer.name, writer.position, writer.executed), model.copy()))
            if transaction.rotate_after:
                writer.rotate()
        files.append([BinlogFile(name, bytes(data)) for name, data in writer.files])
    return Built(writer, files, states, start)


def _apply_statement(model: Model, plan: TablePlan, statement: Statement) -> None:
    rows = model.rows[plan.name]
    for row in statement.rows:
        if statement.event_type == WRITE_ROWS:
            rows[plan.key(row)] = row
        elif statement.event_type == DELETE_ROWS:
            del rows[plan.key(row)]
        else:
            before, after = row[0], row[1]
            del rows[plan.key(before)]
            rows[plan.key(after)] = after


def run_round(plan: RoundPlan, work: Path) -> Outcome:
    outcome = Outcome()
    started = time.monotonic()
    try:
        _run_round(plan, work, outcome)
    except UnexpectedStop as exc:
        outcome.result, outcome.detail = "unexpected-stop", str(exc)
    except Exception as exc:  # noqa: BLE001 - any other failure is the harness's or binlake's, shown whole
        outcome.result = "unexpected-stop"
        outcome.detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
    outcome.seconds = time.monotonic() - started
    return outcome


def _run_round(plan: RoundPlan, work: Path, outcome: Outcome) -> None:
    shutil.rmtree(work, ignore_errors=True)
    lake = work / "lake"
    built = build(plan)
    first = built.files[0]
    stub = MySQLStub.serving(first, [table_plan.stub() for table_plan in plan.tables])
    compressed = any(transaction.compressed for transaction in plan.transactions())
    stub.variables.update(binlog_row_value_options="PARTIAL_JSON",
                          binlog_transaction_compression="ON" if compressed else "OFF",
                          server_uuid=built.writer.server_uuid)
    if plan.minimal_metadata:
        stub.variables["binlog_row_metadata"] = "MINIMAL"
    stub.start()
    try:
        identity = ServerIdentity(server_id=int(stub.variables["server_id"]), server_uuid=built.writer.server_uuid)
        start = BinlogPosition(built.start.file, built.start.pos, built.start.gtid, identity)
        config = _config(stub, lake, plan, max_events=None, payload_limit=None)
        for table_plan in plan.tables:
            _write_snapshot(config, table_plan, plan.snapshot[table_plan.name], start)
        payload_limit = plan.payload_limit
        for phase, files in zip(plan.phases, built.files, strict=True):
            stub.binlogs = list(files)
            executed = _executed(built, files)
            stub.variables.update(gtid_executed=executed, gtid_mode="ON")
            for index, max_events in enumerate(phase.syncs + [None]):
                last = index == len(phase.syncs)
                config = _config(stub, lake, plan, max_events=max_events, payload_limit=payload_limit)
                pipeline = Pipeline(config)
                try:
                    results = pipeline.sync(until_caught_up=max_events is None)
                except PayloadTooLargeError:
                    results = None
                # The oversized row's table stops at the transaction holding it (the others go on); an event that
                # names no table would stop the whole sync. Either way, nothing past the refusal is applied to the
                # refused table: Delta is the model as of each table's offset.
                refused = [] if results is None else [
                    table.table for result in results for table in result.tables
                    if table.error and "max_payload_event_bytes" in table.error]
                if results is None or refused:
                    outcome.payload_refusals += 1
                    _check_at_offsets(plan, built, config, outcome, "after the payload refusal", refused)
                    if outcome.result == "difference":
                        return
                    payload_limit = None  # the remedy: raise batch.max_payload_event_bytes, resume, sync again
                    resumed = Pipeline(_config(stub, lake, plan, max_events=max_events, payload_limit=None))
                    for name in refused:
                        resumed.resume(name)
                    if results is None:
                        continue
                outcome.batches += len(results)
                if not last:
                    _check_at_offsets(plan, built, config, outcome, "between batches")
                    if outcome.result == "difference":
                        return
        config = _config(stub, lake, plan, max_events=None, payload_limit=None)
        state = Pipeline(config).read_state()
        final = built.states[-1][1] if built.states else {
            p.name: {p.key(row): row for row in plan.snapshot[p.name]} for p in plan.tables}
        stopped = {name: table.error for name, table in state.tables.items() if table.error}
        problems: list[str] = []
        for table_plan in plan.tables:
            compared, found = compare(table_plan, config.sink.table_path(DATABASE, table_plan.name),
                                      final[table_plan.name])
            outcome.rows_compared += compared
            problems += found
            table_state = state.tables[f"{DATABASE}.{table_plan.name}"]
            if table_state.position.gtid != (built.writer.executed or None) and not stopped:
                problems.append(f"{table_plan.name}: offset GTID set {table_state.position.gtid!r}, the server "
                                f"executed {built.writer.executed!r}")
        if problems:
            outcome.result, outcome.detail = "difference", "\n".join(problems[:12])
        elif stopped:
            raise UnexpectedStop("; ".join(f"{name}: {error}" for name, error in stopped.items()))
        elif outcome.payload_refusals:
            outcome.result = "expected-stop"
            outcome.detail = (f"batch.max_payload_event_bytes={plan.payload_limit} refused {outcome.payload_refusals}"
                              " batch(es); converged after the limit was raised")
    finally:
        stub.stop()


def _executed(built: Built, files: list[BinlogFile]) -> str:
    """Executed_Gtid_Set once `files` are written: the set after the last transaction they hold."""
    ends = {file.name: len(file.data) for file in files}
    executed = built.start.gtid or ""
    for position, _ in built.states:
        if position.file in ends and position.pos <= ends[position.file]:
            executed = position.gtid or ""
    return executed


def _check_at_offsets(
    plan: RoundPlan, built: Built, config: PipelineConfig, outcome: Outcome, when: str,
    expected_stops: Collection[str] = (),
) -> None:
    """Each table in Delta equals the model after the last transaction its offset has passed (a stopped table's
    offset is where it resumes); a table stops only if it is in `expected_stops`."""
    state = Pipeline(config).read_state()
    problems: list[str] = []
    for table_plan in plan.tables:
        name = f"{DATABASE}.{table_plan.name}"
        table_state = state.tables[name]
        if table_state.error and name not in expected_stops:
            raise UnexpectedStop(f"{table_plan.name} stopped {when}: {table_state.error}")
        offset = table_state.position
        expected = {table_plan.key(row): row for row in plan.snapshot[table_plan.name]}
        for position, model in built.states:
            if (position.file, position.pos) <= (offset.file, offset.pos):
                expected = model[table_plan.name]
        compared, found = compare(table_plan, config.sink.table_path(DATABASE, table_plan.name), expected)
        outcome.rows_compared += compared
        problems += [f"{when} (offset {offset.file}:{offset.pos}): {problem}" for problem in found]
    if problems:
        outcome.result, outcome.detail = "difference", "\n".join(problems[:12])


# -- the command ---------------------------------------------------------------------------------------


@dataclass
class Totals:
    rounds: int = 0
    transactions: int = 0
    compressed: int = 0
    partial_rows: int = 0
    diffs: int = 0
    #: Diffs by operation (REPLACE, INSERT, REMOVE), and updates that changed a row's key.
    operations: dict[str, int] = field(default_factory=dict)
    key_changes: int = 0
    rotations: int = 0
    ddl: int = 0
    #: Rounds whose TABLE_MAPs name no columns (binlog_row_metadata=MINIMAL).
    minimal_metadata: int = 0
    batches: int = 0
    rows_compared: int = 0
    results: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


class Fuzzer:
    def __init__(self, work: Path, *, minimal_metadata: bool = True, wide: bool = False,
                 out: Callable[[str], None] = print) -> None:
        self.work, self.minimal_metadata, self.wide, self.out = work, minimal_metadata, wide, out
        self.totals = Totals()

    def plan(self, seed: int, round_number: int) -> RoundPlan:
        return Generator(seed, round_number, minimal_metadata=self.minimal_metadata, wide=self.wide).plan()

    def round(self, seed: int, round_number: int) -> Outcome:
        plan = self.plan(seed, round_number)
        outcome = run_round(plan, self.work / f"r{round_number}")
        totals = self.totals
        transactions = plan.transactions()
        totals.rounds += 1
        totals.minimal_metadata += plan.minimal_metadata
        totals.transactions += len(transactions)
        totals.compressed += sum(transaction.compressed for transaction in transactions)
        totals.rotations += sum(transaction.rotate_after for transaction in transactions)
        totals.ddl += sum(transaction.ddl is not None for transaction in transactions)
        partial = [row for transaction in transactions for statement in transaction.statements
                   if statement.event_type == PARTIAL_UPDATE_ROWS for row in statement.rows]
        totals.partial_rows += len(partial)
        totals.diffs += sum(len(diffs) for _, _, column in partial for diffs in column.values())
        for _, _, column in partial:
            for diff in (diff for diffs in column.values() for diff in diffs):
                name = {JSON_REPLACE: "REPLACE", JSON_INSERT: "INSERT", JSON_REMOVE: "REMOVE"}[diff.operation]
                totals.operations[name] = totals.operations.get(name, 0) + 1
        tables = {table_plan.name: table_plan for table_plan in plan.tables}
        totals.key_changes += sum(
            1 for transaction in transactions for statement in transaction.statements
            if statement.event_type in (UPDATE_ROWS, PARTIAL_UPDATE_ROWS)
            for row in statement.rows if tables[statement.table].key(row[0]) != tables[statement.table].key(row[1]))
        totals.batches += outcome.batches
        totals.rows_compared += outcome.rows_compared
        totals.results[outcome.result] = totals.results.get(outcome.result, 0) + 1
        self.out(f"seed {seed} round {round_number}: {len(plan.tables)} tables, {len(transactions)} transactions "
                 f"({sum(t.compressed for t in transactions)} compressed, {len(partial)} partial JSON rows), "
                 f"{outcome.batches} batches, {outcome.rows_compared} rows compared, {outcome.seconds:.1f}s → "
                 f"{outcome.result}" + (f" ({outcome.detail.splitlines()[0][:300]})" if outcome.detail else ""))
        if outcome.failed:
            totals.failures.append(f"seed {seed} round {round_number}: {outcome.result}")
            self.out(f"FAILURE seed {seed} round {round_number}: {outcome.result}\n{outcome.detail[:3000]}\n"
                     f"replay: python -m bench.fuzz.mysql_fuzz --seed {seed} --round {round_number}"
                     + ("" if self.minimal_metadata else " --full-metadata-only") + (" --spark" if self.wide else "")
                     + "\n" + plan.script()[:8000])
        return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz.mysql_fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0, help="run rounds until this much time has passed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--round", type=int, default=None, help="run this one round and print its plan")
    parser.add_argument("--full-metadata-only", action="store_true",
                        help="no round writes TABLE_MAPs without column names (by default about 30%% do: "
                        "binlog_row_metadata=MINIMAL, MySQL 8's default)")
    parser.add_argument("--spark", action="store_true",
                        help="also BIGINT UNSIGNED and DECIMAL past 15 digits, which only Spark writes (batch.writer "
                        "auto: a SparkSession starts)")
    parser.add_argument("--work", type=Path, default=None, help="keep the rounds' lakes here")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = arguments.work or Path(tempfile.mkdtemp(prefix="mysql-fuzz-"))
    fuzzer = Fuzzer(work, minimal_metadata=not arguments.full_metadata_only, wide=arguments.spark)
    if arguments.round is not None:
        print(fuzzer.plan(arguments.seed, arguments.round).script()[:20000])
        outcome = fuzzer.round(arguments.seed, arguments.round)
        return 1 if outcome.failed else 0
    deadline = time.monotonic() + arguments.minutes * 60
    number = 0
    while time.monotonic() < deadline:
        number += 1
        fuzzer.round(arguments.seed, number)
    totals = fuzzer.totals
    print(f"{totals.rounds} rounds, {totals.transactions} transactions ({totals.compressed} compressed, "
          f"{totals.rotations} rotations, {totals.key_changes} key changes, {totals.ddl} DDL), "
          f"{totals.partial_rows} partial JSON rows with {totals.diffs} diffs {totals.operations}, "
          f"{totals.batches} batches, {totals.rows_compared} rows compared: {totals.results}")
    for failure in totals.failures:
        print(f"  {failure}")
    if arguments.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if totals.failures else 0


if __name__ == "__main__":
    sys.exit(main())
