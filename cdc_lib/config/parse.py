"""Turning a parsed config document into the typed model: every key checked, each error naming its key and how
to fix it."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, cast

from cdc_lib.common.s3 import S3Credentials, S3Settings, is_s3_uri, split_s3_uri
from cdc_lib.config.model import (
    CATALOG_NAME_PART,
    SCHEMA_POLICIES,
    TABLE_MODES,
    TYPE_OVERRIDES,
    WRITERS,
    BatchConfig,
    CatalogConfig,
    ColumnMask,
    ColumnRules,
    Freshness,
    HiveMetastoreConfig,
    MaintenanceConfig,
    MetricsConfig,
    OffsetsConfig,
    PipelineConfig,
    Route,
    SchemaPolicy,
    SinkConfig,
    SnapshotConfig,
    SourceConfig,
    SparkConfig,
    TableLayout,
    TableMode,
    TableSettings,
    TypeOverride,
    Writer,
    ZeroDatePolicy,
)
from cdc_lib.errors import ConfigError
from cdc_lib.model.row_filter import FilterSyntaxError, parse_filter

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_$-]+$")
_PATTERN_PATTERN = re.compile(r"^[A-Za-z0-9_$-]+\.(\*|[A-Za-z0-9_$*-]+)$")
_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REGION_PATTERN = re.compile(r"^[a-z0-9-]{2,32}$")
_ENDPOINT_PATTERN = re.compile(r"^https?://[^/\s]+/?$")
_SINK_S3_KEYS = ("endpoint_url", "region", "path_style_access", "access_key_id", "secret_access_key", "session_token")
_CATALOG_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TEMPLATE_FIELD_PATTERN = re.compile(r"\{(database|pipeline)\}")
_THRIFT_URIS_PATTERN = re.compile(r"^thrift://[^/\s,]+(,thrift://[^/\s,]+)*$")


def parse_config(document: Any, *, base_dir: Path | None = None) -> PipelineConfig:
    root = _mapping(document, "<root>")
    _reject_unknown(root, "", {"pipeline", "source", "sink", "offsets", "spark", "batch", "snapshot", "catalog",
                                 "metrics"})
    pipeline = _string(root, "pipeline", "")
    if not _NAME_PATTERN.match(pipeline):
        raise ConfigError("pipeline", f"'{pipeline}' may only hold letters, digits, '_' and '-'")
    source_doc = _mapping(_required(root, "source", ""), "source")
    _reject_unknown(
        source_doc, "source.", {"host", "port", "user", "password", "server_id", "tables", "connect_timeout", "ssl_ca",
                                 "zero_dates", "network_timeout_seconds"}
    )
    tables_raw = _required(source_doc, "tables", "source.")
    if not isinstance(tables_raw, list) or not tables_raw:
        raise ConfigError("source.tables", "must be a non-empty list such as [shop.orders, 'inventory.*']")
    tables: list[str] = []
    for index, entry in enumerate(tables_raw):
        if not isinstance(entry, str) or not _PATTERN_PATTERN.match(entry):
            raise ConfigError(f"source.tables[{index}]", f"'{entry}' is not 'database.table' or 'database.*'")
        tables.append(entry)
    source = SourceConfig(
        host=_string(source_doc, "host", "source."),
        port=_integer(source_doc, "port", "source.", default=3306, low=1, high=65535),
        user=_string(source_doc, "user", "source."),
        password=_string(source_doc, "password", "source.", default="", allow_empty=True),
        server_id=_integer(source_doc, "server_id", "source.", low=1, high=2**32 - 1),
        tables=tuple(tables),
        connect_timeout=_integer(
            source_doc, "connect_timeout", "source.", default=_default(SourceConfig, "connect_timeout"), low=1,
            high=600,
        ),
        network_timeout_seconds=_integer(
            source_doc, "network_timeout_seconds", "source.", default=_default(SourceConfig, "network_timeout_seconds"),
            low=1, high=3600,
        ),
        ssl_ca=_optional_string(source_doc, "ssl_ca", "source."),
        zero_dates=_zero_date_policy(source_doc.get("zero_dates")),
    )
    sink = _sink(_mapping(_required(root, "sink", ""), "sink"), base_dir, source.tables)
    # One bound for every network wait: the S3 calls of the sink and the offset store take the source's.
    sink = replace(sink, s3=replace(sink.s3, timeout_seconds=source.network_timeout_seconds))
    offsets_doc = _mapping(root.get("offsets") or {}, "offsets")
    offsets_doc = {"uri": f"{sink.path.rstrip('/')}/_offsets", **offsets_doc}
    _reject_unknown(offsets_doc, "offsets.", {"uri", "endpoint_url", "region", "lease_seconds"})
    offsets_uri = _local_or_uri(_string(offsets_doc, "uri", "offsets."), base_dir)
    # Offsets in the sink's bucket (the default place) reach it the way the sink does, unless told otherwise.
    shares_sink = sink.on_s3 and is_s3_uri(offsets_uri) and split_s3_uri(offsets_uri)[0] == split_s3_uri(sink.path)[0]
    inherited = sink.s3 if shares_sink else S3Settings()
    offsets = OffsetsConfig(
        uri=offsets_uri,
        endpoint_url=_endpoint(offsets_doc, "offsets.") or inherited.endpoint_url,
        region=_region(offsets_doc, "offsets.") or inherited.region,
        lease_seconds=_integer(
            offsets_doc, "lease_seconds", "offsets.", default=_default(OffsetsConfig, "lease_seconds"), low=5,
            high=86_400,
        ),
        path_style_access=inherited.path_style_access,
        credentials=inherited.credentials,
        timeout_seconds=source.network_timeout_seconds,
    )
    spark_doc = _mapping(root.get("spark") or {}, "spark")
    _reject_unknown(spark_doc, "spark.", {"master", "conf", "staging_path"})
    conf_doc = _mapping(spark_doc.get("conf") or {}, "spark.conf")
    staging_path = _optional_string(spark_doc, "staging_path", "spark.")
    if staging_path is not None and "://" in staging_path:
        raise ConfigError(
            "spark.staging_path", f"'{staging_path}' is a URI; the driver writes the batch there with local file I/O",
            remedy="mount a shared folder (NFS, a shared volume) at the same path on the driver and every worker",
        )
    user_conf = {str(key): str(value) for key, value in conf_doc.items()}
    catalog = _catalog(root.get("catalog"), base_dir, user_conf)
    spark = SparkConfig(
        master=_string(spark_doc, "master", "spark.", default=_default(SparkConfig, "master")),
        conf={**catalog.spark_conf(), **user_conf},
        staging_path=_local_or_uri(staging_path, base_dir) if staging_path is not None else None,
    )
    batch_doc = _mapping(root.get("batch") or {}, "batch")
    _reject_unknown(batch_doc, "batch.", {"max_events", "max_seconds", "apply_threads", "append_inserts",
                                          "max_buffered_changes", "spill_path", "writer",
                                          "max_payload_event_bytes"})
    spill_path = _optional_string(batch_doc, "spill_path", "batch.")
    if spill_path is not None and "://" in spill_path:
        raise ConfigError(
            "batch.spill_path", f"'{spill_path}' is a URI; spilled changes go to a local folder of the driver",
            remedy="name a local folder with room for the largest transaction's rows (or leave the key out)",
        )
    batch = BatchConfig(
        max_events=_integer(
            batch_doc, "max_events", "batch.", default=_default(BatchConfig, "max_events"), low=1, high=100_000_000
        ),
        max_seconds=float(
            _integer(batch_doc, "max_seconds", "batch.", default=int(_default(BatchConfig, "max_seconds")), low=1,
                     high=86_400)
        ),
        apply_threads=(
            _integer(batch_doc, "apply_threads", "batch.", low=1, high=256)
            if batch_doc.get("apply_threads") is not None else None
        ),
        append_inserts=_boolean(batch_doc, "append_inserts", "batch.") is not False,
        max_buffered_changes=_integer(
            batch_doc, "max_buffered_changes", "batch.", default=_default(BatchConfig, "max_buffered_changes"),
            low=100, high=1_000_000_000,
        ),
        spill_path=_local_or_uri(spill_path, base_dir) if spill_path is not None else None,
        writer=_writer(batch_doc.get("writer"), "batch.writer"),
        max_payload_event_bytes=_integer(
            batch_doc, "max_payload_event_bytes", "batch.", default=_default(BatchConfig, "max_payload_event_bytes"),
            low=1 << 16, high=1 << 32,
        ),
    )
    snapshot_doc = _mapping(root.get("snapshot") or {}, "snapshot")
    _reject_unknown(
        snapshot_doc, "snapshot.",
        {"rows_per_partition", "max_partitions", "rows_per_chunk", "chunks_per_wave", "writer"},
    )
    snapshot = SnapshotConfig(
        rows_per_partition=_integer(
            snapshot_doc, "rows_per_partition", "snapshot.", default=_default(SnapshotConfig, "rows_per_partition"),
            low=1, high=10**9,
        ),
        max_partitions=_integer(
            snapshot_doc, "max_partitions", "snapshot.", default=_default(SnapshotConfig, "max_partitions"), low=1,
            high=10_000,
        ),
        rows_per_chunk=(
            _integer(snapshot_doc, "rows_per_chunk", "snapshot.", low=1, high=10**9)
            if snapshot_doc.get("rows_per_chunk") is not None else None
        ),
        chunks_per_wave=(
            _integer(snapshot_doc, "chunks_per_wave", "snapshot.", low=1, high=10_000)
            if snapshot_doc.get("chunks_per_wave") is not None else None
        ),
        writer=_writer(snapshot_doc.get("writer"), "snapshot.writer"),
    )
    sink = _routed(sink, root["sink"].get("routes"), source.tables, batch=batch, snapshot=snapshot)
    return PipelineConfig(
        pipeline=pipeline, source=source, sink=sink, offsets=offsets, spark=spark, batch=batch, snapshot=snapshot,
        catalog=catalog, metrics=_metrics(root.get("metrics")),
    )


def _metrics(value: Any) -> MetricsConfig:
    """`metrics`: where follow mode serves its OpenMetrics endpoint (docs/production.md "Metrics")."""
    document = _mapping(value or {}, "metrics")
    _reject_unknown(document, "metrics.", {"address", "refresh_seconds"})
    address = _optional_string(document, "address", "metrics.")
    if address is not None:
        host, colon, port = address.rpartition(":")
        if not colon or not host or not port.isdigit() or int(port) > 65_535:
            raise ConfigError(
                "metrics.address", f"'{address}' is not host:port",
                remedy="name the interface and port, such as 127.0.0.1:9464 (0.0.0.0:9464 listens on every one)",
            )
    refresh = _integer(document, "refresh_seconds", "metrics.",
                       default=int(_default(MetricsConfig, "refresh_seconds")), low=1, high=3600)
    return MetricsConfig(address=address, refresh_seconds=float(refresh))


def _default(config_class: type, name: str) -> Any:
    """A config field's default as its dataclass declares it: the one place each default is written."""
    return next(item.default for item in fields(config_class) if item.name == name)


def _sink(document: Mapping[str, Any], base_dir: Path | None, patterns: tuple[str, ...]) -> SinkConfig:
    _reject_unknown(
        document, "sink.",
        {"path", "deletion_vectors", "change_data_feed", "tables", "mode", "metadata_columns", "freshness",
         "routes", *_SINK_S3_KEYS},
    )
    path = _local_or_uri(_string(document, "path", "sink."), base_dir)
    chosen = _boolean(document, "deletion_vectors", "sink.")
    deletion_vectors: bool = _default(SinkConfig, "deletion_vectors") if chosen is None else chosen
    chosen_feed = _boolean(document, "change_data_feed", "sink.")
    change_data_feed: bool = _default(SinkConfig, "change_data_feed") if chosen_feed is None else chosen_feed
    overrides = _table_settings(document.get("tables"), patterns)
    chosen_mode = _table_mode(document, "sink.")
    mode: TableMode = _default(SinkConfig, "mode") if chosen_mode is None else chosen_mode
    chosen_columns = _boolean(document, "metadata_columns", "sink.")
    metadata_columns: bool = _default(SinkConfig, "metadata_columns") if chosen_columns is None else chosen_columns
    _check_metadata_columns(mode, metadata_columns, "sink.")
    for name, settings in overrides.items():
        if settings.columns is not None and (settings.mode or mode) != "mirror":
            # A soft-delete or history snapshot's binlog correction is not shaped yet (docs/columns-and-masking.md).
            raise ConfigError(f"sink.tables.{name}.columns", f"applies to mirror tables only, not mode "
                              f"{settings.mode or mode}", remedy="land the table as a mirror, or drop its column rules")
        if settings.layout is not None and (settings.mode or mode) != "mirror":
            raise ConfigError(f"sink.tables.{name}.{'partition_by' if settings.layout.partition_by else 'cluster_by'}",
                              f"applies to mirror tables only, not mode {settings.mode or mode}",
                              remedy="land the table as a mirror, or drop its layout")
        if settings.iceberg:
            _check_iceberg(settings, f"sink.tables.{name}.", deletion_vectors=deletion_vectors)
    freshness = _freshness(document, "sink.")
    if path.startswith(("s3://", "s3n://")):
        raise ConfigError(
            "sink.path", f"'{path}' uses a scheme Spark's Hadoop cannot write",
            remedy=f"write it as s3a://{path.split('://', 1)[1]}",
        )
    if "://" in path and not path.startswith(("s3a://", "file://")):
        raise ConfigError(
            "sink.path", f"'{path}' is neither a local folder nor s3a://bucket/prefix",
            remedy="binlake reads the Delta log itself and supports local folders and s3a:// sinks only",
        )
    if not path.startswith("s3a://"):
        given = [key for key in _SINK_S3_KEYS if document.get(key) is not None]
        if given:
            raise ConfigError(
                f"sink.{given[0]}", "only applies to an s3a:// sink.path", remedy=f"remove sink.{given[0]}"
            )
        return SinkConfig(
            path=path, deletion_vectors=deletion_vectors, change_data_feed=change_data_feed, tables=overrides,
            mode=mode, metadata_columns=metadata_columns, freshness=freshness,
        )
    bucket, _ = split_s3_uri(path)
    if not _BUCKET_PATTERN.match(bucket) or ".." in bucket:
        raise ConfigError(
            "sink.path", f"'{bucket}' is not a valid S3 bucket name",
            remedy="use s3a://<bucket>/<prefix> with a bucket of 3-63 lowercase letters, digits, '.' and '-'",
        )
    return SinkConfig(
        path=path,
        s3=S3Settings(
            endpoint_url=_endpoint(document, "sink."),
            region=_region(document, "sink."),
            path_style_access=_boolean(document, "path_style_access", "sink."),
            credentials=_credentials(document, "sink."),
        ),
        deletion_vectors=deletion_vectors,
        change_data_feed=change_data_feed,
        tables=overrides,
        mode=mode,
        metadata_columns=metadata_columns,
        freshness=freshness,
    )


def _routed(
    sink: SinkConfig, value: Any, patterns: tuple[str, ...], *, batch: BatchConfig, snapshot: SnapshotConfig
) -> SinkConfig:
    """`sink.routes`: many source tables into one Delta table (docs/routing.md), refused where routing is not
    exact yet: only mirror tables written by Spark, with the settings of the shared table pipeline-wide."""
    if value is None:
        return sink
    if not isinstance(value, list) or not value:
        raise ConfigError("sink.routes", "must be a non-empty list of {source: <regex>, target: <database.table>}")
    routes: list[Route] = []
    for index, entry in enumerate(value):
        where = f"sink.routes[{index}]"
        document = _mapping(entry, where)
        _reject_unknown(document, f"{where}.", {"source", "target"})
        source = _string(document, "source", f"{where}.")
        try:
            re.compile(source)
        except re.error as exc:
            raise ConfigError(f"{where}.source", f"'{source}' is not a regular expression: {exc}") from None
        target = _string(document, "target", f"{where}.")
        database, dot, table = target.partition(".")
        if not dot or not CATALOG_NAME_PART.fullmatch(database) or not CATALOG_NAME_PART.fullmatch(table):
            raise ConfigError(f"{where}.target", f"'{target}' is not a 'database.table' name of letters, digits, '_'")
        routes.append(Route(source=source, target=target))
    routed = replace(sink, routes=tuple(routes))
    refusals = [
        (key, problem) for key, problem in (
            ("sink.mode", sink.mode != "mirror"), ("sink.metadata_columns", sink.metadata_columns),
            ("batch.writer", batch.writer == "delta-rs"), ("snapshot.writer", snapshot.writer == "delta-rs"),
        ) if problem
    ]
    named = [pattern for pattern in patterns if "*" not in pattern]
    for name, settings in sink.tables.items():
        if routed.route_for(name) is None:
            continue
        # The shared Delta table has one set of properties and one mode: a shard's own would flip them.
        for key in ("mode", "metadata_columns", "deletion_vectors", "change_data_feed", "schema_policy", "iceberg"):
            if getattr(settings, key) is not None:
                refusals.append((f"sink.tables.{name}.{key}", True))
    if refusals:
        key = refusals[0][0]
        raise ConfigError(
            key, "is not supported on routed tables yet (sink.routes): they are mirrors written by Spark, with the "
            "shared table's settings pipeline-wide (docs/routing.md)",
            remedy=f"remove '{key}' (or its value) for the routed tables, or land them without sink.routes",
        )
    for name in named:
        if routed.route_for(name) is None and any(route.target == name for route in routes):
            raise ConfigError(
                "sink.routes", f"'{name}' lands in its own Delta table, which is also a route's target",
                remedy=f"route {name} too (its source regex), or give the route another target",
            )
    return routed


def _catalog(value: Any, base_dir: Path | None, user_conf: Mapping[str, str]) -> CatalogConfig:
    """`catalog`: whether and where each Delta table is named in a Spark catalog (docs/catalog.md)."""
    if value is None:
        return CatalogConfig()
    document = _mapping(value, "catalog")
    _reject_unknown(document, "catalog.", {"enabled", "name", "database", "hive_metastore"})
    enabled = _boolean(document, "enabled", "catalog.")
    name = _string(document, "name", "catalog.", default=_default(CatalogConfig, "name"))
    if not _CATALOG_NAME_PATTERN.match(name):
        raise ConfigError("catalog.name", f"'{name}' is not a Spark catalog name (letters, digits, '_')")
    if name != "spark_catalog" and f"spark.sql.catalog.{name}" not in user_conf:
        raise ConfigError(
            "catalog.name", f"names catalog '{name}', which no spark.conf key spark.sql.catalog.{name} defines",
            remedy=f"set spark.conf 'spark.sql.catalog.{name}' to its plugin class (for Unity Catalog: "
            "io.unitycatalog.spark.UCSingleCatalog, with its .uri and .token), or use name: spark_catalog",
        )
    database = _string(document, "database", "catalog.", default=_default(CatalogConfig, "database"))
    _check_database_template(database)
    metastore = _hive_metastore(document.get("hive_metastore"), base_dir)
    if metastore is not None and name != "spark_catalog":
        raise ConfigError(
            "catalog.hive_metastore", f"backs Spark's session catalog only, but catalog.name is '{name}'",
            remedy="set catalog.name: spark_catalog, or remove catalog.hive_metastore",
        )
    catalog = CatalogConfig(enabled=bool(enabled), name=name, database=database, hive_metastore=metastore)
    for key, wanted in catalog.spark_conf().items():
        if key in user_conf and user_conf[key] != wanted:
            raise ConfigError(
                f"spark.conf.{key}", f"is '{user_conf[key]}', but catalog.hive_metastore sets it to '{wanted}'",
                remedy=f"set the metastore in one place: remove spark.conf '{key}' or catalog.hive_metastore",
            )
    return catalog


def _check_database_template(template: str) -> None:
    # Only the exact fields are filled in: a format spec or an attribute ({database.upper}) is refused too.
    if not CATALOG_NAME_PART.fullmatch(_TEMPLATE_FIELD_PATTERN.sub("x", template)):
        raise ConfigError(
            "catalog.database", f"'{template}' does not make a database name of letters, digits and '_'",
            remedy="use letters, digits, '_' and the fields {database} and {pipeline}, e.g. 'bronze_{database}'",
        )


def _hive_metastore(value: Any, base_dir: Path | None) -> HiveMetastoreConfig | None:
    if value is None:
        return None
    document = _mapping(value, "catalog.hive_metastore")
    prefix = "catalog.hive_metastore."
    _reject_unknown(document, prefix, {"uris", "derby_path", "warehouse"})
    uris = _optional_string(document, "uris", prefix)
    derby_path = _optional_string(document, "derby_path", prefix)
    if (uris is None) == (derby_path is None):
        raise ConfigError(
            "catalog.hive_metastore", "needs exactly one of uris (a remote metastore) or derby_path (embedded Derby)",
            remedy="set uris: thrift://host:9083 for a shared metastore, or derby_path: FOLDER for one process",
        )
    if uris is not None and not _THRIFT_URIS_PATTERN.match(uris):
        raise ConfigError(
            f"{prefix}uris", f"'{uris}' is not thrift://host:port (comma-separated for several)",
            remedy="set it like thrift://metastore.example.com:9083",
        )
    if derby_path is not None and ("://" in derby_path or ";" in derby_path):
        raise ConfigError(
            f"{prefix}derby_path", f"'{derby_path}' is not a local folder",
            remedy="embedded Derby keeps its files in a local folder; for a shared metastore use uris",
        )
    warehouse = _optional_string(document, "warehouse", prefix)
    return HiveMetastoreConfig(
        uris=uris,
        derby_path=_local_or_uri(derby_path, base_dir) if derby_path is not None else None,
        warehouse=_local_or_uri(warehouse, base_dir) if warehouse is not None else None,
    )


def _table_settings(value: Any, patterns: tuple[str, ...]) -> dict[str, TableSettings]:
    """`sink.tables`: per-table overrides keyed by a followed 'database.table' (a typo must not pass unnoticed)."""
    if value is None:
        return {}
    document = _mapping(value, "sink.tables")
    overrides: dict[str, TableSettings] = {}
    for name, entry in document.items():
        prefix = f"sink.tables.{name}."
        if not isinstance(name, str) or "*" in name or not _PATTERN_PATTERN.match(name):
            raise ConfigError(f"sink.tables.{name}", "is not a 'database.table' name",
                              remedy="key each override by one table, e.g. shop.orders")
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            raise ConfigError(
                f"sink.tables.{name}", f"is not among source.tables ({', '.join(patterns)})",
                remedy="fix the name, or add the table to source.tables",
            )
        entry_doc = _mapping(entry, f"sink.tables.{name}")
        _reject_unknown(
            entry_doc, prefix,
            {"deletion_vectors", "change_data_feed", "mode", "metadata_columns", "freshness", "schema_policy",
             "columns", "mask", "maintenance", "iceberg", "filter", "partition_by", "cluster_by", "types"},
        )
        overrides[name] = TableSettings(
            deletion_vectors=_boolean(entry_doc, "deletion_vectors", prefix),
            change_data_feed=_boolean(entry_doc, "change_data_feed", prefix),
            mode=_table_mode(entry_doc, prefix),
            maintenance=None if entry_doc.get("maintenance") is None else _maintenance(
                _mapping(entry_doc["maintenance"], f"{prefix}maintenance"), f"{prefix}maintenance."),
            metadata_columns=_boolean(entry_doc, "metadata_columns", prefix),
            freshness=_freshness(entry_doc, prefix),
            schema_policy=_schema_policy(entry_doc, prefix),
            columns=_column_rules(entry_doc, prefix),
            filter=_row_filter(entry_doc, prefix),
            iceberg=_boolean(entry_doc, "iceberg", prefix),
        )
        overrides[name] = replace(overrides[name], layout=_layout(entry_doc, prefix, overrides[name]))
        if overrides[name].metadata_columns:
            _check_metadata_columns(overrides[name].mode, True, prefix)
    return overrides


def _maintenance(document: Mapping[str, Any], prefix: str) -> MaintenanceConfig:
    """`sink.tables.<table>.maintenance`: each key checked, each default from `MaintenanceConfig`."""
    known = {item.name for item in fields(MaintenanceConfig)}
    _reject_unknown(document, prefix, known)
    enabled = _boolean(document, "enabled", prefix)
    target = document.get("compact_target_file_bytes")
    zorder = document.get("zorder_by") or []
    if isinstance(zorder, str):
        zorder = [zorder]
    if not isinstance(zorder, list) or not all(isinstance(column, str) and column for column in zorder):
        raise ConfigError(f"{prefix}zorder_by", "must be a list of column names")
    return MaintenanceConfig(
        enabled=_default(MaintenanceConfig, "enabled") if enabled is None else enabled,
        compact_target_file_bytes=None if target is None else _integer(
            document, "compact_target_file_bytes", prefix, low=1024, high=1 << 40),
        min_files_to_compact=_integer(document, "min_files_to_compact", prefix,
                                      default=_default(MaintenanceConfig, "min_files_to_compact"), low=2,
                                      high=1_000_000),
        zorder_by=tuple(zorder),
        vacuum_retention_hours=_hours(document, "vacuum_retention_hours", prefix),
        keep_time_travel_hours=_hours(document, "keep_time_travel_hours", prefix)
        or _default(MaintenanceConfig, "keep_time_travel_hours"),
        checkpoint_every_commits=_integer(document, "checkpoint_every_commits", prefix,
                                          default=_default(MaintenanceConfig, "checkpoint_every_commits"), low=1,
                                          high=1_000_000),
    )


def _hours(document: Mapping[str, Any], key: str, prefix: str) -> float | None:
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 24 * 365 * 100:
        raise ConfigError(f"{prefix}{key}", f"must be a number of hours (0 or more), got '{value}'")
    return float(value)


def _freshness(document: Mapping[str, Any], prefix: str) -> Freshness | None:
    """`freshness: {fail_after_minutes, warn_after_minutes}`: whole minutes, a warning before the failure."""
    value = document.get("freshness")
    if value is None:
        return None
    where = f"{prefix}freshness."
    entry = _mapping(value, f"{prefix}freshness")
    _reject_unknown(entry, where, {"fail_after_minutes", "warn_after_minutes"})
    fail = _integer(entry, "fail_after_minutes", where, low=1, high=_MINUTES_A_YEAR)
    warn = None if entry.get("warn_after_minutes") is None else _integer(
        entry, "warn_after_minutes", where, low=1, high=_MINUTES_A_YEAR
    )
    if warn is not None and warn >= fail:
        raise ConfigError(f"{where}warn_after_minutes", f"must be below fail_after_minutes ({fail}), got {warn}",
                          remedy="warn before the failure, or leave warn_after_minutes out")
    return Freshness(fail_after_minutes=fail, warn_after_minutes=warn)


_MINUTES_A_YEAR = 525_600


def _row_filter(document: Mapping[str, Any], prefix: str) -> str | None:
    """`filter: "<predicate>"`: read here, so a predicate outside the subset fails at load; its columns and their
    types are checked against the table's schema when it is read (cdc_lib.changes.row_filter)."""
    value = document.get("filter")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{prefix}filter", "must be a SQL predicate, as a string")
    try:
        parse_filter(value)
    except FilterSyntaxError as exc:
        raise ConfigError(f"{prefix}filter", str(exc),
                          remedy="write the predicate in the subset docs/row-filters.md lists") from None
    return value


def _column_rules(document: Mapping[str, Any], prefix: str) -> ColumnRules | None:
    """`columns: {include: [...]} | {exclude: [...]}` and `mask: {column: {hash|redact|truncate|partial: ...}}`.

    Only the shape is checked here; the names are checked against the table's schema when it is read
    (cdc_lib.changes.columns), where an unknown column or an excluded key column is refused.
    """
    if document.get("columns") is None and document.get("mask") is None and document.get("types") is None:
        return None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    if document.get("columns") is not None:
        where = f"{prefix}columns."
        entry = _mapping(document["columns"], f"{prefix}columns")
        _reject_unknown(entry, where, {"include", "exclude"})
        if len(entry) != 1:
            raise ConfigError(f"{prefix}columns", "must hold exactly one of include, exclude",
                              remedy="list the columns to land (include) or the ones to leave out (exclude)")
        ((key, names),) = entry.items()
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{where}{key}", "must be a non-empty list of column names")
        if key == "include":
            include = tuple(names)
        else:
            exclude = tuple(names)
    masks: dict[str, ColumnMask] = {}
    for column, spec in _mapping(document.get("mask") or {}, f"{prefix}mask").items():
        masks[str(column)] = _column_mask(spec, f"{prefix}mask.{column}")
    types: dict[str, TypeOverride] = {}
    for column, kind in _mapping(document.get("types") or {}, f"{prefix}types").items():
        if kind not in TYPE_OVERRIDES:
            raise ConfigError(f"{prefix}types.{column}", f"must be one of: {', '.join(TYPE_OVERRIDES)}",
                              remedy="only a TINYINT(1) column can be overridden, to boolean")
        left_out = column in exclude or (include is not None and column not in include)
        if left_out or column in masks:
            raise ConfigError(f"{prefix}types.{column}",
                              f"names a column that is {'left out' if left_out else 'masked'}",
                              remedy="a type override applies to a column landed as is: drop one of the two")
        types[str(column)] = cast(TypeOverride, kind)
    return ColumnRules(include=include, exclude=exclude, mask=masks, types=types)


def _layout(document: Mapping[str, Any], prefix: str, settings: TableSettings) -> TableLayout | None:
    """`partition_by: [...]` or `cluster_by: [...]` (docs/layout.md), checked against the table's other settings.

    Mirror tables only (checked by the caller, which knows the pipeline's mode): a soft-delete or history
    re-snapshot MERGEs into its table, which is not proven to keep a layout. A layout column must land in clear:
    a left-out column is not in the table, and a masked one would lay the files out by the mask's output (a hash
    per row, a constant). Whether the column exists is checked against the source schema at the snapshot
    (`cdc_lib.sink.spark.layout`).
    """
    chosen = {key: document[key] for key in ("partition_by", "cluster_by") if document.get(key) is not None}
    if not chosen:
        return None
    if len(chosen) > 1:
        raise ConfigError(f"{prefix}cluster_by", "cannot be set with partition_by: Delta clusters a table or "
                          "partitions it, not both", remedy="keep one of partition_by, cluster_by")
    ((key, names),) = chosen.items()
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{prefix}{key}", "must be a non-empty list of column names")
    if len(set(names)) != len(names):
        raise ConfigError(f"{prefix}{key}", "names a column twice")
    if key == "cluster_by" and len(names) > 4:
        raise ConfigError(f"{prefix}cluster_by", "takes at most 4 columns (Delta's limit for liquid clustering)")
    rules = settings.columns
    for name in names:
        if rules is not None and (name in rules.exclude or (rules.include is not None and name not in rules.include)):
            raise ConfigError(f"{prefix}{key}", f"names column '{name}', which the table's column rules leave out",
                              remedy=f"land '{name}' (sink.tables.<t>.columns) or lay the table out by another column")
        if rules is not None and name in rules.mask:
            raise ConfigError(f"{prefix}{key}", f"names column '{name}', which is masked: the files would be laid "
                              "out by the mask's output", remedy="lay the table out by a column landed in clear")
    if key == "cluster_by" and settings.maintenance is not None and settings.maintenance.zorder_by:
        raise ConfigError(f"{prefix}maintenance.zorder_by", "cannot be set on a clustered table: OPTIMIZE "
                          "clusters it by cluster_by (Delta refuses ZORDER BY on a clustered table)",
                          remedy="drop maintenance.zorder_by, or cluster_by instead of it")
    return TableLayout(partition_by=tuple(names)) if key == "partition_by" else TableLayout(cluster_by=tuple(names))


def _column_mask(value: Any, key: str) -> ColumnMask:
    entry = _mapping(value, key)
    _reject_unknown(entry, f"{key}.", {"hash", "redact", "truncate", "partial"})
    if len(entry) != 1:
        raise ConfigError(key, "must hold exactly one of hash, redact, truncate, partial")
    ((kind, spec),) = entry.items()
    where = f"{key}.{kind}"
    if kind == "hash":
        options = _mapping(spec, where)
        _reject_unknown(options, f"{where}.", {"key_env"})
        return ColumnMask(kind="hash", key_env=_string(options, "key_env", f"{where}."))
    if kind == "redact":
        # `redact: null` writes NULL; `redact: 'xxx'` a constant (checked against the column's type later).
        if spec is not None and (not isinstance(spec, (str, int, float)) or isinstance(spec, bool)):
            raise ConfigError(where, f"must be null or a constant, got {type(spec).__name__}")
        return ColumnMask(kind="redact", value=None if spec is None else str(spec))
    if kind == "truncate":
        return ColumnMask(kind="truncate", length=_integer({"truncate": spec}, "truncate", f"{key}.", low=0,
                                                           high=1 << 30))
    options = _mapping(spec, where)
    _reject_unknown(options, f"{where}.", {"keep_first", "keep_last", "fill"})
    fill = _string(options, "fill", f"{where}.", default="*")
    if len(fill) != 1:
        raise ConfigError(f"{where}.fill", f"must be one character, got '{fill}'")
    return ColumnMask(
        kind="partial", fill=fill,
        keep_first=_integer(options, "keep_first", f"{where}.", default=0, low=0, high=1 << 30),
        keep_last=_integer(options, "keep_last", f"{where}.", default=0, low=0, high=1 << 30),
    )


def _check_iceberg(settings: TableSettings, prefix: str, *, deletion_vectors: bool) -> None:
    """`iceberg: true`: binlake writes the table's Iceberg metadata itself (cdc_lib/sink/iceberg, docs/iceberg.md),
    listing the Parquet files of the Delta version. Refused where that listing would not be the table's rows."""
    if importlib.util.find_spec("pyiceberg") is None:  # found, not imported: loading the config stays fast
        raise ConfigError(f"{prefix}iceberg", "needs the pyiceberg package, which is not installed",
                          remedy="pip install binlake[iceberg]")
    if deletion_vectors if settings.deletion_vectors is None else settings.deletion_vectors:
        raise ConfigError(f"{prefix}iceberg", "cannot be exact with deletion vectors: Iceberg readers would not see "
                          "the rows a Delta deletion vector removes", remedy=f"set {prefix}deletion_vectors: false")


def _check_metadata_columns(mode: TableMode | None, metadata_columns: bool, prefix: str) -> None:
    """Metadata columns are a mirror's: soft-delete and history tables carry their own commit times."""
    if metadata_columns and mode not in (None, "mirror"):
        raise ConfigError(
            f"{prefix}metadata_columns", f"applies to mirror tables only, not mode {mode}",
            remedy="leave it out: soft_delete and history tables carry their own commit times (docs/table-modes.md)",
        )


def _schema_policy(document: Mapping[str, Any], prefix: str) -> SchemaPolicy | None:
    value = document.get("schema_policy")
    if value is None:
        return None
    for policy in SCHEMA_POLICIES:
        if value == policy:
            return policy
    raise ConfigError(
        f"{prefix}schema_policy", f"must be one of {', '.join(SCHEMA_POLICIES)}, got {value!r}",
        remedy="leave it out for evolve (docs/ddl.md#schema-policies)",
    )


def _table_mode(document: Mapping[str, Any], prefix: str) -> TableMode | None:
    value = document.get("mode")
    if value is None:
        return None
    for mode in TABLE_MODES:
        if value == mode:
            return mode
    raise ConfigError(
        f"{prefix}mode", f"'{value}' is not one of: {', '.join(TABLE_MODES)}",
        remedy=f"set {prefix}mode to mirror (the default), soft_delete or history (docs/table-modes.md)",
    )


def _endpoint(document: Mapping[str, Any], prefix: str) -> str | None:
    value = _optional_string(document, "endpoint_url", prefix)
    if value is not None and not _ENDPOINT_PATTERN.match(value):
        raise ConfigError(
            f"{prefix}endpoint_url", f"'{value}' is not an http(s)://host[:port] URL",
            remedy=f"set {prefix}endpoint_url like https://s3.example.com or http://127.0.0.1:9000, or remove it",
        )
    return value.rstrip("/") if value else None


def _region(document: Mapping[str, Any], prefix: str) -> str | None:
    value = _optional_string(document, "region", prefix)
    if value is not None and not _REGION_PATTERN.match(value):
        raise ConfigError(
            f"{prefix}region", f"'{value}' is not a region name", remedy=f"set {prefix}region like eu-west-1"
        )
    return value


def _boolean(document: Mapping[str, Any], key: str, prefix: str) -> bool | None:
    value = document.get(key)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{prefix}{key}", f"must be true or false, got '{value}'")


def _credentials(document: Mapping[str, Any], prefix: str) -> S3Credentials | None:
    key = _optional_string(document, "access_key_id", prefix)
    secret = _optional_string(document, "secret_access_key", prefix)
    token = _optional_string(document, "session_token", prefix)
    if key is None and secret is None and token is None:
        return None
    if key is None or secret is None:
        missing = "access_key_id" if key is None else "secret_access_key"
        # The message names keys only: a value here may be a secret.
        raise ConfigError(
            f"{prefix}{missing}", "is required when the other credential key is set",
            remedy=f"set both {prefix}access_key_id and {prefix}secret_access_key "
            "(e.g. \"${AWS_SECRET_ACCESS_KEY}\"), or neither to use the standard AWS credential chain",
        )
    return S3Credentials(key, secret, token)


def _zero_date_policy(value: Any) -> ZeroDatePolicy:
    # YAML reads a bare `null` as None: both spellings mean the default.
    if value is None or value == "null":
        return "null"
    if value == "error":
        return "error"
    raise ConfigError("source.zero_dates", f"'{value}' is not one of: null, error")


def _writer(value: Any, key: str) -> Writer:
    if value is None:
        return "auto"
    for writer in WRITERS:
        if value == writer:
            return writer
    raise ConfigError(
        key, f"'{value}' is not one of: {', '.join(WRITERS)}",
        remedy="leave it out (auto: delta-rs where it writes the table exactly, else Spark), or name an engine",
    )


def _local_or_uri(value: str, base_dir: Path | None) -> str:
    if "://" in value or base_dir is None or Path(value).is_absolute():
        return value
    return str((base_dir / value).resolve())


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping, got {type(value).__name__}")
    return value


def _reject_unknown(document: Mapping[str, Any], prefix: str, known: set[str]) -> None:
    for key in document:
        if key not in known:
            raise ConfigError(f"{prefix}{key}", f"unknown key (known: {', '.join(sorted(known))})")


def _required(document: Mapping[str, Any], key: str, prefix: str) -> Any:
    if key not in document or document[key] is None:
        raise ConfigError(f"{prefix}{key}", "is required")
    return document[key]


def _string(
    document: Mapping[str, Any], key: str, prefix: str, *, default: str | None = None, allow_empty: bool = False
) -> str:
    if document.get(key) is None:
        if default is None:
            raise ConfigError(f"{prefix}{key}", "is required")
        return default
    value = document[key]
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{prefix}{key}", f"must be a string, got {type(value).__name__}")
    text = str(value)
    if not text and not allow_empty:
        raise ConfigError(f"{prefix}{key}", "must not be empty")
    return text


def _optional_string(document: Mapping[str, Any], key: str, prefix: str) -> str | None:
    return _string(document, key, prefix) if document.get(key) is not None else None


def _integer(
    document: Mapping[str, Any], key: str, prefix: str, *, default: int | None = None, low: int, high: int
) -> int:
    if document.get(key) is None:
        if default is None:
            raise ConfigError(f"{prefix}{key}", "is required")
        return default
    value = document[key]
    if isinstance(value, bool):
        raise ConfigError(f"{prefix}{key}", "must be an integer, got a boolean")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{prefix}{key}", f"must be an integer, got '{value}'") from None
    if not low <= number <= high:
        raise ConfigError(f"{prefix}{key}", f"must be between {low} and {high}, got {number}")
    return number
