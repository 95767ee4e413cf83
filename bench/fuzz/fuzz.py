"""Differential fuzzer: random tables, values, transaction shapes, DDL, syncs and crashes, then source vs Delta.

    python -m bench.fuzz.fuzz --minutes 10 --seed 1          # rounds until the time is up (own MariaDB)
    python -m bench.fuzz.fuzz --seed 1 --round 7             # replay one round
    python -m bench.fuzz.fuzz --seed 1 --families -xa,-crash # narrow the families
    python -m bench.fuzz.fuzz --minutes 60 --long            # + concurrent actors (`race`: re-snapshot, outside writer)
    python -m bench.fuzz.fuzz --minutes 10 --columns-share 1 # column rules and masks in every round
    python -m bench.fuzz.fuzz --minutes 10 --filters-share 1 --routes-share 0.5  # row filters, routed shards

Every round derives from (seed, round) alone: its tables, rows, statements, sync points and crashes are
drawn from `random.Random(f"{seed}:{round}")` before anything runs, so a round replays exactly. A round:

1. creates a fresh database with 1–3 random tables (every type of docs/types.md, several key kinds,
   text columns in the server's character sets, optionally a MyISAM and a RANGE-partitioned table),
   preloads rows, and snapshots them with binlake;
2. runs the workload steps: transactions of random shapes, DDL, binlake syncs (in-process, follow mode
   with a time budget, CLI), and CLI syncs SIGKILLed at a failpoint;
3. syncs until caught up and compares every table row by row: the source as the server renders it
   (PyMySQL text protocol), Delta through the `deltalake` package's scan — never binlake's reconcile.

The `paths` family draws, per round, the config and steps that send batches down each apply path
(`RoundSettings`, `PATHS`): writer threads (1, 2, 3 or the cores) with steps that change several tables in
one batch; insert-only bursts alone in their batch (the append path of consistent tables); a tiny
`batch.max_buffered_changes` (spill); a tiny `snapshot.rows_per_chunk` (a chunked snapshot in waves, its CLI
sometimes killed between two waves and resumed after part of the workload); follow mode, in-process and as
`binlake sync --follow` killed at a failpoint; bursts killed while they append, spill and commit
concurrently. Each round prints which paths its Delta logs (commit metadata), binlake's log (spills) and the
killed processes show it took; a run prints how many rounds went through each.

With `paths` on, each round also draws `batch.writer` (spark, delta-rs or auto; `WRITERS`) and in most rounds
switches to another one once or twice between its batches, so one table's log holds commits of both engines
(Spark snapshot, then batches by either). The engine that wrote each batch is counted from its commit's
`engineInfo` (`spark_batches`, `delta_rs_batches`), not from the config.

The `columns` family gives some rounds column rules (`sink.tables.<db.t>.columns` / `.mask`, drawn by
`bench/fuzz/fuzz_columns.py` from a generator of their own): include or exclude lists and masks. The oracle then
projects and masks the source itself, by its own reading of docs/columns-and-masking.md, before comparing.

The `filters` family gives some rounds' tables a random row filter (`sink.tables.<db.t>.filter`; drawn by
`bench/fuzz/fuzz_filters.py`); the oracle keeps the rows the source server itself selects with the same predicate
(`SELECT … WHERE`), never binlake's evaluator. The `routes` family routes the first table and 1-2 copies of it
(one maybe in a second database) into one target (`sink.routes`), sometimes re-snapshotting one shard; the oracle
is the union of the shards' rows, each followed by its database and table name.

Outcomes: `ok`; `expected-stop` (binlake stopped a table after a form that should stop it); failures are
`difference` (success with a wrong row, always a bug) and `unexpected-stop` (a stopped table or a failed
sync the workload did not call for). A failure is shrunk (ddmin over steps, then statements) and printed
with its seed, round and the smallest reproduction found.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"
time.tzset()

import pymysql  # noqa: E402

from bench.fuzz import fuzz_columns, fuzz_filters  # noqa: E402
from bench.fuzz.fuzz_values import (  # noqa: E402
    ColumnKind,
    SourceColumn,
    canonical_delta,
    canonical_source,
    charset_alphabets,
    column_kinds,
    quote,
    same,
)

FAMILIES = ("types", "charsets", "txn", "big", "pkswap", "xa", "savepoint", "ddl", "ddl_stop", "partition",
            "sync_cli", "crash", "paths", "columns", "filters", "routes")
#: Families only the long mode (`--long`) turns on: `race`, a second actor on a table while a CLI sync is paused
#: before its Delta commit (a re-snapshot of the table, or an outside writer compacting it), then the sync resumes.
LONG_FAMILIES = ("race",)
#: The second actors of a `race` step.
RACE_ACTORS = ("resnapshot", "resnapshot", "optimize")
#: Failpoints a CLI sync may be killed at (cdc_lib/common/faults.py); a snapshot crash uses after_snapshot_commit.
SYNC_FAILPOINTS = ("binlog_mid_read", "after_delta_commit", "before_offset_write")
#: Failpoints between the waves of a chunked snapshot (cdc_lib/snapshot/chunked.py), each taken at its n-th arrival.
WAVE_FAILPOINTS = ("after_snapshot_wave_commit@1", "after_snapshot_wave_recorded@1", "before_snapshot_wave_commit@2",
                   "after_snapshot_wave_commit@2")
#: The apply paths a run reports coverage of: rounds whose Delta logs (or binlake's log) show each one taken.
PATHS = ("append", "concurrent", "spill", "chunked", "between_waves", "follow", "follow_cli", "crash_append",
         "crash_concurrent", "crash_spill", "crash_follow", "crash_chunked", "spark_batches", "delta_rs_batches",
         "delta_rs_refused", "columns", "filters", "routes", "resnapshot_shard", "resnapshot_refused")
#: `batch.writer` values a round draws (with `paths` on), and may switch between in its workload.
WRITERS = ("spark", "delta-rs", "auto")
#: Statement forms after which binlake may stop the table (instead of applying them exactly).
EXPECTED_STOP_FORMS = ("DROP COLUMN", "RENAME COLUMN", "DROP PARTITION", "TRUNCATE PARTITION")
#: The columns a route's target adds after the source's, as docs/routing.md names them (not binlake's constants).
ROUTE_COLUMNS = ("_binlake_source_db", "_binlake_source_table")

# -- the plan of a round ------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One thing a step does: run SQL on the workload connection, or run binlake."""

    #: "sql" | "sync" | "sync_cli" | "crash" | "follow" (in-process, `text` = budget seconds) |
    #: "follow_cli" (`binlake sync --follow`, `text` = its failpoint or "") | "snapshot" (resume unfinished snapshots)
    #: | "writer" (`batch.writer` = `text` for the syncs that follow: config rewritten, pipeline rebuilt)
    #: | "resnapshot" (binlake snapshot of `table`, in-process, while its siblings of a route keep their rows)
    kind: str
    text: str = ""  # the SQL, the failpoint of a crash (`name` or `name@n`: its n-th arrival), a follow budget
    table: str = ""  # for DDL that may stop a table: the table it names
    #: For a crash: the apply paths the killed process was set up to be in (counted when the kill happened).
    paths: tuple[str, ...] = ()

    def render(self) -> str:
        if self.kind == "sql":
            return self.text if self.text.rstrip().endswith(";") else self.text + ";"
        if self.kind == "crash":
            return f"-- binlake sync, SIGKILLed at failpoint {self.text}"
        if self.kind == "follow":
            return f"-- binlake follow (in-process), budget {self.text}s"
        if self.kind == "follow_cli":
            killed = f", SIGKILLed at failpoint {self.text}" if self.text else ""
            return f"-- binlake sync --follow (CLI subprocess){killed}"
        if self.kind == "snapshot":
            return "-- binlake snapshot of the tables whose snapshot is unfinished (resumes at its next wave)"
        if self.kind == "writer":
            return f"-- batch.writer: {self.text} from here on"
        if self.kind == "resnapshot":
            return f"-- binlake snapshot --table {self.table} (a re-snapshot)"
        return f"-- binlake sync ({'in-process' if self.kind == 'sync' else 'CLI subprocess'})"


@dataclass(frozen=True)
class Step:
    label: str
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class TablePlan:
    #: The table's name in the round's database, or 'database.table' for one in another (a route's shard).
    name: str
    create: str
    engine: str


@dataclass(frozen=True)
class RoundSettings:
    """The round's binlake config beyond the defaults: which apply paths its batches and snapshot can take."""

    #: Writer threads of a batch (None: the cores, 2 here); 1 writes the changed tables one after another.
    apply_threads: int | None = None
    #: The append path for keys a batch inserts into a consistent table.
    append_inserts: bool = True
    #: Tiny (100, the least allowed): a table with more changes in a batch spills them to Parquet
    #: (cdc_lib/changes/spill.py).
    max_buffered_changes: int | None = None
    #: Tiny: the snapshot of a preloaded table runs in several waves of chunks (cdc_lib/snapshot/chunked.py).
    rows_per_chunk: int | None = None
    chunks_per_wave: int | None = None
    #: `batch.writer` at the round's start: which engine writes mirror batches (a `writer` step may switch it).
    writer: str = "auto"

    def apply(self, document: dict[str, Any]) -> None:
        batch = document.setdefault("batch", {})
        batch["writer"] = self.writer
        if self.apply_threads is not None:
            batch["apply_threads"] = self.apply_threads
        batch["append_inserts"] = self.append_inserts
        if self.max_buffered_changes is not None:
            batch["max_buffered_changes"] = self.max_buffered_changes
        if self.rows_per_chunk is not None:
            document["snapshot"] = {"rows_per_chunk": self.rows_per_chunk, "chunks_per_wave": self.chunks_per_wave or 1}

    def concurrent(self) -> bool:
        return self.apply_threads is None or self.apply_threads > 1

    def describe(self) -> str:
        parts = [f"writer {self.writer}", f"apply_threads {self.apply_threads or 'cores'}",
                 f"append_inserts {self.append_inserts}"]
        if self.max_buffered_changes is not None:
            parts.append(f"max_buffered_changes {self.max_buffered_changes}")
        if self.rows_per_chunk is not None:
            parts.append(f"rows_per_chunk {self.rows_per_chunk}, chunks_per_wave {self.chunks_per_wave or 1}")
        return ", ".join(parts)


@dataclass(frozen=True)
class RoundPlan:
    seed: int
    round: int
    tables: tuple[TablePlan, ...]
    preload: tuple[Step, ...]
    #: A CLI snapshot SIGKILLed at this failpoint (`after_snapshot_commit`, or between two waves of a chunked
    #: snapshot: `after_snapshot_wave_commit@2` …) before the in-process snapshot; "" for none. A table left
    #: between waves resumes at the workload's `snapshot` step (or before the final sync).
    snapshot_crash: str
    steps: tuple[Step, ...]
    settings: RoundSettings = RoundSettings()
    #: Column rules per table (`sink.tables.<db.t>` documents: `columns`, `mask`; bench/fuzz/fuzz_columns.py), by
    #: table name; () in most rounds (every column in clear).
    rules: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: Routes (`sink.routes`; bench/fuzz/fuzz_filters.py): per target table (in the round's database), the shards
    #: (table names as in `tables`) routed into it; () in most rounds.
    routes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def rules_of(self, table: str) -> dict[str, Any] | None:
        return dict(self.rules).get(table)

    def statements(self) -> int:
        return sum(1 for step in (*self.preload, *self.steps) for action in step.actions if action.kind == "sql")

    def transactions(self) -> int:
        return sum(1 for step in (*self.preload, *self.steps) if step.label.startswith(("txn", "xa", "savepoint",
                                                                                         "autocommit", "big", "burst",
                                                                                         "multi", "crash_burst",
                                                                                         "follow_cli")))

    def script(self) -> str:
        """The round as a replayable script (SQL plus binlake steps as comments)."""
        lines = [f"-- bench.fuzz.fuzz seed {self.seed} round {self.round}", f"-- config: {self.settings.describe()}"]
        lines += [table.create + ";" for table in self.tables]
        lines += [f"-- sink.tables.<db>.{name}: {fuzz_columns.describe(rules)}" for name, rules in self.rules]
        lines += [f"-- sink.routes: {', '.join(shards)} -> <db>.{target}" for target, shards in self.routes]
        for step in self.preload:
            lines += [f"-- preload: {step.label}", *(action.render() for action in step.actions)]
        crash = f" (CLI killed at {self.snapshot_crash} first)" if self.snapshot_crash else ""
        lines.append("-- binlake snapshot" + crash)
        for step in self.steps:
            lines += [f"-- step: {step.label}", *(action.render() for action in step.actions)]
        if any(action.text.startswith(("BEGIN", "XA START", "SAVEPOINT")) for step in self.steps
               for action in step.actions):
            lines.append("-- end of workload: the harness rolls back what is left open "
                         "(ROLLBACK; XA END + XA ROLLBACK of each XA branch)")
        lines.append("-- binlake sync --until-caught-up; compare every table")
        return "\n".join(lines)


@dataclass
class TableModel:
    """What the generator believes a table holds, to draw statements that mostly succeed."""

    name: str
    key: list[tuple[str, str]]  # (column, "int" | "ubig" | "str")
    columns: dict[str, ColumnKind]
    keys: list[tuple[Any, ...]] = field(default_factory=list)
    next_key: int = 1
    engine: str = "InnoDB"
    partitioned: bool = False
    #: The shards of a route are created alike (same columns) and written to as separate tables.
    shard_of: str = ""

    def key_literal(self, key: tuple[Any, ...]) -> list[str]:
        return [str(part) if isinstance(part, int) else quote(part) for part in key]

    def where(self, key: tuple[Any, ...]) -> str:
        return " AND ".join(f"`{column}` = {literal}" for (column, _), literal in zip(self.key, self.key_literal(key),
                                                                                      strict=True))

    def new_key(self, rng: random.Random) -> tuple[Any, ...]:
        self.next_key += rng.randint(1, 3)
        number = self.next_key
        parts: list[Any] = []
        for _, kind in self.key:
            if kind == "int":
                parts.append(number if not self.partitioned else rng.choice((number, number + 2000)))
            elif kind == "ubig":
                parts.append(18446744073709551615 - number if rng.random() < 0.5 else number)
            else:
                parts.append(f"k{number:05d}" + rng.choice(("", "é", "😀", "_x")))
        return tuple(parts)


class Generator:
    """Draws a `RoundPlan` from (seed, round) and the enabled families."""

    def __init__(self, seed: int, round_number: int, families: frozenset[str], database: str,
                 alphabets: dict[str, tuple[str, ...]]) -> None:
        self.rng = random.Random(f"{seed}:{round_number}")
        self.seed, self.round = seed, round_number
        self.families = families
        self.database = database
        usable = alphabets if "charsets" in families else {name: alphabets[name] for name in ("utf8mb4",)
                                                           if name in alphabets}
        self.kinds = column_kinds(usable, self.rng)
        if "types" not in families:
            # Plain columns only (and text in every character set when `charsets` is on), so a run can
            # look at transaction shapes or DDL without value bugs in the way.
            plain = ("int", "bigint", "varchar_utf8mb4", "decimal_10_2")
            self.kinds = [kind for kind in self.kinds if kind.name in plain or (
                "charsets" in families and "_" in kind.name and kind.name.split("_")[0] in
                ("char", "varchar", "tinytext", "text"))] or self.kinds[:4]
        self.models: list[TableModel] = []
        self.added = 0
        self.xids = 0
        self.cli_left = 1 if self.rng.random() < (0.6 if self.on("paths") else 0.4) else 0
        self.settings = RoundSettings()

    def on(self, family: str) -> bool:
        return family in self.families

    def ref(self, model: TableModel) -> str:
        database, _, table = _full(self.database, model.name).partition(".")
        return f"`{database}`.`{table}`"

    # -- tables --

    def make_tables(self) -> list[TablePlan]:
        rng = self.rng
        plans = []
        count = rng.choice((1, 2, 2, 3))
        for index in range(count):
            engine = "InnoDB"
            if index == count - 1 and self.on("savepoint") and rng.random() < 0.5:
                engine = "MyISAM"
            partitioned = engine == "InnoDB" and self.on("partition") and rng.random() < 0.25
            key_kind = "int" if partitioned else rng.choice(("int", "ubig", "str", "composite"))
            key = {"int": [("id", "int")], "ubig": [("id", "ubig")], "str": [("k", "str")],
                   "composite": [("id", "int"), ("k", "str")]}[key_kind]
            name = f"t{index}"
            columns = {f"c{number}": rng.choice(self.kinds) for number in range(rng.randint(2, 7))}
            key_ddl = {"int": "INT", "ubig": "BIGINT UNSIGNED", "str": "VARCHAR(40) CHARACTER SET utf8mb4"}
            parts = [f"`{column}` {key_ddl[kind]} NOT NULL" for column, kind in key]
            parts += [f"`{column}` {kind.ddl}" for column, kind in columns.items()]
            parts.append("PRIMARY KEY (" + ", ".join(f"`{column}`" for column, _ in key) + ")")
            create = f"CREATE TABLE `{self.database}`.`{name}` ({', '.join(parts)}) ENGINE={engine}"
            if partitioned:
                create += (" PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), "
                           "PARTITION p1 VALUES LESS THAN (3000), PARTITION p2 VALUES LESS THAN MAXVALUE)")
            self.models.append(TableModel(name, key, columns, engine=engine, partitioned=partitioned))
            plans.append(TablePlan(name, create, engine))
        return plans

    # -- statements --

    def insert(self, model: TableModel, rows: int = 1) -> str:
        columns = list(model.columns)
        tuples = []
        for _ in range(rows):
            key = model.new_key(self.rng)
            model.keys.append(key)
            values = model.key_literal(key) + [self.value(model.columns[column]) for column in columns]
            tuples.append("(" + ", ".join(values) + ")")
        names = ", ".join(f"`{column}`" for column in [*(c for c, _ in model.key), *columns])
        return f"INSERT INTO {self.ref(model)} ({names}) VALUES " + ", ".join(tuples)

    def value(self, kind: ColumnKind) -> str:
        return "NULL" if self.rng.random() < 0.08 else kind.draw(self.rng)

    def update(self, model: TableModel) -> str | None:
        if not model.keys or not model.columns:
            return None
        key = self.rng.choice(model.keys)
        chosen = self.rng.sample(list(model.columns), self.rng.randint(1, len(model.columns)))
        sets = ", ".join(f"`{column}` = {self.value(model.columns[column])}" for column in chosen)
        return f"UPDATE {self.ref(model)} SET {sets} WHERE {model.where(key)}"

    def delete(self, model: TableModel) -> str | None:
        if not model.keys:
            return None
        key = model.keys.pop(self.rng.randrange(len(model.keys)))
        return f"DELETE FROM {self.ref(model)} WHERE {model.where(key)}"

    def dml(self, model: TableModel) -> list[str]:
        roll = self.rng.random()
        if roll < 0.45 or not model.keys:
            return [self.insert(model, self.rng.choice((1, 1, 2, 5)))]
        if roll < 0.75:
            return [statement for statement in [self.update(model)] if statement]
        if roll < 0.85 and model.keys:
            # Delete and re-insert the same key in one transaction.
            key = self.rng.choice(model.keys)
            columns = list(model.columns)
            values = model.key_literal(key) + [self.value(model.columns[column]) for column in columns]
            names = ", ".join(f"`{column}`" for column in [*(c for c, _ in model.key), *columns])
            return [f"DELETE FROM {self.ref(model)} WHERE {model.where(key)}",
                    f"INSERT INTO {self.ref(model)} ({names}) VALUES ({', '.join(values)})"]
        return [statement for statement in [self.delete(model)] if statement]

    def key_change(self, model: TableModel) -> list[str]:
        """Update a row's key, or swap two rows' keys through a free key."""
        if len(model.keys) < 2:
            return []
        table = self.ref(model)
        first, second = self.rng.sample(model.keys, 2)
        spare = model.new_key(self.rng)

        def move(old: tuple[Any, ...], new: tuple[Any, ...]) -> str:
            literals = model.key_literal(new)
            pairs = zip(model.key, literals, strict=True)
            sets = ", ".join(f"`{column}` = {literal}" for (column, _), literal in pairs)
            return f"UPDATE {table} SET {sets} WHERE {model.where(old)}"

        if self.rng.random() < 0.5:
            model.keys[model.keys.index(first)] = spare
            return [move(first, spare)]
        return [move(first, spare), move(second, first), move(spare, second)]

    def transactional(self) -> list[TableModel]:
        return [model for model in self.models if model.engine == "InnoDB"]

    def step(self, number: int) -> Step:
        rng = self.rng
        choices = ["autocommit", "txn", "txn", "txn_rollback"]
        choices += ["pkswap"] if self.on("pkswap") else []
        choices += ["xa", "xa"] if self.on("xa") and self.transactional() else []
        choices += ["savepoint", "savepoint"] if self.on("savepoint") and any(
            m.engine == "MyISAM" for m in self.models) else []
        choices += ["ddl", "ddl"] if self.on("ddl") else []
        choices += ["ddl_stop"] if self.on("ddl_stop") else []
        spilling = self.settings.max_buffered_changes is not None
        choices += ["big"] if self.on("big") and (spilling or rng.random() < 0.15) else []
        choices += ["sync", "sync"]
        if self.on("paths"):
            choices += ["burst", "burst", "follow"] + (["multi"] if len(self.models) > 1 else [])
        # A CLI process starts its own JVM when it has rows to write (~10-30 s here): at most one per round.
        if self.cli_left:
            choices += ["sync_cli"] if self.on("sync_cli") else []
            choices += ["crash", "crash"] if self.on("crash") else []
            choices += ["follow_cli"] if self.on("crash") and self.on("paths") else []
            choices += ["race"] * 4 if self.on("race") else []
        label = rng.choice(choices)
        if label in ("sync_cli", "crash", "follow_cli", "race"):
            self.cli_left -= 1
        sql = lambda text: Action("sql", text)  # noqa: E731 - reads best inline
        if label == "race":
            # A CLI sync reads a batch and pauses before its Delta commit; the source moves on; a second actor
            # takes the table (a re-snapshot) or commits to it (an outside compaction); then the sync resumes.
            model = rng.choice(self.models)
            actor = rng.choice(RACE_ACTORS)
            before = [sql(text) for text in self.dml(model)] + ([Action("sync")] if rng.random() < 0.3 else [])
            if not before or before[-1].kind == "sync":
                before = [sql(text) for text in self.dml(model)] + before
            between = [sql(text) for text in self.dml(model)]
            return Step(f"race_{actor}", (*before, Action("race_start"), *between,
                                          Action("race_end", actor, table=model.name)))
        if label == "burst":
            # Inserts only, into several tables, alone in their batch: the append path of consistent tables,
            # written concurrently (a sync first, so earlier updates are not in the same batch).
            actions = ([Action("sync")] if rng.random() < 0.7 else []) + self.burst()
            then = rng.random()
            if then < 0.5:
                actions.append(Action("sync"))
            elif then < 0.7:
                actions.append(Action("follow", str(rng.choice((2, 3)))))
            return Step(label, tuple(actions))
        if label == "multi":
            # One transaction that changes every table: a batch whose MERGEs run concurrently.
            actions = [sql("BEGIN")]
            for model in self.transactional() or self.models:
                actions += [sql(text) for text in self.dml(model)]
            return Step(label, (*actions, sql("COMMIT")))
        if label == "follow":
            return Step(label, (Action("follow", str(rng.choice((2, 3, 4)))),))
        if label == "follow_cli":
            # `binlake sync --follow` with changes waiting, SIGKILLed at a failpoint of a batch (or to its budget).
            failpoint = rng.choice(self.sync_failpoints())
            return Step(label, (*self.burst(), Action("follow_cli", failpoint, paths=("follow",))))
        if label == "autocommit":
            model = rng.choice(self.models)
            return Step(label, tuple(sql(text) for text in self.dml(model)))
        if label in ("txn", "txn_rollback", "pkswap"):
            pool = self.transactional() or self.models
            actions = [sql("BEGIN")]
            for _ in range(rng.randint(1, 5)):
                model = rng.choice(pool)
                actions += [sql(text) for text in (self.key_change(model) if label == "pkswap" else self.dml(model))]
            actions.append(sql("ROLLBACK" if label == "txn_rollback" else "COMMIT"))
            return Step(label, tuple(actions))
        if label == "big":
            model = rng.choice(self.transactional() or self.models)
            rows = rng.choice((1000, 1000, 2000) if self.settings.max_buffered_changes is None else (500, 1000))
            inserts = [self.insert(model, 500) for _ in range(rows // 500)]
            updates = [f"UPDATE {self.ref(model)} SET `{column}` = {self.value(kind)}"
                       for column, kind in list(model.columns.items())[:1]]
            return Step(label, tuple(sql(text) for text in ["BEGIN", *inserts, *updates, "COMMIT"]))
        if label == "xa":
            self.xids += 1
            xid = f"'fz{self.seed}r{self.round}x{self.xids}'"
            actions = [sql(f"XA START {xid}")]
            for _ in range(rng.randint(1, 4)):
                actions += [sql(text) for text in self.dml(rng.choice(self.transactional()))]
            actions.append(sql(f"XA END {xid}"))
            ending = rng.choice(("commit", "rollback", "one_phase", "commit"))
            if ending == "one_phase":
                actions.append(sql(f"XA COMMIT {xid} ONE PHASE"))
            else:
                actions.append(sql(f"XA PREPARE {xid}"))
                if rng.random() < 0.4:
                    actions.append(Action("sync"))  # binlake reads while the branch is prepared, not decided
                actions.append(sql(f"XA {ending.upper()} {xid}"))
            return Step(f"xa_{ending}", tuple(actions))
        if label == "savepoint":
            inno = self.transactional()
            myisam = [model for model in self.models if model.engine == "MyISAM"]
            pool = inno or myisam
            actions = [sql("BEGIN")]
            actions += [sql(text) for text in self.dml(rng.choice(pool))]
            actions.append(sql("SAVEPOINT s1"))
            for _ in range(rng.randint(1, 3)):
                actions += [sql(text) for text in self.dml(rng.choice(pool))]
            actions += [sql(text) for text in self.dml(rng.choice(myisam))]
            if rng.random() < 0.7:
                actions.append(sql("ROLLBACK TO SAVEPOINT s1"))
                actions += [sql(text) for text in self.dml(rng.choice(pool))]
                actions.append(sql("COMMIT"))
            else:
                actions.append(sql("ROLLBACK"))  # a full rollback of a transaction that touched MyISAM
            return Step(label, tuple(actions))
        if label == "ddl":
            return self.ddl_step()
        if label == "ddl_stop":
            return self.ddl_stop_step()
        if label == "sync_cli":
            return Step(label, (Action("sync_cli"),))
        if label == "crash":
            failpoint = rng.choice(self.sync_failpoints())
            if self.on("paths") and rng.random() < 0.7:
                # Killed in an insert-only batch of several tables: the append path, written concurrently (and
                # spilled, with a tiny `max_buffered_changes`: the burst then has more rows than it).
                paths = (("append",) if self.settings.append_inserts else ()) + (
                    ("concurrent",) if self.settings.concurrent() and len(self.models) > 1 else ()) + (
                    ("spill",) if self.settings.max_buffered_changes is not None else ())
                burst = self.burst(spill=self.settings.max_buffered_changes is not None)
                return Step("crash_burst", (Action("sync"), *burst, Action("crash", failpoint, paths=paths)))
            paths = ("spill",) if failpoint == "spilled_apply" else ()
            return Step(label, (Action("crash", failpoint, paths=paths),))
        return Step(label, (Action("sync"),))

    def sync_failpoints(self) -> tuple[str, ...]:
        """Where a CLI sync may be killed this round: the batch's failpoints, and those of its paths."""
        points: tuple[str, ...] = SYNC_FAILPOINTS
        if self.on("paths") and self.settings.concurrent():
            points += ("after_delta_commit@2",)  # the second table's commit, the first one's already made
        if self.on("paths") and self.settings.max_buffered_changes is not None:
            points += ("spilled_apply",)
        return points

    def burst(self, *, spill: bool = False) -> list[Action]:
        """One transaction of inserts only, into two or more tables (when there are), of fresh keys; with
        `spill`, the first table gets more rows than a tiny `max_buffered_changes` holds."""
        pool = self.transactional() or self.models
        chosen = self.rng.sample(pool, min(len(pool), self.rng.choice((2, 2, 3))))
        actions = [Action("sql", "BEGIN")]
        for number, model in enumerate(chosen):
            rows = self.rng.choice((1, 3, 12)) if self.settings.max_buffered_changes is None else \
                150 if spill and number == 0 else self.rng.choice((3, 40, 150))
            actions += [Action("sql", self.insert(model, min(rows, 60))) for _ in range(max(1, rows // 60))]
        return [*actions, Action("sql", "COMMIT")]

    def draw_settings(self) -> RoundSettings:
        """The round's config: with `paths` on, tiny spill and chunk sizes some of the time, mostly concurrent."""
        rng = self.rng
        if not self.on("paths"):
            return RoundSettings()
        chunked = rng.random() < 0.4
        return RoundSettings(
            apply_threads=rng.choice((None, None, 2, 3, 1)),
            append_inserts=rng.random() < 0.85,
            max_buffered_changes=100 if rng.random() < 0.3 else None,
            rows_per_chunk=rng.choice((6, 12, 25)) if chunked else None,
            chunks_per_wave=rng.choice((1, 1, 2)) if chunked else None,
        )

    def draw_writers(self, steps: list[Step], *, routed: bool = False) -> None:
        """The round's `batch.writer`, and in most rounds a switch or two to another one between its batches.

        Drawn from a generator of their own, so the rest of a round (tables, statements, the other settings) is
        what it was before writers were drawn: a seed chosen for the paths it covers keeps covering them.
        """
        rng = random.Random(f"{self.seed}:{self.round}:writer")
        # A spilled batch is Spark's (delta-rs would hold it whole): `delta-rs` is not forced where batches spill.
        # Routed tables are Spark's too: `delta-rs` with routes is refused at load (docs/routing.md).
        allowed = WRITERS if self.settings.max_buffered_changes is None and not routed else ("spark", "auto")
        writer = rng.choice(allowed)
        self.settings = dataclasses.replace(self.settings, writer=writer)
        switches = []
        for _ in range(rng.choice((0, 1, 1, 2))):
            writer = rng.choice([other for other in allowed if other != writer])
            switches.append(writer)
        places = sorted(rng.randint(1, len(steps)) for _ in switches)
        # From the last place back, so each switch lands where drawn and they run in the order drawn.
        for place, switch in reversed(list(zip(places, switches, strict=True))):
            steps.insert(place, Step("writer", (Action("writer", switch),)))

    def _comment(self) -> str:
        return self.rng.choice(("", "", "/* app */ ", "-- note\n", "/*!40101 */ ", "# hash\n"))

    def ddl_step(self) -> Step:
        rng = self.rng
        model = rng.choice(self.models)
        table = self.ref(model)
        forms = ["add_default", "add_nullable", "add_not_null", "add_index", "truncate", "widen", "add_generated"]
        form = rng.choice(forms)
        text: str | None = None
        if form in ("add_default", "add_nullable", "add_not_null", "add_generated"):
            self.added += 1
            column = f"a{self.added}"
            kind = rng.choice(self.kinds)
            if form == "add_default":
                text = f"ALTER TABLE {table} ADD COLUMN `{column}` {kind.ddl.replace(' NULL DEFAULT NULL', '')} " \
                       f"DEFAULT {kind.draw(rng)}"
                if kind.name == "json" or kind.name.endswith("text") or kind.name.startswith(("tinytext", "blob",
                                                                                              "tinyblob")):
                    text = text.replace(" DEFAULT ", " DEFAULT (") + ")"
            elif form == "add_nullable":
                text = f"ALTER TABLE {table} ADD COLUMN `{column}` {kind.ddl}"
            elif form == "add_not_null":
                base = rng.choice(("INT", "BIGINT UNSIGNED", "VARCHAR(20)", "DATETIME(3)", "DECIMAL(12,3)", "TIME(2)",
                                   "DATE", "CHAR(3) CHARACTER SET latin1", "ENUM('x','y')", "SET('p','q')", "DOUBLE",
                                   "BIT(5)", "YEAR", "VARBINARY(4)", "BINARY(3)"))
                text = f"ALTER TABLE {table} ADD COLUMN `{column}` {base} NOT NULL"
            else:
                key_column = model.key[0][0]
                expression = rng.choice((f"CONCAT('g', `{key_column}`)", f"LENGTH(`{key_column}`) * 2"))
                text = f"ALTER TABLE {table} ADD COLUMN `{column}` VARCHAR(60) AS ({expression}) " \
                       f"{rng.choice(('STORED', 'VIRTUAL', 'PERSISTENT'))}"
            model.columns[column] = kind if form in ("add_default", "add_nullable") else ColumnKind(
                "fixed", "", lambda r: "DEFAULT")
            if form == "add_generated":
                model.columns.pop(column)  # generated: never written by DML
        elif form == "add_index":
            candidates = [column for column, kind in model.columns.items() if kind.indexable and kind.ddl]
            if candidates:
                column = rng.choice(candidates)
                text = f"ALTER TABLE {table} ADD INDEX `ix{self.added}_{rng.randint(0, 9999)}` (`{column}`)"
        elif form == "truncate":
            text = f"TRUNCATE TABLE {table}"
            model.keys.clear()
        elif form == "widen":
            widen = [(column, kind) for column, kind in model.columns.items()
                     if kind.name.startswith(("varchar_", "int", "smallint", "tinyint", "mediumint", "decimal_10_2"))]
            if widen:
                column, kind = rng.choice(widen)
                if kind.name.startswith("varchar_"):
                    new = kind.ddl.replace("VARCHAR(40)", "VARCHAR(200)")
                elif kind.name.startswith("decimal"):
                    new = "DECIMAL(14,2)"
                else:
                    new = "BIGINT" + (" UNSIGNED" if kind.name.endswith("unsigned") else "")
                text = f"ALTER TABLE {table} MODIFY `{column}` {new}"
        if text is None:
            text = f"ALTER TABLE {table} COMMENT 'fuzz {rng.randint(0, 999)}'"
        return Step(f"ddl_{form}", (Action("sql", self._comment() + text, model.name),))

    def ddl_stop_step(self) -> Step:
        rng = self.rng
        model = rng.choice(self.models)
        table = self.ref(model)
        if model.partitioned and rng.random() < 0.7:
            partition = rng.choice(("p0", "p1"))
            text = f"ALTER TABLE {table} {rng.choice(('DROP', 'TRUNCATE'))} PARTITION {partition}"
        elif len(model.columns) > 1:
            column = rng.choice(list(model.columns))
            if rng.random() < 0.5:
                text = f"ALTER TABLE {table} DROP COLUMN `{column}`"
                model.columns.pop(column)
            else:
                self.added += 1
                text = f"ALTER TABLE {table} RENAME COLUMN `{column}` TO `r{self.added}`"
                model.columns[f"r{self.added}"] = model.columns.pop(column)
        else:
            return Step("ddl_noop", (Action("sql", f"ALTER TABLE {table} COMMENT 'nothing'", model.name),))
        return Step("ddl_stop", (Action("sql", self._comment() + text, model.name),))

    def draw_rules(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """Column rules for some tables of some rounds (`columns` on), and row filters (`filters` on), over the
        columns the tables are created with; a route's shards all take the rules of the first (a target's sources
        must land alike).

        Drawn from generators of their own, like the writers: the rest of a round is what it was before rules
        were drawn, so the seeds chosen for the paths they cover keep covering them.
        """
        rng = random.Random(f"{self.seed}:{self.round}:columns")
        columns = self.on("columns") and rng.random() < fuzz_columns.ROUND_SHARE
        filter_rng = random.Random(f"{self.seed}:{self.round}:filters")
        filters = self.on("filters") and filter_rng.random() < fuzz_filters.ROUND_SHARE
        drawn: dict[str, dict[str, Any]] = {}
        for model in self.models:
            if model.shard_of:
                continue
            rules: dict[str, Any] = {}
            if columns:
                rules.update(fuzz_columns.draw_rules(rng, [column for column, _ in model.key], dict(model.columns))
                             or {})
            if filters and filter_rng.random() < fuzz_filters.TABLE_SHARE:
                predicate = fuzz_filters.draw_filter(filter_rng, model.key, model.columns)
                if predicate is not None:
                    rules["filter"] = predicate
            if rules:
                drawn[model.name] = rules
        for model in self.models:
            if model.shard_of in drawn:
                drawn[model.name] = drawn[model.shard_of]
        return tuple((model.name, drawn[model.name]) for model in self.models if model.name in drawn)

    def draw_routes(self, tables: list[TablePlan]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """With `routes` on, in some rounds: the first table and 1-2 copies of it (one maybe in a second database)
        routed into one target; the copies become tables of the round, written to like the others, with keys
        that overlap (each table counts its keys from 1).

        Drawn from a generator of its own: a round without routes is what it was before routes were drawn.
        """
        rng = random.Random(f"{self.seed}:{self.round}:route")
        if not self.on("routes") or rng.random() >= fuzz_filters.ROUTE_SHARE:
            return ()
        base, plan = self.models[0], tables[0]
        names = [f"{base.name}_{number}" for number in range(1, rng.choice((2, 3)))]
        if rng.random() < 0.5:
            names[-1] = f"{self.database}_b.{base.name}"  # the same name in another database
        for name in names:
            model = TableModel(name, list(base.key), dict(base.columns), engine=base.engine,
                               partitioned=base.partitioned, shard_of=base.name)
            self.models.append(model)
            create = plan.create.replace(self.ref(base), self.ref(model), 1)
            tables.append(TablePlan(name, create, plan.engine))
        return ((f"routed_{base.name}", (base.name, *names)),)

    def draw_resnapshot(self, steps: list[Step], routes: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        """In half the rounds with a route: a re-snapshot of one shard somewhere in the workload (its siblings'
        rows in the shared target must stay as they are)."""
        rng = random.Random(f"{self.seed}:{self.round}:resnapshot")
        if routes and rng.random() < 0.5:
            shard = rng.choice(routes[0][1])
            steps.insert(rng.randint(0, len(steps)), Step("resnapshot", (Action("resnapshot", table=shard),)))

    def plan(self) -> RoundPlan:
        tables = self.make_tables()
        routes = self.draw_routes(tables)
        rules = self.draw_rules()
        self.settings = self.draw_settings()
        if routes:
            # A routed source whose batch spills stops (docs/routing.md): routes are drawn without tiny spills.
            self.settings = dataclasses.replace(self.settings, max_buffered_changes=None)
        chunked = self.settings.rows_per_chunk is not None
        preload = []
        for model in self.models:
            rows = self.rng.choice((0, 3, 10, 30, 60) if not chunked else (10, 30, 60))
            for start in range(0, rows, 20):
                insert = self.insert(model, min(20, rows - start))
                preload.append(Step(f"preload {model.name}", (Action("sql", insert),)))
        snapshot_crash = ""
        if "crash" in self.families and self.cli_left > 0 and self.rng.random() < (0.6 if chunked else 0.25):
            snapshot_crash = "after_snapshot_commit"
            if chunked and self.rng.random() < 0.8:
                snapshot_crash = self.rng.choice(WAVE_FAILPOINTS)
            self.cli_left -= 1
        steps = [self.step(number) for number in range(self.rng.randint(6, 18))]
        if "@" in snapshot_crash:
            # The interrupted snapshot resumes after some of the workload (its DML, syncs, DDL) ran between waves.
            steps.insert(self.rng.randint(0, len(steps)), Step("snapshot_resume", (Action("snapshot"),)))
        self.draw_resnapshot(steps, routes)
        if self.on("paths"):
            self.draw_writers(steps, routed=bool(routes))
        return RoundPlan(self.seed, self.round, tuple(tables), tuple(preload), snapshot_crash, tuple(steps),
                         self.settings, rules, routes)


# -- running a round ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """Where the fuzzer's source lives: a root connection for the workload, a CDC user for binlake."""

    port: int
    user: str
    password: str
    admin: Callable[[], pymysql.connections.Connection]


@dataclass
class Outcome:
    result: str  # ok | expected-stop | difference | unexpected-stop | harness-error
    detail: str = ""
    rows_compared: int = 0
    failed_statements: int = 0
    seconds: float = 0.0
    stopped: dict[str, str] = field(default_factory=dict)
    #: Seconds per phase (setup, snapshot, workload, final sync, compare), to see where a round's time goes.
    phases: dict[str, float] = field(default_factory=dict)
    #: How often the round went through each apply path (`PATHS`), as the Delta logs, binlake's log and the
    #: killed processes show it — not as the plan hoped.
    paths: dict[str, int] = field(default_factory=dict)

    def took(self, path: str, times: int = 1) -> None:
        if times:
            self.paths[path] = self.paths.get(path, 0) + times

    @property
    def failed(self) -> bool:
        return self.result in ("difference", "unexpected-stop", "harness-error")

    def signature(self) -> str:
        """What a shrink step must keep failing with: the kind of failure, without round-specific names."""
        first = self.detail.split("; ")[0]
        first = re.sub(r"fz_\d+_\d+\.", "", first)
        if self.result == "difference":
            column = re.search(r" column \S+ \(([^)]*\)?)\)", first)
            for kind in ("columns differ", "missing in Delta", "in Delta only", "twice in Delta", "unreadable"):
                if kind in first:
                    return f"difference:{kind}"
            return f"difference:column {column.group(1) if column else '?'}"
        first = re.sub(r"'[^']*'|\d+", "…", first)
        return f"{self.result}:{first[:70]}"


def _config_document(server: Server, work: Path, database: str, tables: list[str]) -> dict[str, Any]:
    return {
        "pipeline": f"fz{uuid.uuid4().hex[:8]}",
        "source": {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password,
                   "server_id": 7000 + random.randrange(1000), "tables": [_full(database, t) for t in tables]},
        "sink": {"path": str(work / "lake")},
        "offsets": {"uri": str(work / "lake" / "_offsets")},
        "spark": {"master": "local[2]"},
        # Small batches, so a sync ends inside the workload and the next one resumes there.
        "batch": {"max_events": 2000, "max_seconds": 60},
    }


def _cli(config_file: Path, *arguments: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the binlake CLI; `failpoint` (`name`, or `name@n` for its n-th arrival) SIGKILLs it there."""
    environment = {**os.environ, "TZ": "UTC"}
    environment.pop("BINLAKE_FAILPOINT", None)
    environment.pop("BINLAKE_FAILPOINT_AT", None)
    if failpoint:
        name, _, arrival = failpoint.partition("@")
        environment["BINLAKE_FAILPOINT"] = name
        if arrival:
            environment["BINLAKE_FAILPOINT_AT"] = arrival
    return subprocess.run([sys.executable, "-m", "cdc_lib.cli", "--config", str(config_file), *arguments],
                          capture_output=True, text=True, env=environment, timeout=600,
                          cwd=str(Path(__file__).resolve().parents[2]))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else ""


class SyncFailed(Exception):
    """A binlake sync raised or exited non-zero (not at a planted failpoint)."""


#: What binlake logs when a batch spills a table's changes (cdc_lib/binlog/stream.py): counted as the spill path.
SPILL_MESSAGE = "spilled to"


class _PathLog(logging.Handler):
    """Counts the spill path in binlake's log of in-process syncs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.spills = 0

    def emit(self, record: logging.LogRecord) -> None:
        if SPILL_MESSAGE in record.getMessage():
            self.spills += 1


@contextmanager
def _counting_spills() -> Iterator[_PathLog]:
    logger = logging.getLogger("binlake")
    handler, level = _PathLog(), logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _resume_snapshots(pipeline: Any, pending: list[str], expected_stop: set[str], refused: set[str],
                      outcome: Outcome) -> None:
    """Snapshot (resume) `pending` tables; a routed shard ALTERed since its snapshot began is refused by binlake
    (RoutingError: its schema is no longer its target's, docs/routing.md): recorded in `refused`, left out of the
    comparison. Any other failure raises."""
    routed = [name for name in pending if name in expected_stop]
    others = [name for name in pending if name not in expected_stop]
    if others:
        pipeline.snapshot(others)
    for name in routed:
        try:
            pipeline.snapshot([name])
        except Exception as error:
            if type(error).__name__ != "RoutingError":
                raise
            outcome.took("resnapshot_refused")
            refused.add(name)


def _unsnapshotted(pipeline: Any, database: str, plan: RoundPlan) -> list[str]:
    """The round's tables whose snapshot is not installed in the pipeline state (unfinished, or not begun)."""
    installed = pipeline.read_state().tables
    return [_full(database, t.name) for t in plan.tables if _full(database, t.name) not in installed]


def _count_delta_paths(outcome: Outcome, plan: RoundPlan, paths: list[str]) -> None:
    """The paths the round's Delta commits show: appends, batches committed to several tables by several
    threads, snapshots written in more than one wave, and the engine of each batch commit (`engineInfo`)."""
    from deltalake import DeltaTable

    from cdc_lib.sink.delta_log import engine_of

    tables_of_batch: dict[int, int] = {}
    for path in paths:
        try:
            history = DeltaTable(path).history()
        except Exception:  # noqa: BLE001 - a missing table is the comparison's to report
            continue
        waves = 0
        for commit in history:
            raw = commit.get("userMetadata")
            try:
                metadata = json.loads(raw) if isinstance(raw, str) else (raw or {})
            except ValueError:
                continue
            if metadata.get("path") == "append":
                outcome.took("append")
            if metadata.get("kind") == "snapshot" and "wave" in metadata:
                waves = max(waves, int(metadata["wave"]))
            if metadata.get("kind") == "merge":
                # The engine as the commit names it (`engineInfo`), not as binlake's metadata says.
                engine = engine_of(commit.get("engineInfo"))
                outcome.took({"delta-rs": "delta_rs_batches", "spark": "spark_batches"}.get(engine, f"engine {engine}"))
            if metadata.get("kind") == "merge" and "batch_seq" in metadata:
                seq = int(metadata["batch_seq"])
                tables_of_batch[seq] = tables_of_batch.get(seq, 0) + 1
        if waves > 1:
            outcome.took("chunked")
    if plan.settings.concurrent():
        outcome.took("concurrent", sum(1 for count in tables_of_batch.values() if count > 1))


def run_round(plan: RoundPlan, server: Server, work: Path, *, keep: bool = False) -> Outcome:
    """Run a plan on a fresh database and lake; compare; drop the database again."""
    with _counting_spills() as spill_log:
        outcome = _run_round(plan, server, work, keep=keep)
    outcome.took("spill", spill_log.spills)
    return outcome


def _run_round(plan: RoundPlan, server: Server, work: Path, *, keep: bool) -> Outcome:
    from cdc_lib.config.parse import parse_config
    from cdc_lib.pipeline.pipeline import Pipeline

    started = time.monotonic()
    database = _database_of(plan)
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "lake", ignore_errors=True)
    connection = server.admin()
    outcome = Outcome("ok")
    databases = _databases_of(plan)
    try:
        with connection.cursor() as cursor:
            for name in databases:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
                cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            cursor.execute("SET SESSION time_zone = '+00:00', SESSION sql_mode = 'STRICT_TRANS_TABLES'")
            for table in plan.tables:
                cursor.execute(table.create)
        failed = 0
        for step in plan.preload:
            failed += _run_sql(connection, step)
        document = _config_document(server, work, database, [table.name for table in plan.tables])
        plan.settings.apply(document)
        if plan.rules:
            document["sink"]["tables"] = {_full(database, name): rules for name, rules in plan.rules}
            # The hash key, in the process and the CLI syncs it starts (they inherit the environment).
            os.environ[fuzz_columns.KEY_ENV] = fuzz_columns.KEY
            outcome.took("columns", any(set(rules) - {"filter"} for _, rules in plan.rules))
            outcome.took("filters", any("filter" in rules for _, rules in plan.rules))
        if plan.routes:
            document["sink"]["routes"] = [
                {"source": fuzz_filters.route_source([_full(database, shard) for shard in shards]),
                 "target": f"{database}.{target}"} for target, shards in plan.routes]
            outcome.took("routes")
        config = parse_config(document)
        config_file = work / "binlake.yaml"
        import yaml

        config_file.write_text(yaml.safe_dump(document))
        pipeline = Pipeline(config)
        errors: list[str] = []
        mark = time.monotonic()
        outcome.phases["setup"] = mark - started
        if plan.snapshot_crash:
            crashed = _cli(config_file, "snapshot", failpoint=plan.snapshot_crash)
            if crashed.returncode not in (0, 1, -9):
                errors.append(f"snapshot CLI exited {crashed.returncode}: {_last_line(crashed.stderr)}")
            if crashed.returncode == -9 and "@" in plan.snapshot_crash:
                outcome.took("crash_chunked")
        from cdc_lib.sink import delta_log

        # A table with waves in Delta but no installed snapshot waits for the workload's `snapshot` step (a
        # completed one is installed by the next sync); a table with nothing in Delta is snapshotted now.
        missing = [_full(database, t.name) for t in plan.tables
                   if not delta_log.table_exists(pipeline.table_path(_full(database, t.name)))]
        if missing:
            try:
                pipeline.snapshot(missing)
            except Exception as error:  # noqa: BLE001 - binlake's own failure: the outcome names it
                errors.append(f"snapshot raised {_describe(error)}")
        outcome.phases["snapshot"] = time.monotonic() - mark
        mark = time.monotonic()
        expected_stop: set[str] = set()
        refused: set[str] = set()
        race: _RacingSync | None = None
        for step in plan.steps:
            for action in step.actions:
                if action.kind == "sql":
                    ok = _execute(connection, action.text)
                    failed += not ok
                    if ok and action.table and (any(form in action.text.upper() for form in EXPECTED_STOP_FORMS)
                                                or _may_stop(plan, action)):
                        expected_stop.add(_full(database, action.table))
                elif action.kind == "sync":
                    try:
                        pipeline.sync(until_caught_up=False)
                    except Exception as error:  # noqa: BLE001 - the outcome names it
                        if _writer_refused(document, str(error), type(error).__name__):
                            outcome.took("delta_rs_refused")
                            config, pipeline = _switch_writer(document, config_file, "auto")
                        else:
                            errors.append(f"in-process sync raised {_describe(error)}")
                elif action.kind == "follow":
                    from cdc_lib.pipeline.follow import follow

                    try:
                        summary = follow(pipeline, budget_seconds=float(action.text), poll_seconds=0.2)
                        outcome.took("follow", summary.batches_written > 0)
                    except Exception as error:  # noqa: BLE001
                        if _writer_refused(document, str(error), type(error).__name__):
                            outcome.took("delta_rs_refused")
                            config, pipeline = _switch_writer(document, config_file, "auto")
                        else:
                            errors.append(f"in-process follow raised {_describe(error)}")
                elif action.kind == "race_start":
                    race = _RacingSync.start(config_file, work / "race-paused")
                elif action.kind == "race_end":
                    race_error = _race(race, action, config_file, pipeline.table_path(_full(database, action.table)),
                                       _full(database, action.table), outcome)
                    race = None
                    if race_error and _writer_refused(document, race_error):
                        outcome.took("delta_rs_refused")
                        config, pipeline = _switch_writer(document, config_file, "auto")
                    elif race_error:
                        errors.append(race_error)
                elif action.kind == "resnapshot":
                    name = _full(database, action.table)
                    try:
                        pipeline.snapshot([name])
                        outcome.took("resnapshot_shard")
                    except Exception as error:  # noqa: BLE001
                        if name in expected_stop and type(error).__name__ == "RoutingError":
                            # An ALTERed shard no longer has its target's schema: the documented refusal
                            # (docs/routing.md, Schemas); the shard stays stopped, its siblings go on.
                            outcome.took("resnapshot_refused")
                            refused.add(name)
                        else:
                            errors.append(f"re-snapshot of {action.table} raised {_describe(error)}")
                elif action.kind == "writer":
                    # Later batches (in-process and CLI) take the other engine; tables and offsets are unchanged.
                    config, pipeline = _switch_writer(document, config_file, action.text)
                elif action.kind == "snapshot":
                    from cdc_lib.state.snapshot_documents import read_document

                    pending = _unsnapshotted(pipeline, database, plan)
                    documents = [read_document(pipeline.store, config.pipeline, name)[0] for name in pending]
                    between = [document for document in documents
                               if document is not None and document.status == "running" and document.waves]
                    try:
                        _resume_snapshots(pipeline, [name for name in pending if name not in refused],
                                          expected_stop, refused, outcome)
                        outcome.took("between_waves", bool(between))
                    except Exception as error:  # noqa: BLE001
                        errors.append(f"resumed snapshot raised {_describe(error)}")
                else:
                    killed = action.text if action.kind in ("crash", "follow_cli") and action.text else None
                    follow_arguments = ("--follow", "--budget", "20", "--poll", "0.3") \
                        if action.kind == "follow_cli" else ()
                    result = _cli(config_file, "sync", *follow_arguments, failpoint=killed)
                    outcome.took("spill", result.stderr.count(SPILL_MESSAGE))
                    outcome.took("follow_cli", action.kind == "follow_cli")
                    # 1: a table is stopped (the state says which; judged at the end); -9: killed at the failpoint.
                    if result.returncode not in (0, -9) and _writer_refused(document, result.stderr):
                        outcome.took("delta_rs_refused")
                        config, pipeline = _switch_writer(document, config_file, "auto")
                    elif result.returncode not in (0, 1, -9) or (result.returncode == -9 and not killed):
                        errors.append(f"CLI {' '.join(('sync', *follow_arguments[:1]))} exited "
                                      f"{result.returncode}: {_last_line(result.stderr)}")
                    if result.returncode == -9:
                        for path in action.paths:
                            outcome.took(f"crash_{path}")
        if race is not None:  # a race_start whose race_end the shrinker removed: the sync goes on now
            race.finish()
        _settle(connection, plan)
        outcome.phases["workload"] = time.monotonic() - mark
        mark = time.monotonic()
        try:
            # A snapshot the workload left unfinished (its `snapshot` step shrunk away) resumes here.
            pending = [name for name in _unsnapshotted(pipeline, database, plan) if name not in refused]
            _resume_snapshots(pipeline, pending, expected_stop, refused, outcome)
        except Exception as error:  # noqa: BLE001
            errors.append(f"resumed snapshot raised {_describe(error)}")
        for attempt in range(2):
            try:
                pipeline.sync(until_caught_up=True)
                pipeline.sync(until_caught_up=True)  # a table paused at an ALTER resumes; nothing else moves
            except Exception as error:  # noqa: BLE001
                if attempt == 0 and _writer_refused(document, str(error), type(error).__name__):
                    # The forced writer's loud refusal, as in the workload: its remedy, then the final sync again.
                    outcome.took("delta_rs_refused")
                    config, pipeline = _switch_writer(document, config_file, "auto")
                    continue
                errors.append(f"final sync raised {_describe(error)}")
            break
        outcome.failed_statements = failed
        outcome.phases["final_sync"] = time.monotonic() - mark
        mark = time.monotonic()
        state = pipeline.read_state()
        stopped = {name: table.error for name, table in state.tables.items() if table.error}
        outcome.stopped = stopped
        unexpected = {name: error for name, error in stopped.items() if name not in expected_stop}
        differences: list[str] = []
        rows = 0
        routed = {shard: target for target, shards in plan.routes for shard in shards}
        for table in plan.tables:
            name = _full(database, table.name)
            if name in stopped or table.name in routed:
                continue
            compared, found = compare_table(connection, database, table.name, pipeline.table_path(name),
                                            rules=plan.rules_of(table.name))
            rows += compared
            differences += found
        for target, shards in plan.routes:
            # One comparison of the target with the union of its shards; a stopped shard's rows are left out on
            # both sides (its siblings go on, its rows stay where its stop left them).
            sources = [_split(_full(database, shard)) for shard in shards]
            left_out = [source for source in sources if ".".join(source) in stopped or ".".join(source) in refused]
            compared, found = compare_table(connection, database, target, pipeline.table_path(".".join(sources[0])),
                                            rules=plan.rules_of(shards[0]), shards=sources, left_out=left_out)
            rows += compared
            differences += found
        outcome.rows_compared = rows
        outcome.phases["compare"] = time.monotonic() - mark
        _count_delta_paths(outcome, plan, list(dict.fromkeys(pipeline.table_path(_full(database, t.name))
                                                             for t in plan.tables)))
        if errors or (unexpected and not differences):
            # A sync that raised stopped every table (loudly): its missing rows are not a silent difference.
            # A difference in a table that was not stopped outranks another table's unexpected stop.
            outcome.result = "unexpected-stop"
            outcome.detail = "; ".join([*errors, *(f"{name} stopped: {error[:300]}" for name, error in
                                                   unexpected.items())][:4] + differences[:2])
        elif differences:
            outcome.result, outcome.detail = "difference", "; ".join(differences[:6])
        elif stopped or refused:
            outcome.result, outcome.detail = "expected-stop", "; ".join(
                [*(f"{name}: {error[:120]}" for name, error in stopped.items()),
                 *(f"{name}: snapshot refused after an ALTER (RoutingError)" for name in sorted(refused))])
    except Exception as error:  # noqa: BLE001 - a broken round is reported, the run goes on
        outcome.result = "harness-error"
        outcome.detail = f"{type(error).__name__}: {error}"[:600] + "\n" + traceback.format_exc()[-1500:]
    finally:
        try:
            _settle(connection, plan)
            if not keep:
                with connection.cursor() as cursor:
                    for name in databases:
                        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            connection.close()
        if not keep:
            shutil.rmtree(work / "lake", ignore_errors=True)
    outcome.seconds = time.monotonic() - started
    return outcome


@dataclass
class _RacingSync:
    """A CLI sync paused before its (first) Delta commit, while the workload and a second actor go on."""

    process: subprocess.Popen[str]
    flag: Path

    @classmethod
    def start(cls, config_file: Path, flag: Path) -> _RacingSync:
        flag.unlink(missing_ok=True)
        environment = {**os.environ, "TZ": "UTC", "BINLAKE_FAILPOINT_PAUSE": "before_delta_commit",
                       "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag), "BINLAKE_FAILPOINT_AT": "1"}
        environment.pop("BINLAKE_FAILPOINT", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_file), "sync"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=environment, cwd=str(Path(__file__).resolve().parents[2]),
        )
        deadline = time.monotonic() + 300
        # Paused, or done without a commit to make (its batch had no change for a table: nothing to race).
        while not flag.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return cls(process, flag)

    def finish(self) -> tuple[int, str]:
        self.flag.unlink(missing_ok=True)
        _, stderr = self.process.communicate(timeout=600)
        return self.process.returncode, stderr


def _race(race: _RacingSync | None, action: Action, config_file: Path, path: str, table: str,
          outcome: Outcome) -> str:
    """Run the second actor while the sync is paused, then let the sync go on; an error text, or ""."""
    paused = race is not None and race.flag.exists()
    if action.text == "resnapshot":
        result = _cli(config_file, "snapshot", "--table", table)
        if result.returncode != 0:
            if race is not None:
                race.finish()
            return f"CLI snapshot --table beside a paused sync exited {result.returncode}: {_last_line(result.stderr)}"
    else:
        from deltalake import DeltaTable

        try:
            # An outside writer binlake does not know of: delta-rs's compaction (dataChange false).
            DeltaTable(path).optimize.compact()
        except Exception:  # noqa: BLE001 - a protocol delta-rs does not write: the outside writer's problem
            outcome.took("race_outside_refused")
    if race is None:
        return ""
    code, stderr = race.finish()
    outcome.took(f"race_{action.text}", paused)
    # 0, or 1 when a table stopped (judged at the end with the others).
    return "" if code in (0, 1) else f"CLI sync paused beside {action.text} exited {code}: {_last_line(stderr)}"


def _writer_refused(document: dict[str, Any], text: str, kind: str = "") -> bool:
    """Whether binlake refused a forced `batch.writer: delta-rs` (a table delta-rs cannot write exactly): the
    loud refusal the config calls for. The round then applies its remedy (`auto`) and goes on."""
    # In process the error's class names it; the CLI prints only its message (cdc_lib/sink/delta_rs/writer.py).
    said = f"{kind} {text}"
    return document["batch"].get("writer") == "delta-rs" and (
        "DeltaRsWriterError" in said or "delta-rs cannot write" in said)


def _switch_writer(document: dict[str, Any], config_file: Path, writer: str) -> tuple[Any, Any]:
    """`batch.writer` = `writer` from now on: the config file (CLI runs) rewritten, the in-process pipeline rebuilt."""
    import yaml

    from cdc_lib.config.parse import parse_config
    from cdc_lib.pipeline.pipeline import Pipeline

    document["batch"]["writer"] = writer
    config_file.write_text(yaml.safe_dump(document))
    config = parse_config(document)
    return config, Pipeline(config)


def _describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}"


def _database_of(plan: RoundPlan) -> str:
    return f"fz_{plan.seed % 10**8}_{plan.round}"


def _full(database: str, name: str) -> str:
    """'database.table' of a plan's table name (a bare name is in the round's database)."""
    return name if "." in name else f"{database}.{name}"


def _split(name: str) -> tuple[str, str]:
    database, _, table = name.partition(".")
    return database, table


def _databases_of(plan: RoundPlan) -> list[str]:
    """The round's database, then any other its tables live in (a route's shard in a second database)."""
    database = _database_of(plan)
    return list(dict.fromkeys([database, *(_full(database, t.name).split(".", 1)[0] for t in plan.tables)]))


def _may_stop(plan: RoundPlan, action: Action) -> bool:
    """Whether a DDL statement may stop its table beyond `EXPECTED_STOP_FORMS`: any ALTER of a routed shard (a
    routed table's schema policy is always `stop`, docs/routing.md), and an ALTER naming a column the table's
    filter reads (a retyped filter column stops the table, docs/row-filters.md)."""
    text = action.text.upper()
    if "ALTER TABLE" not in text:
        return False
    if any(action.table in shards for _, shards in plan.routes):
        return True
    predicate = (plan.rules_of(action.table) or {}).get("filter")
    return predicate is not None and any(f"`{column}`" in action.text
                                         for column in fuzz_filters.filter_columns(predicate))


def _execute(connection: pymysql.connections.Connection, text: str) -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute(text)
        return True
    except pymysql.MySQLError:
        return False  # a statement the shrinker orphaned (a key that no longer exists …): the server decides


def _run_sql(connection: pymysql.connections.Connection, step: Step) -> int:
    return sum(not _execute(connection, action.text) for action in step.actions if action.kind == "sql")


def _settle(connection: pymysql.connections.Connection, plan: RoundPlan) -> None:
    """End whatever a (shrunk) workload left open: a transaction, an XA branch active or prepared."""
    xids = [action.text.split(None, 2)[2] for step in plan.steps for action in step.actions
            if action.kind == "sql" and action.text.startswith("XA START ")]
    for xid in xids:
        _execute(connection, f"XA END {xid}")
        _execute(connection, f"XA ROLLBACK {xid}")
    _execute(connection, "ROLLBACK")
    try:
        with connection.cursor() as cursor:
            cursor.execute("XA RECOVER")
            left = [row[3].decode() if isinstance(row[3], bytes) else str(row[3]) for row in cursor.fetchall()]
    except pymysql.MySQLError:
        left = []
    for xid in left:
        if f"'{xid}'" in xids:
            _execute(connection, f"XA ROLLBACK '{xid}'")


# -- the oracle ---------------------------------------------------------------------------------


def source_columns(connection: pymysql.connections.Connection, database: str, table: str) -> list[SourceColumn]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(DATETIME_PRECISION, 0) "
            "FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (database, table))
        return [SourceColumn(str(name), str(kind).lower(), str(full).lower(), int(fsp))
                for name, kind, full, fsp in cursor.fetchall()]


def primary_key(connection: pymysql.connections.Connection, database: str, table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND "
                       "TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION", (database, table))
        return [str(row[0]) for row in cursor.fetchall()]


def read_source(connection: pymysql.connections.Connection, database: str, table: str,
                columns: list[SourceColumn], *, where: str = "") -> list[list[Any]]:
    """The table's rows as the server renders them; `where`: only those the server finds it true for."""
    select = ", ".join(column.select for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {select} FROM `{database}`.`{table}`" + (f" WHERE {where}" if where else ""))
        fetched = cursor.fetchall()
    return [[canonical_source(column, _text(value)) for column, value in zip(columns, row, strict=True)]
            for row in fetched]


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def read_delta(path: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The Delta table's current rows through deltalake's scan (which honours deletion vectors)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(path)
    names = [item.name for item in table.schema().fields]
    reader = table.scan()
    arrow = pa.RecordBatchReader.from_stream(reader).read_all()
    # Dates and timestamps as plain numbers first: a value outside Python's datetime range (year 0, a
    # shifted calendar) must show up as a difference, not stop the reader.
    columns = {}
    for name in arrow.column_names:
        column = arrow.column(name)
        if pa.types.is_date32(column.type):
            columns[name] = [_day(value) for value in column.cast(pa.int32()).to_pylist()]
        elif pa.types.is_timestamp(column.type):
            scale = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}[column.type.unit]
            aware = column.type.tz is not None
            columns[name] = [_instant(value, scale, aware) for value in column.cast(pa.int64()).to_pylist()]
        else:
            columns[name] = column.to_pylist()
    rows = [{name: columns[name][index] for name in columns} for index in range(arrow.num_rows)]
    return names, rows


_EPOCH = dt.datetime(1970, 1, 1)


def _day(value: int | None) -> Any:
    if value is None:
        return None
    try:
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    except OverflowError:
        return f"<date out of Python's range: day {value} from 1970-01-01>"


def _instant(value: int | None, scale: float, aware: bool) -> Any:
    if value is None:
        return None
    try:
        moment = _EPOCH + dt.timedelta(microseconds=int(value * scale))
    except OverflowError:
        return f"<timestamp out of Python's range: {value} units from 1970-01-01>"
    return moment.replace(tzinfo=dt.UTC) if aware else moment


def compare_table(connection: pymysql.connections.Connection, database: str, table: str,
                  path: str, *, rules: dict[str, Any] | None = None,
                  shards: Sequence[tuple[str, str]] = (), left_out: Collection[tuple[str, str]] = ()
                  ) -> tuple[int, list[str]]:
    """Rows compared, and each difference between the source table and its Delta table.

    `rules` (the table's `columns`/`mask`/`filter` document): the source is projected and masked by the fuzzer's
    own reading of docs/columns-and-masking.md (bench/fuzz/fuzz_columns.py) before the comparison; a masked
    column's Delta value is compared as Delta holds it (a hash is its hex text whatever the source type). A
    `filter` keeps the rows the source server itself selects with it (bench/fuzz/fuzz_filters.py).

    `shards` ((database, table) pairs): the Delta table is a route's target (`table` names it in messages), and the
    source is the union of the shards' rows, each followed by its database and table name, which close the key
    (docs/routing.md); the rows of the shards in `left_out` (stopped) are compared on neither side.
    """
    sources = [source for source in shards if source not in left_out] if shards else [(database, table)]
    if not sources:
        return 0, []
    columns = fuzz_columns.landed_columns(source_columns(connection, *sources[0]), rules)
    key = primary_key(connection, *sources[0])
    predicate = (rules or {}).get("filter")
    source: list[list[Any]] = []
    for source_database, source_table in sources:
        where = ""
        if predicate:
            temporal = [column.name for column in source_columns(connection, source_database, source_table)
                        if column.data_type in ("date", "datetime")]
            where = fuzz_filters.oracle_where(predicate, temporal)
        rows = read_source(connection, source_database, source_table, columns, where=where)
        source += [[*row, source_database, source_table] if shards else row for row in rows]
    masked_names = {column.name for column in columns if column.name in (rules or {}).get("mask", {})}
    for row in source:
        for index, column in enumerate(columns):
            row[index] = fuzz_columns.masked(column, row[index], rules)
    if shards:
        columns = [*columns, *(SourceColumn(name, "varchar", "varchar(64)", 0) for name in ROUTE_COLUMNS)]
        key = [*key, *ROUTE_COLUMNS]
    try:
        delta_names, delta_rows = read_delta(path)
    except Exception as error:  # noqa: BLE001
        return 0, [f"{table}: Delta table unreadable: {type(error).__name__}: {str(error)[:200]}"]
    problems: list[str] = []
    names = [column.name for column in columns]
    if delta_names != names and sorted(delta_names) != sorted(names):
        problems.append(f"{table}: columns differ: source {names}, Delta {delta_names}")
    by_name = {column.name: column for column in columns}
    shared = [column for column in columns if column.name in delta_names]
    key_index = [names.index(column) for column in key]

    def key_of(values: list[Any]) -> tuple[Any, ...]:
        return tuple(values[index] for index in key_index)

    source_by_key = {key_of(row): row for row in source}
    delta_by_key: dict[tuple[Any, ...], list[Any]] = {}
    for record in delta_rows:
        if shards and tuple(record.get(name) for name in ROUTE_COLUMNS) in left_out:
            continue
        values = [(record.get(name) if name in masked_names else canonical_delta(by_name[name], record.get(name)))
                  if name in delta_names else None for name in names]
        row_key = key_of(values)
        if row_key in delta_by_key:
            problems.append(f"{table}: key {row_key} twice in Delta")
        delta_by_key[row_key] = values
    for row_key in sorted(set(source_by_key) - set(delta_by_key), key=repr)[:3]:
        problems.append(f"{table}: row {row_key} missing in Delta")
    for row_key in sorted(set(delta_by_key) - set(source_by_key), key=repr)[:3]:
        problems.append(f"{table}: row {row_key} in Delta only: {delta_by_key[row_key]}")
    for row_key in sorted(set(source_by_key) & set(delta_by_key), key=repr):
        for column in shared:
            index = names.index(column.name)
            want, got = source_by_key[row_key][index], delta_by_key[row_key][index]
            if not same(want, got):
                problems.append(f"{table}: key {row_key} column {column.name} ({column.column_type}): "
                                f"source {want!r}, Delta {got!r}")
                break
        if len(problems) > 8:
            break
    return len(source), problems


# -- shrinking ----------------------------------------------------------------------------------


def shrink(plan: RoundPlan, signature: str, rerun: Callable[[RoundPlan], Outcome], *,
           budget_seconds: float) -> tuple[RoundPlan, int]:
    """The smallest plan found (ddmin over preload and workload steps, then over single statements)
    that still fails with `signature`; and how many runs it took."""
    deadline = time.monotonic() + budget_seconds
    runs = 0

    def fails(candidate: RoundPlan) -> bool:
        nonlocal runs
        if time.monotonic() > deadline:
            return False
        runs += 1
        return rerun(candidate).signature() == signature

    def ddmin(items: list[Any], build: Callable[[list[Any]], RoundPlan]) -> list[Any]:
        granularity = 2
        while len(items) >= 1 and time.monotonic() < deadline:
            size = max(1, len(items) // granularity)
            chunks = [items[start:start + size] for start in range(0, len(items), size)]
            reduced = False
            for index in range(len(chunks)):
                complement = [item for number, chunk in enumerate(chunks) if number != index for item in chunk]
                if fails(build(complement)):
                    items, granularity, reduced = complement, max(granularity - 1, 2), True
                    break
            if not reduced:
                if size == 1:
                    break
                granularity = min(len(items), granularity * 2)
        return items

    steps = ddmin(list(plan.steps), lambda kept: _replace(plan, steps=kept))
    plan = _replace(plan, steps=steps)
    preload = ddmin(list(plan.preload), lambda kept: _replace(plan, preload=kept))
    plan = _replace(plan, preload=preload)
    # Then single statements inside the remaining steps (transaction control included: dropping a COMMIT
    # or a SAVEPOINT changes the shape, and the server still decides what happened).
    flat = [(number, action) for number, step in enumerate(plan.steps) for action in step.actions]

    def rebuild(kept: list[tuple[int, Action]]) -> RoundPlan:
        steps = [Step(step.label, tuple(action for number, action in kept if number == index))
                 for index, step in enumerate(plan.steps)]
        return _replace(plan, steps=[step for step in steps if step.actions])

    if len(flat) > len(plan.steps):
        plan = rebuild(ddmin(flat, rebuild))
    return plan, runs


def _replace(plan: RoundPlan, **changes: Any) -> RoundPlan:
    fields = {"seed": plan.seed, "round": plan.round, "tables": plan.tables, "preload": plan.preload,
              "snapshot_crash": plan.snapshot_crash, "steps": plan.steps, "settings": plan.settings,
              "rules": plan.rules, "routes": plan.routes, **changes}
    fields["steps"], fields["preload"] = tuple(fields["steps"]), tuple(fields["preload"])
    return RoundPlan(**fields)


# -- the driver ---------------------------------------------------------------------------------


@dataclass
class Totals:
    rounds: int = 0
    statements: int = 0
    transactions: int = 0
    rows_compared: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, int] = field(default_factory=dict)
    #: How many steps of each shape ran (xa_rollback, ddl_add_not_null, crash …): what the run covered.
    shapes: dict[str, int] = field(default_factory=dict)
    #: Rounds that went through each apply path (`PATHS`; `Outcome.paths`), and how often in all.
    path_rounds: dict[str, int] = field(default_factory=dict)
    path_times: dict[str, int] = field(default_factory=dict)
    #: Rounds by the `batch.writer` they drew: one writer (`spark`), or the switches in order (`auto>spark`).
    writers: dict[str, int] = field(default_factory=dict)

    def paths_line(self) -> str:
        return ", ".join(f"{path} {self.path_rounds.get(path, 0)} ({self.path_times.get(path, 0)}×)"
                         for path in PATHS)


class Fuzzer:
    """Plans and runs rounds against one server; shrinks failures."""

    def __init__(self, server: Server, work: Path, *, families: frozenset[str] = frozenset(FAMILIES),
                 shrink_seconds: float = 300.0, out: Callable[[str], None] = print) -> None:
        self.server = server
        self.work = work
        self.families = families
        self.shrink_seconds = shrink_seconds
        self.out = out
        self._alphabets: dict[str, tuple[str, ...]] | None = None
        self.totals = Totals()

    def alphabets(self) -> dict[str, tuple[str, ...]]:
        if self._alphabets is None:
            connection = self.server.admin()
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS "
                                   "WHERE CHARACTER_SET_NAME <> 'binary' ORDER BY 1")
                    charsets = [str(row[0]) for row in cursor.fetchall()]
                self._alphabets = charset_alphabets(connection, charsets)
            finally:
                connection.close()
        return self._alphabets

    def plan(self, seed: int, round_number: int) -> RoundPlan:
        database = f"fz_{seed % 10**8}_{round_number}"
        return Generator(seed, round_number, self.families, database, self.alphabets()).plan()

    def round(self, seed: int, round_number: int) -> Outcome:
        plan = self.plan(seed, round_number)
        outcome = run_round(plan, self.server, self.work / f"r{round_number}")
        totals = self.totals
        totals.rounds += 1
        totals.statements += plan.statements()
        totals.transactions += plan.transactions()
        totals.rows_compared += outcome.rows_compared
        totals.seconds += outcome.seconds
        totals.results[outcome.result] = totals.results.get(outcome.result, 0) + 1
        for step in plan.steps:
            crashes = [action.text for action in step.actions if action.kind == "crash"]
            label = f"{step.label}_{crashes[0]}" if crashes else step.label
            totals.shapes[label] = totals.shapes.get(label, 0) + 1
        if plan.snapshot_crash:
            label = f"crash_snapshot_{plan.snapshot_crash}"
            totals.shapes[label] = totals.shapes.get(label, 0) + 1
        writers = ">".join([plan.settings.writer, *(action.text for step in plan.steps for action in step.actions
                                                      if action.kind == "writer")])
        totals.writers[writers] = totals.writers.get(writers, 0) + 1
        for path, times in outcome.paths.items():
            totals.path_rounds[path] = totals.path_rounds.get(path, 0) + 1
            totals.path_times[path] = totals.path_times.get(path, 0) + times
        self.out(f"seed {seed} round {round_number}: {plan.statements()} statements, {plan.transactions()} "
                 f"transactions, {len(plan.tables)} tables, {outcome.rows_compared} rows compared, "
                 f"{outcome.seconds:.1f}s ({', '.join(f'{k} {v:.0f}s' for k, v in outcome.phases.items())}) "
                 f"[{plan.settings.describe()}; paths {dict(sorted(outcome.paths.items()))}] → {outcome.result}"
                 + (f" ({outcome.detail.splitlines()[0][:500]})" if outcome.detail else ""))
        if outcome.failed:
            self.report_failure(plan, outcome)
        return outcome

    def report_failure(self, plan: RoundPlan, outcome: Outcome) -> None:
        smallest, runs = plan, 0
        # Each kind of failure is shrunk once: a repeat is most often the same bug, and the run's time is bounded.
        seen = {failure["signature"] for failure in self.totals.failures}
        if self.shrink_seconds > 0 and outcome.result != "harness-error" and outcome.signature() not in seen:
            smallest, runs = shrink(plan, outcome.signature(),
                                    lambda candidate: run_round(candidate, self.server, self.work / "shrink"),
                                    budget_seconds=self.shrink_seconds)
        final = run_round(smallest, self.server, self.work / "shrink") if runs else outcome
        script = smallest.script()
        self.totals.failures.append({"seed": plan.seed, "round": plan.round, "result": outcome.result,
                                     "signature": outcome.signature(),
                                     "detail": outcome.detail, "smallest_detail": final.detail,
                                     "reproduction": script})
        self.out(f"FAILURE seed {plan.seed} round {plan.round}: {outcome.result}\n  {outcome.detail[:1500]}\n"
                 f"  smallest reproduction ({runs} shrink runs, {smallest.statements()} statements; "
                 f"replay: python -m bench.fuzz.fuzz --seed {plan.seed} --round {plan.round}):\n"
                 f"  → {final.result}: {final.detail[:800]}\n" + _indent(script, 4, limit=6000))


def _indent(text: str, width: int, *, limit: int) -> str:
    lines = []
    for line in text.split("\n"):  # not splitlines(): U+0085 and U+2028 inside a value are no line breaks
        lines.append(" " * width + (line if len(line) <= 400 else line[:400] + f" … ({len(line)} chars)"))
    joined = "\n".join(lines)
    return joined if len(joined) <= limit else joined[:limit] + "\n    …"


def parse_families(text: str | None) -> frozenset[str]:
    """`all`, a list (`txn,xa`), or removals from all (`-xa,-crash`)."""
    if not text or text == "all":
        return frozenset(FAMILIES)
    parts = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part.lstrip("-") for part in parts if part.lstrip("-") not in (*FAMILIES, *LONG_FAMILIES)]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {', '.join((*FAMILIES, *LONG_FAMILIES))}")
    if all(part.startswith("-") for part in parts):
        return frozenset(FAMILIES) - {part[1:] for part in parts}
    return frozenset(part for part in parts if not part.startswith("-"))


@contextmanager
def local_server(base: Path) -> Iterator[Server]:
    from cdc_lib.dev.local_mariadb import LocalMariaDB
    from cdc_lib.errors import BinlakeError

    for attempt in range(3):
        try:
            mariadb = LocalMariaDB(base / f"mariadb{attempt}", server_id=21).start()
            break
        except BinlakeError:
            # mariadb-install-db run at the same moment by another process can collide in /tmp: retry.
            if attempt == 2:
                raise
            time.sleep(2)
    try:
        mariadb.create_cdc_user("fuzz", "fuzz-pw")
        mariadb.execute("CREATE USER IF NOT EXISTS 'fuzz'@'127.0.0.1' IDENTIFIED BY 'fuzz-pw'")
        yield Server(mariadb.port, "fuzz", "fuzz-pw", mariadb.admin_connection)
    finally:
        mariadb.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="run rounds until this much time has passed")
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    parser.add_argument("--round", type=int, default=None, help="replay only this round of the seed")
    parser.add_argument("--first-round", type=int, default=0)
    parser.add_argument("--families", default="all", help=f"comma list from {', '.join(FAMILIES)}, or -name to drop")
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time to shrink each failure (0: none)")
    parser.add_argument("--long", action="store_true",
                        help=f"also the long mode's families ({', '.join(LONG_FAMILIES)}): concurrent actors")
    parser.add_argument("--stop-on-failure", action="store_true")
    parser.add_argument("--json", type=Path, help="write totals and failures here")
    parser.add_argument("--columns-share", type=float, default=None,
                        help=f"share of rounds that draw column rules (default {fuzz_columns.ROUND_SHARE})")
    parser.add_argument("--filters-share", type=float, default=None,
                        help=f"share of rounds that draw row filters (default {fuzz_filters.ROUND_SHARE})")
    parser.add_argument("--routes-share", type=float, default=None,
                        help=f"share of rounds that route shards into one table (default {fuzz_filters.ROUTE_SHARE})")
    parser.add_argument("--print-plan", action="store_true", help="print each round's script before running it")
    arguments = parser.parse_args(argv)
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(10**6)
    if arguments.columns_share is not None:
        fuzz_columns.ROUND_SHARE = arguments.columns_share
    if arguments.filters_share is not None:
        fuzz_filters.ROUND_SHARE = arguments.filters_share
    if arguments.routes_share is not None:
        fuzz_filters.ROUTE_SHARE = arguments.routes_share
    families = parse_families(arguments.families) | (frozenset(LONG_FAMILIES) if arguments.long else frozenset())
    print(f"bench.fuzz.fuzz seed {seed}, families {','.join(sorted(families))}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="binlake-fuzz-"))
    logging.basicConfig(level=logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.ERROR)  # binlake's INFO lines reach the spill counter, not the terminal
    started = time.monotonic()
    try:
        with local_server(work) as server:
            fuzzer = Fuzzer(server, work, families=families, shrink_seconds=arguments.shrink_seconds,
                            out=lambda line: print(line, flush=True))
            rounds = [arguments.round] if arguments.round is not None else None
            number = arguments.first_round
            while True:
                current = rounds.pop(0) if rounds else (None if rounds is not None else number)
                if current is None:
                    break
                if arguments.print_plan:
                    print(fuzzer.plan(seed, current).script(), flush=True)
                outcome = fuzzer.round(seed, current)
                number += 1
                if outcome.failed and arguments.stop_on_failure:
                    break
                if rounds is None and time.monotonic() - started >= arguments.minutes * 60:
                    break
                if rounds == []:
                    break
            totals = fuzzer.totals
            minutes = (time.monotonic() - started) / 60
            print(f"\ntotals: seed {seed}, {totals.rounds} rounds, {totals.statements} statements, "
                  f"{totals.transactions} transactions, {totals.rows_compared} rows compared, "
                  f"{len(totals.failures)} failures, results {totals.results}, {minutes:.1f} min "
                  f"({totals.rounds / minutes:.2f} rounds/min, {totals.rows_compared / minutes:.0f} rows compared/min)",
                  flush=True)
            print(f"step shapes: {dict(sorted(totals.shapes.items()))}")
            print(f"rounds per apply path (times in all): {totals.paths_line()}")
            print(f"rounds per batch.writer drawn: {dict(sorted(totals.writers.items()))}")
            for failure in totals.failures:
                print(f"  failure: seed {failure['seed']} round {failure['round']}: {failure['result']}: "
                      f"{failure['detail'][:300]}")
            if arguments.json:
                arguments.json.write_text(json.dumps(totals.__dict__, indent=1, default=str))
            return 1 if totals.failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
