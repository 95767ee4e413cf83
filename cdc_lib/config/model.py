"""A pipeline's configuration as typed, frozen dataclasses: what every stage reads (`parse` builds them, `load`
finds and reads the files)."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cdc_lib.common.s3 import S3Credentials, S3Settings, is_s3_uri

#: A catalog database or table name binlake writes: Hive metastores accept no other characters.
CATALOG_NAME_PART = re.compile(r"[A-Za-z0-9_]+")

ZeroDatePolicy = Literal["null", "error"]
#: How a table keeps the source's changes (docs/table-modes.md): `mirror` (the source as it is now),
#: `soft_delete` (deleted rows stay, marked by `_binlake_deleted_at`) or `history` (SCD type 2, one row per version).
TableMode = Literal["mirror", "soft_delete", "history"]
#: Which engine writes to Delta: `auto` (delta-rs where it writes the table exactly as Spark would, else Spark),
#: always `spark`, or always `delta-rs` (a table it cannot write is refused). `snapshot.writer` for a snapshot's
#: waves (docs/performance.md "Snapshot speed"), `batch.writer` for a mirror table's change batches ("A writer
#: without Spark").
Writer = Literal["auto", "spark", "delta-rs"]
WRITERS: tuple[Writer, ...] = ("auto", "spark", "delta-rs")
SnapshotWriter = Writer
BatchWriter = Writer
TABLE_MODES: tuple[TableMode, ...] = ("mirror", "soft_delete", "history")
#: What a sync does at an ALTER that changes a table's shape (docs/ddl.md#schema-policies): `evolve` (added and
#: widened columns evolve the Delta table, the rest stops it), `stop` (any change of shape stops it), `approve`
#: (what `evolve` would apply waits, durably, until `binlake schema approve` or `binlake schema reject`),
#: `ignore_new_columns` (added columns are never landed, `TableState.ignored_columns`; the rest as `evolve`).
SchemaPolicy = Literal["evolve", "stop", "approve", "ignore_new_columns"]
SCHEMA_POLICIES: tuple[SchemaPolicy, ...] = ("evolve", "stop", "approve", "ignore_new_columns")


@dataclass(frozen=True)
class SourceConfig:
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    server_id: int
    tables: tuple[str, ...]
    connect_timeout: int = 10
    #: The bound on every network wait (docs/production.md "Silent networks"): a MySQL connection's read or
    #: write (control, binlog stream, JDBC), an S3 or Delta log call. A source that stays silent longer ends
    #: the read (the binlog is read again once from the batch start, then the run stops with a retryable
    #: error); a run that makes no progress for longer stops renewing its lease.
    network_timeout_seconds: int = 60
    ssl_ca: str | None = None
    #: MySQL zero and partial dates ('0000-00-00', '2024-00-10'): stored as NULL, or stop the table.
    zero_dates: ZeroDatePolicy = "null"

    def redacted(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": "***"}


@dataclass(frozen=True)
class MaintenanceConfig:
    """A table's maintenance (`binlake maintain`, the Dagster maintenance jobs; docs/production.md "Maintenance")."""

    enabled: bool = True
    #: The size compaction writes files to; None: the table's `delta.targetFileSize`, else binlake's (1 MiB) on a
    #: table delta-rs writes and Delta's (OPTIMIZE's 1 GiB) on one Spark writes.
    compact_target_file_bytes: int | None = None
    #: Compaction runs once at least this many small files can be merged (fewer: not worth a commit).
    min_files_to_compact: int = 8
    #: Z-order the table's files by these columns when compacting; only on a table Spark writes (delta-rs would
    #: break the key order its own batches rely on, so a delta-rs table refuses it).
    zorder_by: tuple[str, ...] = ()
    #: How long a file a commit removed stays for readers, unless the table's `delta.deletedFileRetentionDuration`
    #: asks for longer; None: Delta's default, 7 days. 0 removes them at once (a reader still on an old version,
    #: or a batch between its read and its commit, then retries).
    vacuum_retention_hours: float | None = None
    #: Versions readers may still travel back to: neither VACUUM nor log cleanup removes what they need.
    keep_time_travel_hours: float = 0.0
    #: A checkpoint is written once this many commits follow the last one (delta-rs writes none of its own
    #: between Spark's cadence, and a long log makes every reader list and read more).
    checkpoint_every_commits: int = 10


@dataclass(frozen=True)
class Freshness:
    """How recent a table's last applied change must be (`freshness`; docs/dagster.md#freshness): the Dagster
    assets carry it as a freshness policy, failing past `fail_after_minutes`, warning past `warn_after_minutes`."""

    fail_after_minutes: int
    warn_after_minutes: int | None = None


MaskKind = Literal["hash", "redact", "truncate", "partial"]


@dataclass(frozen=True, kw_only=True)
class ColumnMask:
    """How one column is masked before anything holds its row (`sink.tables.<t>.mask.<column>`;
    docs/columns-and-masking.md)."""

    kind: MaskKind
    #: hash: the environment variable holding the HMAC key (its value is never in the config).
    key_env: str | None = None
    #: redact: the constant written instead (None: NULL).
    value: str | None = None
    #: truncate: characters kept from the start.
    length: int = 0
    #: partial: characters kept at each end; the others become `fill`.
    keep_first: int = 0
    keep_last: int = 0
    fill: str = "*"


#: What a hash key's check value is the HMAC of: a fixed text, so the value tells keys apart and reveals nothing
#: of the key (HMAC-SHA256 is a pseudo-random function of it).
_KEY_CHECK_MESSAGE = b"binlake hash key check v1"


def hash_key_check(secret: str) -> str:
    """A short value that differs between two hash keys (64 bits of HMAC-SHA256 of a fixed text): recorded with a
    table's landing rules, it tells a sync that the key under a mask's variable is not the snapshot's."""
    return hmac.new(secret.encode(), _KEY_CHECK_MESSAGE, hashlib.sha256).hexdigest()[:16]


def _recorded_mask(mask: ColumnMask, environ: Mapping[str, str]) -> dict[str, Any]:
    recorded: dict[str, Any] = dict(vars(mask))
    secret = environ.get(mask.key_env) if mask.kind == "hash" and mask.key_env else None
    if secret:
        # Unset: not recorded here; shaping the table's rows refuses the missing key with its own remedy.
        recorded["key_check"] = hash_key_check(secret)
    return recorded


TypeOverride = Literal["boolean"]
TYPE_OVERRIDES: tuple[TypeOverride, ...] = ("boolean",)


@dataclass(frozen=True, kw_only=True)
class ColumnRules:
    """Which source columns a table lands, and which it masks (`sink.tables.<t>.columns`, `.mask`)."""

    #: Only these columns (the key is always among them); None: every column but `exclude`.
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    mask: Mapping[str, ColumnMask] = field(default_factory=dict)
    #: Type overrides (`sink.tables.<t>.types.<column>`; docs/types.md "TINYINT(1) as boolean"): column → the Delta
    #: type it lands as. Only `boolean`, for a TINYINT(1) column holding 0 and 1 alone.
    types: Mapping[str, TypeOverride] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class TableLayout:
    """How a table's files are laid out (`sink.tables.<t>.partition_by` or `.cluster_by`; docs/layout.md): Hive-style
    partitions, or Delta liquid clustering. At most one of the two; both empty: neither."""

    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSettings:
    """Delta table settings one table sets apart from its pipeline's (`sink.tables`); None: the pipeline's."""

    deletion_vectors: bool | None = None
    change_data_feed: bool | None = None
    mode: TableMode | None = None
    maintenance: MaintenanceConfig | None = None
    metadata_columns: bool | None = None
    freshness: Freshness | None = None
    schema_policy: SchemaPolicy | None = None
    #: Column projection and masking; None: every column, in clear.
    columns: ColumnRules | None = None
    #: Row filter: a SQL predicate (docs/row-filters.md), checked for syntax at load; None: every row.
    filter: str | None = None
    #: Partition or clustering columns; None: neither.
    layout: TableLayout | None = None
    #: Iceberg metadata written by binlake beside the Delta log after each run (docs/iceberg.md); None: none.
    iceberg: bool | None = None



@dataclass(frozen=True, kw_only=True)
class Route:
    """Many source tables into one Delta table (`sink.routes`; docs/routing.md): each followed table whose
    'database.table' name `source` matches whole lands in `target`, its rows marked by `_binlake_source_db` and
    `_binlake_source_table` (part of the target's key). Each source keeps its own offsets, snapshot and commits."""

    source: str
    target: str

    def matches(self, table: str) -> bool:
        return re.fullmatch(self.source, table) is not None


@dataclass(frozen=True)
class SinkConfig:
    """Where the Delta tables live: a local folder, or `s3a://bucket/prefix` with its S3 settings."""

    path: str
    s3: S3Settings = field(default_factory=S3Settings)
    #: Deletion vectors on the tables binlake creates. Off: delta-rs's pyarrow path (pandas, Polars) refuses
    #: tables with them, and a MERGE then rewrites the files it touches instead (docs/readers.md).
    deletion_vectors: bool = False
    #: Per-table overrides, keyed by 'database.table'.
    tables: Mapping[str, TableSettings] = field(default_factory=dict)
    #: Delta Change Data Feed (`delta.enableChangeDataFeed`) on the tables binlake creates, so downstream
    #: consumers read only what changed (docs/change-feed.md). Off: it writes `_change_data` files per MERGE.
    change_data_feed: bool = False
    #: The tables' mode unless overridden per table (docs/table-modes.md).
    mode: TableMode = "mirror"
    #: `_binlake_source_ts` and `_binlake_applied_ts` after the source's columns of mirror tables, for incremental
    #: consumers and freshness tools (docs/readers.md#metadata-columns). Off: the table is the source's columns only.
    metadata_columns: bool = False
    #: Each table's freshness expectation unless overridden per table; None: no freshness policy.
    freshness: Freshness | None = None
    #: Many sources into one Delta table, first matching route wins; empty: each table lands under its own name.
    routes: tuple[Route, ...] = ()

    @property
    def on_s3(self) -> bool:
        return is_s3_uri(self.path)

    def deletion_vectors_for(self, table: str) -> bool:
        """Whether `table` ('database.table') is written with deletion vectors: its override, else the pipeline's."""
        override = self.tables.get(table, TableSettings()).deletion_vectors
        return self.deletion_vectors if override is None else override

    def change_data_feed_for(self, table: str) -> bool:
        """Whether `table` ('database.table') records a change data feed: its override, else the pipeline's."""
        override = self.tables.get(table, TableSettings()).change_data_feed
        return self.change_data_feed if override is None else override

    def mode_for(self, table: str) -> TableMode:
        """How `table` ('database.table') keeps changes: its override, else the pipeline's."""
        override = self.tables.get(table, TableSettings()).mode
        return self.mode if override is None else override

    def maintenance_for(self, table: str) -> MaintenanceConfig:
        """`table`'s ('database.table') maintenance settings: its own, else the defaults."""
        return self.tables.get(table, TableSettings()).maintenance or MaintenanceConfig()

    def metadata_columns_for(self, table: str) -> bool:
        """Whether `table` ('database.table') carries binlake's metadata columns: its override, else the pipeline's.

        Mirror tables only: soft-delete and history tables carry their own commit times (the config refuses the
        per-table combination; a pipeline-wide default simply passes them by).
        """
        if self.mode_for(table) != "mirror":
            return False
        override = self.tables.get(table, TableSettings()).metadata_columns
        return self.metadata_columns if override is None else override

    def freshness_for(self, table: str) -> Freshness | None:
        """`table`'s freshness expectation: its own, else the pipeline's (None: none)."""
        override = self.tables.get(table, TableSettings()).freshness
        return self.freshness if override is None else override

    def schema_policy_for(self, table: str) -> SchemaPolicy:
        """What a sync does at `table`'s schema changes: its own policy, else `evolve` (binlake's behaviour
        before policies existed). A routed table always stops: one shard's ALTER cannot evolve a table its
        siblings share (docs/routing.md)."""
        if self.route_for(table) is not None:
            return "stop"
        override = self.tables.get(table, TableSettings()).schema_policy
        return "evolve" if override is None else override

    def column_rules_for(self, table: str) -> ColumnRules | None:
        """`table`'s column projection and masking (per table only); None: every column in clear."""
        return self.tables.get(table, TableSettings()).columns

    def iceberg_for(self, table: str) -> bool:
        """Whether binlake keeps Iceberg metadata beside `table`'s Delta log (per table only; docs/iceberg.md)."""
        return bool(self.tables.get(table, TableSettings()).iceberg)

    def row_filter_for(self, table: str) -> str | None:
        """`table`'s row filter predicate (per table only); None: every row lands."""
        return self.tables.get(table, TableSettings()).filter

    def landing_rules_for(self, table: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
        """What decides which rows and values of `table` land (its columns, masks and row filter), as recorded
        with a snapshot: a sync under other rules would mix two shapes in one table (a value landed in clear
        before a mask was added), so it stops the table until it is re-snapshotted (`pipeline/sync.py`).

        A hash mask is recorded by the name of its key's variable and a check value of the key
        (`hash_key_check`), never the key: a new key under the same variable would land new hashes beside old
        ones, and joins on the column would silently miss."""
        rules = self.column_rules_for(table)
        row_filter = self.row_filter_for(table)
        environ = os.environ if environ is None else environ
        return {
            "include": None if rules is None or rules.include is None else list(rules.include),
            "exclude": [] if rules is None else sorted(rules.exclude),
            "mask": {} if rules is None else {column: _recorded_mask(mask, environ)
                                              for column, mask in sorted(rules.mask.items())},
            "filter": None if row_filter is None else " ".join(row_filter.split()),
            # Only when set: a snapshot recorded before type overrides existed stays equal to its rules.
            **({"types": dict(sorted(rules.types.items()))} if rules is not None and rules.types else {}),
        }

    def route_for(self, table: str) -> str | None:
        """The target 'database.table' that `table` ('database.table') is routed into; None: its own table."""
        for route in self.routes:
            if route.matches(table):
                return route.target
        return None

    def layout_for(self, table: str) -> TableLayout:
        """`table`'s partition or clustering columns (per table only; empty: neither)."""
        return self.tables.get(table, TableSettings()).layout or TableLayout()

    def table_path(self, database: str, table: str) -> str:
        """The Delta table a source table lands in: its route's target, else its own name."""
        target = self.route_for(f"{database}.{table}")
        if target is not None:
            database, _, table = target.partition(".")
        return f"{self.path.rstrip('/')}/{database}/{table}"


@dataclass(frozen=True)
class OffsetsConfig:
    uri: str
    endpoint_url: str | None = None
    region: str | None = None
    #: How long a runner's hold on the pipeline lasts without renewal. A live runner's heartbeat renews it every
    #: third of this, so it bounds only how long a runner that died on another machine (or in another container)
    #: blocks the next one, and how long an unanswering offset store is ridden out (80 % of it) before a run stops.
    lease_seconds: int = 120
    path_style_access: bool | None = None
    #: Taken from the sink when the offsets share its bucket; otherwise the standard AWS chain applies.
    credentials: S3Credentials | None = field(default=None, repr=False)
    #: An S3 offset store's bound on one call: set from `source.network_timeout_seconds` (see S3Settings).
    timeout_seconds: int | None = None


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    # A folder the driver and every executor see at the same path (NFS, a shared volume); None: a local temp dir.
    staging_path: str | None = None


@dataclass(frozen=True)
class SnapshotConfig:
    """How a table is read (docs/snapshots.md): in chunks of the primary key, several chunks per Spark job."""

    #: Rows per JDBC partition of a one-shot read (a column back-fill), and per chunk unless `rows_per_chunk`.
    rows_per_partition: int = 500_000
    #: At most this many partitions of a one-shot read, and chunks in one wave of a chunked snapshot.
    max_partitions: int = 8
    #: Rows per chunk of a snapshot: the unit of resume. None: `rows_per_partition`.
    rows_per_chunk: int | None = None
    #: Chunks read by one Spark job (one task each) and written in one Delta commit. None: Spark's default
    #: parallelism, at most `max_partitions`.
    chunks_per_wave: int | None = None
    #: Who writes the waves: "auto" (delta-rs when it can write the table exactly, else Spark), "spark",
    #: "delta-rs". Spark reads the rows either way (JDBC and the one type mapping).
    writer: SnapshotWriter = "auto"

    def chunk_rows(self) -> int:
        return self.rows_per_chunk if self.rows_per_chunk is not None else self.rows_per_partition

    def wave_chunks(self, default_parallelism: int) -> int:
        if self.chunks_per_wave is not None:
            return self.chunks_per_wave
        return max(1, min(default_parallelism, self.max_partitions))


@dataclass(frozen=True)
class BatchConfig:
    max_events: int = 100_000
    max_seconds: float = 60.0
    #: Tables whose changes are written to Delta at once (each its own idempotent commit); None: the cores for
    #: Spark's tables, twice the cores for delta-rs's (`threads_for`).
    apply_threads: int | None = None
    #: Append the rows of keys a batch inserts, without MERGE, once a mirror table is consistent.
    append_inserts: bool = True
    #: Row images of one table a batch holds in Python before that table's changes spill to Parquet
    #: (cdc_lib.changes.spill; docs/performance.md "Huge transactions"). Also the size of each spilled replay step.
    max_buffered_changes: int = 200_000
    #: The local folder spilled changes go to; None: `binlake-spill` under the system's temporary folder.
    spill_path: str | None = None
    #: The engine that writes a mirror table's changes: `auto`, `spark` or `delta-rs` (cdc_lib.sink.delta_rs.writer).
    writer: BatchWriter = "auto"
    #: The largest event inside a MySQL compressed transaction (binlog_transaction_compression=ON) the reader
    #: decompresses; a larger one stops the read with PayloadTooLargeError (cdc_lib/binlog/payload.py). The
    #: inner events are decompressed one at a time (two are held: the reader looks one ahead), so this, not the
    #: transaction's size, bounds what is held.
    max_payload_event_bytes: int = 256 * 1024 * 1024

    def threads_for(self, tables: int, *, delta_rs: bool = False) -> int:
        """Writer threads for a batch that changes `tables` tables: never more threads than tables.

        `delta_rs`: the tables delta-rs writes, by default twice the cores: a delta-rs write releases the GIL and
        waits on file I/O part of the time (docs/performance.md "A writer without Spark").
        """
        cores = os.cpu_count() or 1
        wanted = self.apply_threads if self.apply_threads is not None else (2 * cores if delta_rs else cores)
        return max(1, min(wanted, tables))


@dataclass(frozen=True)
class HiveMetastoreConfig:
    """A Hive metastore behind Spark's session catalog: a remote one (`uris`) or embedded Derby in a folder."""

    uris: str | None = None
    derby_path: str | None = None
    #: Where `CREATE DATABASE` puts a database's folder (spark.sql.warehouse.dir); None: Spark's default.
    warehouse: str | None = None


@dataclass(frozen=True)
class CatalogConfig:
    """Naming each Delta table in a Spark catalog after its snapshot (docs/catalog.md); off by default."""

    enabled: bool = False
    #: The Spark catalog that holds the names: the session catalog, or a plugin set under spark.conf.
    name: str = "spark_catalog"
    #: The catalog database (schema) of a source table; `{database}` and `{pipeline}` are filled in.
    database: str = "{database}"
    hive_metastore: HiveMetastoreConfig | None = None

    def database_name(self, *, database: str, pipeline: str) -> str:
        return self.database.format(database=database, pipeline=pipeline)

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings a Hive metastore needs (none when registration is off or uses no Hive)."""
        metastore = self.hive_metastore
        if not self.enabled or metastore is None:
            return {}
        settings = {"spark.sql.catalogImplementation": "hive"}
        if metastore.uris:
            settings["spark.hadoop.hive.metastore.uris"] = metastore.uris
        if metastore.derby_path:
            settings["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
                f"jdbc:derby:;databaseName={metastore.derby_path};create=true"
            )
        if metastore.warehouse:
            settings["spark.sql.warehouse.dir"] = metastore.warehouse
        return settings


@dataclass(frozen=True)
class MetricsConfig:
    """The OpenMetrics endpoint follow mode serves (docs/production.md "Metrics"); off by default."""

    #: `host:port` of the HTTP endpoint (`/metrics`) while `sync --follow` runs; None: no endpoint. Port 0 takes a
    #: free port (logged).
    address: str | None = None
    #: The per-table figures (lag, runway, files, ...) are read again after a batch at most this often: each read
    #: costs a status (MySQL queries, the state document) and a Delta log load per table.
    refresh_seconds: float = 5.0

    @property
    def host_port(self) -> tuple[str, int] | None:
        if self.address is None:
            return None
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)


@dataclass(frozen=True)
class PipelineConfig:
    pipeline: str
    source: SourceConfig
    sink: SinkConfig
    offsets: OffsetsConfig
    spark: SparkConfig
    batch: BatchConfig
    snapshot: SnapshotConfig
    config_path: Path | None = None
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
