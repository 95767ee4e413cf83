"""Reconciliation: is a Delta copy equal to its source table? One implementation for the CLI, the demo and Dagster.

A table is split into chunks by primary-key range
(or, when the leading key column is not an integer, by a hash of the key: `cdc_lib.reconcile.chunks`).
For every chunk both sides compute a row count and a content digest — the sum
of a 60-bit hash (MD5) of each row's canonical text (`cdc_lib.reconcile.digests`):

    MySQL  → one aggregate query per chunk, over an index range; no row leaves the server
    Delta  → one Spark job that groups every row into its chunk

A mismatch is *confirmed* when the source did not move during the check and
the table's offset was at the end of the binlog (so the copy had every
change), or when it persists in a second pass taken after the pipeline caught
up with the point the first pass saw. Otherwise it may be changes still in
flight, and is reported as such. A key held by several Delta rows is confirmed
drift whatever is in flight: no change makes a primary key hold two rows.

Only the chunks that differ are then compared row by row (`cdc_lib.reconcile.rows`; at most `detail_chunks` of
them): each side sends the key and the row digest of those chunks' rows, which tells
which keys are missing from Delta, which are extra, which hold other values, and which
Delta holds more than once. The cost of that detail follows the drift, not the table.

A soft-delete or history table is compared on its live rows (not deleted; the current versions), without
binlake's metadata columns (`cdc_lib.changes.modes.live_rows`).

Each table's verdict is stored beside the pipeline state (`cdc_lib.state.reconcile_verdicts`) for `binlake status`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_lib.changes import routing
from cdc_lib.changes.columns import sink_schema, with_ignored
from cdc_lib.changes.modes import live_rows
from cdc_lib.errors import NotSnapshottedError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.row_filter import bind_filter
from cdc_lib.model.tables import TableRef
from cdc_lib.reconcile.chunks import EMPTY_TALLY, ChunkMode, ChunkTally, delta_tallies, plan_chunks, source_tallies
from cdc_lib.reconcile.rows import RowDrift, compare_rows, delta_rows, source_rows
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.source.key_ranges import row_count
from cdc_lib.state.offsets import PipelineState, utc_now
from cdc_lib.state.reconcile_verdicts import Verdict, VerdictKind, record_verdict

if TYPE_CHECKING:
    from cdc_lib.pipeline.pipeline import Pipeline

#: Rows per chunk unless the caller says otherwise (the CLI's --chunk-rows, the Dagster resource's setting).
DEFAULT_CHUNK_ROWS = 100_000


@dataclass(frozen=True, kw_only=True)
class ChunkMismatch:
    chunk: int
    where: str
    source_rows: int
    delta_rows: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReconciliationReport:
    table: str
    mode: ChunkMode
    chunks: int
    columns: int
    source_rows: int
    delta_rows: int
    mismatches: tuple[ChunkMismatch, ...]
    schema_differences: tuple[str, ...]
    confirmed: bool
    rechecked: bool
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Row-level comparison of (the first `detail_chunks` of) the mismatched chunks; None when none differ.
    drift: RowDrift | None = None

    @property
    def matches(self) -> bool:
        return not self.mismatches and not self.schema_differences and self.source_rows == self.delta_rows

    @property
    def verdict(self) -> VerdictKind:
        if self.matches:
            return "match"
        return "drift" if self.confirmed else "unconfirmed"

    def to_verdict(self) -> Verdict:
        """What `binlake status` shows of this report (stored by `reconcile_table`)."""
        return Verdict(
            at=utc_now().isoformat(timespec="seconds"), verdict=self.verdict, source_rows=self.source_rows,
            delta_rows=self.delta_rows, mismatched_chunks=len(self.mismatches),
            drifting_rows=None if self.drift is None else self.drift.rows,
            duplicated_keys=0 if self.drift is None else self.drift.duplicated,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **{key: value for key, value in self.__dict__.items() if key not in ("mismatches", "drift")},
            "mismatches": [mismatch.to_json() for mismatch in self.mismatches],
            "drift": self.drift.to_json() if self.drift is not None else None,
            "matches": self.matches,
            "verdict": self.verdict,
        }


def _at_end(state: PipelineState, table: str, logs: list[tuple[str, int]], server_end: BinlogPosition) -> bool:
    table_state = state.tables.get(table)
    if table_state is None or not table_state.position.written_on(server_end.server):
        return False  # an offset from another server says nothing about this server's files
    return binlog_status.bytes_behind(table_state.position, logs) == 0


def reconcile_table(
    pipeline: Pipeline,
    table: str,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    max_chunks: int = 1024,
    recheck_after_seconds: float = 0.0,
    recheck_timeout_seconds: float = 600.0,
    detail_chunks: int = 8,
) -> ReconciliationReport:
    """Compare a table's source and Delta copy chunk by chunk; see the module docstring.

    Args:
        chunk_rows: rows per chunk (raised so that there are at most `max_chunks`).
        recheck_after_seconds: when a mismatch is not confirmed, wait this long, then
            (once the table's offset reaches the binlog end the first pass saw, within
            `recheck_timeout_seconds`) compare the mismatched chunks again. 0 disables it.
        detail_chunks: compare the rows of at most this many mismatched chunks, to name the
            keys that differ (`ReconciliationReport.drift`). 0 disables it.

    Raises:
        NotSnapshottedError: the table has no snapshot yet.
        BinlakeError: the source or the offset store cannot be read.
    """
    started = time.monotonic()
    pipeline.require_snapshot(table)
    ref = TableRef.parse(table)
    spark = pipeline.spark()
    path = pipeline.table_path(table)
    frame = live_rows(spark.read.format("delta").load(path))
    if pipeline.config.sink.route_for(table) is not None:
        # A routed table holds several sources: this one's rows, without the columns that name it.
        frame = frame.where(routing.scope(ref)).drop(*routing.NAMES)
    with mysql.source_connection(pipeline.config.source) as connection:
        schema = mysql.describe_table(connection, ref)
        delta_names = set(frame.columns)
        # The source as the column rules land it: columns left out are not expected in Delta; masked ones are not
        # compared (their digest in MySQL would need the hash key in a query), and so never printed either.
        # Columns schema_policy ignore_new_columns ignored are left out as excluded ones (docs/ddl.md).
        ignored = pipeline.read_state().tables[table].ignored_columns
        rules = with_ignored(pipeline.config.sink.column_rules_for(table), ignored)
        landed = sink_schema(schema, rules, strict=False).column_names
        masked = sorted(name for name in landed if rules is not None and name in rules.mask)
        # A TINYINT(1) landed as boolean held only 0 and 1 (anything else stops the table): compared as the number.
        for name in [] if rules is None else [name for name in rules.types if name in frame.columns]:
            frame = frame.withColumn(name, frame[name].cast("tinyint"))
        differences = [f"column {c} is not in the Delta table" for c in landed if c not in delta_names]
        extra = sorted(delta_names - set(landed))
        differences += [f"column {c} is only in the Delta table" for c in extra]
        columns = [column for column in schema.columns if column.name in delta_names and column.name in landed
                   and column.name not in masked]
        key = tuple(column for column in schema.columns if column.name in schema.primary_key)
        key = tuple(sorted(key, key=lambda column: schema.primary_key.index(column.name)))
        # A filtered table is compared with the rows its filter lands, as the server selects them (the same SQL as
        # the snapshot's WHERE).
        filter_text = pipeline.config.sink.row_filter_for(table)
        row_filter = None if filter_text is None else bind_filter(filter_text, schema).sql

        end_before = binlog_status.current_position(connection)
        quiet_table = _at_end(pipeline.read_state(), table, binlog_status.binary_logs(connection), end_before)
        rows = row_count(connection, ref)
        plan = plan_chunks(connection, ref, key, rows=rows, chunk_rows=chunk_rows, max_chunks=max_chunks)
        source = source_tallies(connection, ref, plan, columns, row_filter=row_filter)
        delta = delta_tallies(frame, plan, columns)
        end_after = binlog_status.current_position(connection)
        mismatched = _mismatched(source, delta)
        confirmed = quiet_table and end_before.same_point(end_after)
        notes: list[str] = [f"masked columns not compared: {', '.join(masked)}"] if masked else []
        rechecked = False
        if mismatched and not confirmed and recheck_after_seconds > 0:
            rechecked = True
            caught_up = _wait_for_offset(pipeline, table, end_after, recheck_after_seconds, recheck_timeout_seconds)
            if caught_up:
                only = set(mismatched)
                for tallies in (source, delta):
                    tallies.update({chunk: EMPTY_TALLY for chunk in only})
                source.update(source_tallies(connection, ref, plan, columns, only=only, row_filter=row_filter))
                frame = live_rows(spark.read.format("delta").load(path))
                delta.update(delta_tallies(frame, plan, columns, only=only))
                mismatched = _mismatched({c: source[c] for c in only}, {c: delta[c] for c in only})
                confirmed = True
                notes.append("mismatched chunks were compared again after the pipeline caught up")
            else:
                notes.append("the pipeline did not catch up in time for a second pass")
        elif mismatched and not confirmed:
            notes.append("the source changed during the check or the table had unapplied changes")
        drift = None
        if mismatched and detail_chunks > 0:
            chosen = mismatched[:detail_chunks]
            drift = compare_rows(
                chosen, source_rows(connection, ref, plan, columns, chosen, row_filter=row_filter),
                delta_rows(frame, plan, columns, chosen),
            )
            if drift.duplicated and not confirmed:
                # No change in flight makes a primary key hold two rows: that much is drift already.
                confirmed = True
                notes.append("Delta holds a primary key in more than one row, whatever changes are in flight")
    mismatches = tuple(
        ChunkMismatch(
            chunk=chunk, where=plan.describe(chunk), source_rows=source.get(chunk, EMPTY_TALLY).rows,
            delta_rows=delta.get(chunk, EMPTY_TALLY).rows,
        )
        for chunk in sorted(mismatched)
    )
    report = ReconciliationReport(
        table=table,
        mode=plan.mode,
        chunks=plan.chunks,
        columns=len(columns),
        source_rows=sum(tally.rows for tally in source.values()),
        delta_rows=sum(tally.rows for tally in delta.values()),
        mismatches=mismatches,
        schema_differences=tuple(differences),
        confirmed=confirmed or not mismatches,
        rechecked=rechecked,
        seconds=time.monotonic() - started,
        notes=tuple(notes),
        drift=drift,
    )
    record_verdict(pipeline.store, pipeline.config.pipeline, table, report.to_verdict())
    return report


def reconcile(pipeline: Pipeline, tables: list[str] | None = None, **options: Any) -> list[ReconciliationReport]:
    """`reconcile_table` for each of `tables` (default: every table with offsets), with the same options.

    Raises:
        NotSnapshottedError: a chosen table has no snapshot yet.
        BinlakeError: the source or the offset store cannot be read.
    """
    names = tables or sorted(pipeline.read_state().tables)
    return [reconcile_table(pipeline, name, **options) for name in names]


def _mismatched(source: dict[int, ChunkTally], delta: dict[int, ChunkTally]) -> list[int]:
    chunks = sorted(set(source) | set(delta))
    return [chunk for chunk in chunks if source.get(chunk, EMPTY_TALLY) != delta.get(chunk, EMPTY_TALLY)]


def _wait_for_offset(
    pipeline: Pipeline, table: str, target: BinlogPosition, pause: float, timeout: float
) -> bool:
    time.sleep(pause)
    deadline = time.monotonic() + timeout
    while True:
        table_state = pipeline.read_state().tables.get(table)
        if table_state is None:
            raise NotSnapshottedError(
                "the table's snapshot vanished during the check", remedy="re-run the check", table=table
            )
        if table_state.position >= target:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(pause, 15.0))


__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "ChunkMismatch",
    "ReconciliationReport",
    "reconcile",
    "reconcile_table",
]
