"""A pipeline's metrics in the OpenMetrics text format, for `binlake status --format openmetrics` (a textfile
collector) and follow mode's HTTP endpoint (`cdc_lib.status.metrics_server`).

Data flow:

    table_statuses: offset store, source, snapshot documents  ─┐
    table_layout: each table's Delta log, loaded by delta-rs   ─┼─► TableFigures ─► table_families ─┐
    BatchMetrics: follow mode's batches, in this process only  ───────────────────► families ───────┴─► render

What one collection costs: one `binlake status` (the state document, the snapshot documents' listing, a few MySQL
queries, `SHOW BINLOG EVENTS` up to 100,000 events per lagging table) and, per snapshotted table, one delta-rs load
of its Delta log: the last checkpoint and the commits since, bounded by the table's file count and the checkpoint
interval, never by the length of its history. Every figure comes from what binlake already records; nothing is
written. The text is written here (a few lines of format), so the runtime needs no Prometheus client.

Names follow the OpenMetrics conventions: `binlake_` first, the unit last (`_seconds`, `_bytes`), counters end in
`_total` and carry `_created` (when the count began), every table's sample has the labels `pipeline` and `table`.
The list, with the meaning of each, is in docs/production.md "Metrics".
"""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cdc_lib.sink.delta_rs.writer import storage_options, table_uri
from cdc_lib.sink.storage import SinkStorage
from cdc_lib.state.context import PipelineContext
from cdc_lib.status.table_status import TableStatus

#: The content type of the text `render` writes (OpenMetrics 1.0).
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: ... and of its `classic` text (Prometheus's format 0.0.4).
CLASSIC_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

MetricType = Literal["gauge", "counter", "histogram"]
TableStateName = Literal["healthy", "retrying", "stopped", "snapshotting"]
TABLE_STATES: tuple[TableStateName, ...] = ("healthy", "retrying", "stopped", "snapshotting")
OPERATIONS = ("insert", "update", "delete")

#: Upper bounds of the batch and commit duration histograms, in seconds: a minute batch's whole range.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True)
class Sample:
    """One line of a family: the family name plus `suffix` (`_total`, `_bucket`, ...), its labels, its value."""

    suffix: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True)
class Family:
    """One metric family: its `# TYPE`, `# UNIT` and `# HELP`, then its samples."""

    name: str
    type: MetricType
    help: str
    unit: str = ""
    samples: tuple[Sample, ...] = ()


def render(families: Iterable[Family], *, classic: bool = False) -> str:
    """The families as OpenMetrics text, ending in `# EOF`; a family without samples is left out.

    `classic`: Prometheus's older text format (0.0.4) instead, the one node_exporter's textfile collector parses:
    no `# UNIT`, no `_created` samples, no `# EOF`, and a counter's family named with its `_total`.
    """
    lines: list[str] = []
    for family in families:
        samples = [sample for sample in family.samples if not (classic and sample.suffix == "_created")]
        if not samples:
            continue
        name = f"{family.name}_total" if classic and family.type == "counter" else family.name
        lines.append(f"# TYPE {name} {family.type}")
        if family.unit and not classic:
            lines.append(f"# UNIT {name} {family.unit}")
        lines.append(f"# HELP {name} {_escape(family.help, quote=False)}")
        for sample in samples:
            labels = ",".join(f'{label}="{_escape(value)}"' for label, value in sample.labels)
            lines.append(f"{family.name}{sample.suffix}{{{labels}}} {_number(sample.value)}")
    if not classic:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _escape(text: str, *, quote: bool = True) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


@dataclass(frozen=True)
class TableLayout:
    """The live data files of a table's current version and their bytes."""

    files: int
    bytes: int


def table_layout(path: str, storage: SinkStorage) -> TableLayout | None:
    """The table's live files and bytes from its Delta log (checkpoint and the commits since, loaded by delta-rs);
    None when there is no table at `path`."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(table_uri(path), storage_options=storage_options(path, storage))
    except TableNotFoundError:
        return None
    actions = table.get_add_actions(flatten=True)
    sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
    return TableLayout(files=actions.num_rows, bytes=sum(int(size or 0) for size in sizes))


@dataclass(frozen=True, kw_only=True)
class TableFigures:
    """One table's figures, as the metrics show them (None: unknown, the sample is left out)."""

    table: str
    state: TableStateName
    lag_seconds: float | None = None
    lag_bytes: int | None = None
    lag_events: int | None = None
    rows_applied: Mapping[str, int] = field(default_factory=dict)
    #: When the count of `rows_applied` began (the table's snapshot), in seconds since the epoch.
    rows_applied_since: float | None = None
    #: +Inf: the server never purges the binlog the table needs; 0: it is purged already.
    runway_seconds: float | None = None
    snapshot_chunks_done: int | None = None
    snapshot_chunks_planned: int | None = None
    snapshot_rows_read: int | None = None
    delta_version: int | None = None
    files: int | None = None
    bytes: int | None = None


def table_state(status: TableStatus) -> TableStateName:
    """stopped (an error), retrying (a passing fault), snapshotting (a snapshot in flight, none yet, or its binlog
    replay not done), else healthy."""
    if status.error:
        return "stopped"
    if status.retrying:
        return "retrying"
    if status.snapshot_in_flight or not status.snapshotted or not status.consistent:
        return "snapshotting"
    return "healthy"


def figures_of(status: TableStatus, layout: TableLayout | None = None) -> TableFigures:
    """The figures of a table from its status and its layout."""
    runway: float | None = None
    if status.runway is not None:
        seconds = status.runway.get("runway_seconds")
        runway = 0.0 if status.runway.get("purged") else math.inf if seconds is None else max(0.0, float(seconds))
    progress = status.snapshot_progress or {}
    return TableFigures(
        table=status.table,
        state=table_state(status),
        lag_seconds=status.lag_seconds,
        lag_bytes=status.lag_bytes,
        lag_events=status.lag_events,
        rows_applied=dict(status.rows_applied or {}),
        rows_applied_since=_epoch(status.snapshot_at),
        runway_seconds=runway,
        snapshot_chunks_done=progress.get("chunks_done"),
        snapshot_chunks_planned=progress.get("chunks_total"),
        snapshot_rows_read=progress.get("rows_done"),
        delta_version=status.delta_version,
        files=None if layout is None else layout.files,
        bytes=None if layout is None else layout.bytes,
    )


def _epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    moment = dt.datetime.fromisoformat(timestamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp()


def collect(context: PipelineContext, statuses: Sequence[TableStatus]) -> list[TableFigures]:
    """Every table's figures: `statuses` (from `table_statuses`) and, for each snapshotted table, its layout."""
    figures = []
    for status in statuses:
        layout = table_layout(context.table_path(status.table), context.sink) if status.snapshotted else None
        figures.append(figures_of(status, layout))
    return figures


def table_families(pipeline: str, tables: Sequence[TableFigures], *, collected_at: float) -> list[Family]:
    """The per-table families, from `tables` as one collection saw them at `collected_at` (epoch seconds)."""

    def gauge(name: str, help_text: str, values: Iterable[tuple[TableFigures, float | None]], *,
              unit: str = "") -> Family:
        samples = tuple(
            Sample("", (("pipeline", pipeline), ("table", table.table)), float(value))
            for table, value in values if value is not None
        )
        return Family(name, "gauge", help_text, unit, samples)

    states = tuple(
        Sample("", (("pipeline", pipeline), ("table", table.table), ("state", state)),
               1.0 if table.state == state else 0.0)
        for table in tables for state in TABLE_STATES
    )
    applied: list[Sample] = []
    for table in tables:
        if table.rows_applied_since is None:
            continue  # not snapshotted: nothing counted yet
        for operation in OPERATIONS:
            labels = (("pipeline", pipeline), ("table", table.table), ("operation", operation))
            applied.append(Sample("_total", labels, float(table.rows_applied.get(operation, 0))))
            applied.append(Sample("_created", labels, table.rows_applied_since))
    return [
        Family("binlake_table_state", "gauge",
               "1 for the state the table is in (healthy, retrying, stopped, snapshotting), 0 for the others",
               samples=states),
        gauge("binlake_lag_seconds", "Seconds since the source change the table is waiting to apply "
              "(0 when caught up)", ((table, table.lag_seconds) for table in tables), unit="seconds"),
        gauge("binlake_lag_bytes", "Binlog bytes written on the source past the table's offset",
              ((table, table.lag_bytes) for table in tables), unit="bytes"),
        gauge("binlake_lag_events", "Binlog events past the table's offset (counted up to 100000)",
              ((table, table.lag_events) for table in tables)),
        Family("binlake_rows_applied", "counter",
               "Rows the micro-batches applied to the table per operation since its snapshot (_created)",
               samples=tuple(applied)),
        gauge("binlake_binlog_runway_seconds", "Seconds until the server purges the binlog file the table's offset "
              "needs (+Inf: never purged by age or size, 0: purged)",
              ((table, table.runway_seconds) for table in tables), unit="seconds"),
        gauge("binlake_snapshot_chunks_done", "Chunks of the table's snapshot in flight that are written",
              ((table, table.snapshot_chunks_done) for table in tables)),
        gauge("binlake_snapshot_chunks_planned", "Chunks the table's snapshot in flight is planned in",
              ((table, table.snapshot_chunks_planned) for table in tables)),
        gauge("binlake_snapshot_rows_read", "Rows the table's snapshot in flight has written so far",
              ((table, table.snapshot_rows_read) for table in tables)),
        gauge("binlake_delta_version", "The table's newest Delta version binlake committed",
              ((table, table.delta_version) for table in tables)),
        gauge("binlake_table_files", "Data files in the table's current Delta version",
              ((table, table.files) for table in tables)),
        gauge("binlake_table_bytes", "Bytes of the data files in the table's current Delta version",
              ((table, table.bytes) for table in tables), unit="bytes"),
        Family("binlake_metrics_collected_timestamp_seconds", "gauge",
               "When the per-table figures were read (seconds since the epoch)", "seconds",
               (Sample("", (("pipeline", pipeline),), collected_at),)),
    ]


class Histogram:
    """Observations counted in cumulative buckets, with their sum (the OpenMetrics histogram)."""

    def __init__(self, bounds: Sequence[float] = DURATION_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.total = 0.0

    def observe(self, value: float) -> None:
        index = next((index for index, bound in enumerate(self.bounds) if value <= bound), len(self.bounds))
        self.counts[index] += 1
        self.total += value

    def samples(self, labels: tuple[tuple[str, str], ...], created: float) -> list[Sample]:
        samples, running = [], 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            le = "+Inf" if math.isinf(bound) else repr(float(bound))
            samples.append(Sample("_bucket", (*labels, ("le", le)), float(running)))
        samples += [Sample("_count", labels, float(running)), Sample("_sum", labels, self.total),
                    Sample("_created", labels, created)]
        return samples


class BatchMetrics:
    """What this process's batches measured (follow mode): per-process counters and histograms, whose `_created` is
    when the process began counting. `observe` is called after each batch; `families` by a scrape. The lock
    guards a few numbers only, never any I/O, so a scrape never holds a batch up."""

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.created = time.time()
        self._lock = threading.Lock()
        self._batches = 0
        self._batch_seconds = Histogram()
        self._commit_seconds: dict[str, Histogram] = {}
        self._rows: dict[tuple[str, str], int] = {}
        self._behind_bytes: int | None = None
        self._last_batch_at: float | None = None

    def observe(self, *, seconds: float, tables: Sequence[tuple[str, Mapping[str, int], float]],
                behind_bytes: int | None) -> None:
        """One batch: its wall time; per table written, (name, rows per operation, commit seconds); the binlog
        bytes behind its end (None: not measured)."""
        with self._lock:
            self._batches += 1
            self._batch_seconds.observe(seconds)
            for table, rows, commit_seconds in tables:
                self._commit_seconds.setdefault(table, Histogram()).observe(commit_seconds)
                for operation in OPERATIONS:
                    key = (table, operation)
                    self._rows[key] = self._rows.get(key, 0) + int(rows.get(operation, 0))
            if behind_bytes is not None:
                self._behind_bytes = behind_bytes
            self._last_batch_at = time.time()

    def families(self) -> list[Family]:
        with self._lock:  # copies of a few numbers; the text is made after the lock is let go
            batches, behind, last = self._batches, self._behind_bytes, self._last_batch_at
            pipeline_labels = (("pipeline", self.pipeline),)
            batch_samples = self._batch_seconds.samples(pipeline_labels, self.created)
            commit_samples = [
                sample for table, histogram in sorted(self._commit_seconds.items())
                for sample in histogram.samples((*pipeline_labels, ("table", table)), self.created)
            ]
            rows = sorted(self._rows.items())
        row_samples = [
            sample for (table, operation), count in rows
            for sample in (
                Sample("_total", (*pipeline_labels, ("table", table), ("operation", operation)), float(count)),
                Sample("_created", (*pipeline_labels, ("table", table), ("operation", operation)), self.created),
            )
        ]
        return [
            Family("binlake_batches", "counter", "Micro-batches this follow process ran",
                   samples=(Sample("_total", pipeline_labels, float(batches)),
                            Sample("_created", pipeline_labels, self.created))),
            Family("binlake_batch_duration_seconds", "histogram",
                   "Wall time of this process's micro-batches: binlog read, Delta commits, offset write",
                   "seconds", tuple(batch_samples)),
            Family("binlake_commit_duration_seconds", "histogram",
                   "Wall time of one table's Delta commit in a micro-batch of this process (retries included)",
                   "seconds", tuple(commit_samples)),
            Family("binlake_process_rows_applied", "counter",
                   "Rows this follow process applied per table and operation (binlake_rows_applied counts since "
                   "the snapshot)", samples=tuple(row_samples)),
            Family("binlake_follow_behind_bytes", "gauge",
                   "Binlog bytes written on the source past the end of this process's last batch", "bytes",
                   () if behind is None else (Sample("", pipeline_labels, float(behind)),)),
            Family("binlake_last_batch_timestamp_seconds", "gauge",
                   "When this process's last micro-batch ended (seconds since the epoch)", "seconds",
                   () if last is None else (Sample("", pipeline_labels, last),)),
        ]


def openmetrics_text(context: PipelineContext, statuses: Sequence[TableStatus], *, classic: bool = False) -> str:
    """What `binlake status --format openmetrics` (`classic`: `--format prometheus`) prints: the per-table families,
    from one collection."""
    collected_at = time.time()
    families = table_families(context.config.pipeline, collect(context, statuses), collected_at=collected_at)
    return render(families, classic=classic)


__all__ = [
    "CLASSIC_CONTENT_TYPE", "CONTENT_TYPE", "DURATION_BUCKETS", "OPERATIONS", "TABLE_STATES", "BatchMetrics", "Family",
    "Histogram", "Sample", "TableFigures", "TableLayout", "collect", "figures_of", "openmetrics_text", "render",
    "table_families", "table_layout", "table_state",
]
