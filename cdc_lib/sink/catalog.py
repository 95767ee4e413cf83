"""Naming each Delta table in a Spark catalog, so that users query `shop.orders` instead of a path.

(`cdc_lib.source.discovery` is something else: the source tables a pipeline follows.)

When `catalog.enabled` is set, a table is registered after its snapshot commits (the first one and
every re-snapshot), and checked again after a schema change evolved it:

    CREATE NAMESPACE IF NOT EXISTS <catalog>.<database>
    CREATE TABLE IF NOT EXISTS <catalog>.<database>.<table> USING DELTA LOCATION '<table path>'

The entry holds only the location: Delta keeps the schema in the table's own log, so every reader that
resolves the name through Delta sees added columns without a catalog update. A name already taken by
anything else than this Delta table (another location, another format, a view) is refused, never
repointed: Delta refuses table properties on a CREATE over an existing table and would record an
ALTER of them as a commit of its own, so a catalog entry cannot say which pipeline made it.

A failed registration never loses data: the Delta commit and the offsets are saved first. It is
reported (a warning in the log, `SnapshotResult.catalog_error`, a non-zero `binlake snapshot`) with the
remedy, and `binlake register` retries it without re-reading anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from cdc_lib.config.model import CATALOG_NAME_PART, CatalogConfig, PipelineConfig
from cdc_lib.errors import BinlakeError, TableError
from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import quote_identifier
from cdc_lib.sink import delta_log
from cdc_lib.sink.storage import SinkStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")


class SnapshottedTables(Protocol):
    """A pipeline's stored state, as far as registering reads it: the tables that have a snapshot."""

    @property
    def tables(self) -> Mapping[str, object]: ...


class RegistrationContext(Protocol):
    """What registering a pipeline's tables needs of it: a `PipelineContext` (cdc_lib.state.context), named
    here by these few members so that the sink stays below `state`."""

    @property
    def config(self) -> PipelineConfig: ...

    @property
    def sink(self) -> SinkStorage: ...

    def table_path(self, name: str) -> str: ...

    def spark(self) -> SparkSession: ...

    def read_state(self) -> SnapshottedTables: ...


class CatalogRegistrationError(BinlakeError):
    """A Delta table could not be named in the catalog; its data and offsets are untouched."""


@dataclass(frozen=True, kw_only=True)
class CatalogName:
    catalog: str
    database: str
    table: str

    @property
    def qualified(self) -> str:
        """`catalog.database.table`, as a user types it."""
        return f"{self.catalog}.{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        return ".".join(quote_identifier(part) for part in (self.catalog, self.database, self.table))

    @property
    def namespace(self) -> str:
        return f"{quote_identifier(self.catalog)}.{quote_identifier(self.database)}"


@dataclass(frozen=True, kw_only=True)
class Registration:
    """A source table (`db.table`), the catalog name it has, and the columns a reader of that name sees."""

    table: str
    name: str
    location: str
    created: bool
    columns: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class RegistrationOutcome:
    """One table's registration or the error that prevented it (`binlake register` reports both)."""

    table: str
    registration: Registration | None = None
    error: BinlakeError | None = None


def catalog_name(settings: CatalogConfig, *, pipeline: str, table: str) -> CatalogName:
    """The catalog name of source table `table` ('database.table').

    Raises:
        CatalogRegistrationError: when the names hold characters a metastore refuses.
    """
    ref = TableRef.parse(table)
    database = settings.database_name(database=ref.database, pipeline=pipeline)
    for kind, part in (("database", database), ("table", ref.table)):
        if not CATALOG_NAME_PART.fullmatch(part):
            raise CatalogRegistrationError(
                f"catalog {kind} name '{part}' holds characters other than letters, digits and '_'",
                remedy="set catalog.database to a template that makes a plain name (e.g. 'bronze_{database}' only "
                "helps when the source name is plain), or register this table by hand and leave it out",
                table=table,
            )
    return CatalogName(catalog=settings.name, database=database, table=ref.table)


def check_session(spark: SparkSession, settings: CatalogConfig) -> None:
    """The running session must carry the metastore this pipeline names.

    A SparkSession is built once per process; a second pipeline with another metastore (or a session
    built before the catalog was configured) would otherwise register in the wrong place, silently.
    """
    running = dict(spark.sparkContext.getConf().getAll())
    running["spark.sql.catalogImplementation"] = spark.conf.get("spark.sql.catalogImplementation", "in-memory") or ""
    for key, wanted in settings.spark_conf().items():
        # Spark stores the warehouse folder qualified (file:/...).
        if not same_location(running.get(key, ""), wanted):
            raise CatalogRegistrationError(
                f"this process's SparkSession has {key}={running.get(key) or '(unset)'}, but catalog.hive_metastore "
                f"needs '{wanted}' (a session's metastore is fixed when it starts)",
                remedy="run this pipeline in a process of its own (pipelines sharing a process must share one "
                "metastore), then run `binlake register`",
            )


def register_table(
    spark: SparkSession, settings: CatalogConfig, *, pipeline: str, table: str, location: str
) -> Registration:
    """Name the Delta table at `location` in the catalog, or find it already named there.

    Args:
        table: the source table, 'database.table'.
        location: the Delta table's path (a local folder or s3a://...).

    Raises:
        CatalogRegistrationError: the name is taken by something else, or the catalog refused.
    """
    name = catalog_name(settings, pipeline=pipeline, table=table)
    check_session(spark, settings)
    created = False
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.namespace}")
        if not spark.catalog.tableExists(name.qualified):
            # IF NOT EXISTS: another process may register the name between the check and here; the
            # description below then decides whether that registration is this table's.
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name.quoted} USING DELTA LOCATION {_sql_string(location)}")
            created = True
        entry = _describe(spark, name)
    except BinlakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a catalog's own failure (unreachable metastore, no permission)
        raise CatalogRegistrationError(
            f"the catalog refused to register {name.qualified}: {_first_line(exc)}",
            remedy="check the catalog settings (catalog.*, spark.conf) and that the metastore is reachable, then "
            "run `binlake register`",
            table=table,
        ) from None
    provider = entry.get("Provider", "").lower()
    registered_at = entry.get("Location", "")
    if provider != "delta" or not same_location(registered_at, location):
        raise CatalogRegistrationError(
            f"{name.qualified} is already registered as a {entry.get('Type', '?')} {provider or 'table'} at "
            f"{registered_at or '(no location)'}, not as binlake's Delta table at {location}; binlake does not "
            "repoint names it cannot prove it made",
            remedy=f"if that entry is stale (the sink moved), check DESCRIBE TABLE EXTENDED {name.qualified} says "
            f"Type EXTERNAL, DROP TABLE {name.qualified} (an external table's files stay), and run `binlake "
            "register`; otherwise pick another catalog.database, e.g. 'bronze_{database}'",
            table=table,
        )
    columns = _visible_columns(spark, name, table)
    if created:
        log.info("%s: registered as %s", table, name.qualified)
    return Registration(table=table, name=name.qualified, location=location, created=created, columns=columns)


def register_after_snapshot(context: RegistrationContext, table: str) -> tuple[Registration | None, str | None]:
    """Register a table whose snapshot just committed; never raises (the snapshot stands either way).

    Returns:
        The registration (None when registration is off or failed) and the error a person should read.
    """
    settings = context.config.catalog
    if not settings.enabled:
        return None, None
    try:
        return _register(context, table), None
    except Exception as exc:  # noqa: BLE001 - the snapshot is committed and saved: report, never undo it
        error = exc if isinstance(exc, BinlakeError) else CatalogRegistrationError(
            f"registering it failed: {_first_line(exc)}", remedy="run `binlake register` (with -v for details)",
            table=table,
        )
        log.warning("%s: snapshot committed, but %s", table, error)
        return None, str(error)


def check_after_schema_change(context: RegistrationContext, table: str) -> None:
    """After an ALTER evolved the Delta table: the catalog name must show the new columns (logged, never raised).

    Delta-by-location entries take their schema from the Delta log, so this normally finds nothing to do;
    a catalog that keeps its own copy of the columns is caught here instead of misleading readers.
    """
    settings = context.config.catalog
    if not settings.enabled:
        return
    try:
        registration = _register(context, table)
        spark = context.spark()
        delta_columns = tuple(spark.read.format("delta").load(context.table_path(table)).columns)
        if registration.columns != delta_columns:
            raise CatalogRegistrationError(
                f"{registration.name} shows columns {list(registration.columns)}, but the Delta table has "
                f"{list(delta_columns)}",
                remedy=f"refresh the entry: DROP TABLE {registration.name} (external: the files stay), then "
                "`binlake register`",
                table=table,
            )
    except Exception as error:  # noqa: BLE001 - the schema change stands; a catalog problem must not stop the table
        log.warning("%s: schema change applied, but %s", table, error if isinstance(error, BinlakeError)
                    else f"checking its catalog entry failed: {_first_line(error)} — remedy: run `binlake register`")


def register_tables(context: RegistrationContext, tables: list[str] | None = None) -> list[RegistrationOutcome]:
    """(Re)register the snapshotted tables (all by default): `binlake register`.

    Raises:
        CatalogRegistrationError: when `catalog.enabled` is off.
        TableError: when a named table has no snapshot.
    """
    settings = context.config.catalog
    if not settings.enabled:
        raise CatalogRegistrationError(
            "catalog registration is off for this pipeline", remedy="set catalog.enabled: true in the config file"
        )
    snapshotted = sorted(context.read_state().tables)
    unknown = [name for name in tables or [] if name not in snapshotted]
    if unknown:
        raise TableError(
            f"table {unknown[0]} has no snapshot ({', '.join(snapshotted) or 'none'} have)",
            remedy=f"snapshot it first: binlake snapshot --table {unknown[0]}",
            table=unknown[0],
        )
    outcomes = []
    registered: dict[str, RegistrationOutcome] = {}  # by location: routed sources share one table and one entry
    for table in tables or snapshotted:
        location = context.table_path(table)
        if location in registered:
            outcomes.append(replace(registered[location], table=table))
            continue
        try:
            outcome = RegistrationOutcome(table=table, registration=_register(context, table))
        except BinlakeError as error:
            outcome = RegistrationOutcome(table=table, error=error)
        registered[location] = outcome
        outcomes.append(outcome)
    return outcomes


def _register(context: RegistrationContext, table: str) -> Registration:
    location = context.table_path(table)
    if not delta_log.table_exists(location, storage=context.sink):
        raise CatalogRegistrationError(
            f"there is no Delta table at {location} to register",
            remedy=f"snapshot the table first: binlake snapshot --table {table}",
            table=table,
        )
    # A routed source (sink.routes) lands in its target's Delta table, which is registered by the target's name:
    # one catalog entry for the group, never one per shard pointing at the shared location.
    named = context.config.sink.route_for(table) or table
    return register_table(
        context.spark(), context.config.catalog, pipeline=context.config.pipeline, table=named, location=location
    )


def _describe(spark: SparkSession, name: CatalogName) -> dict[str, str]:
    """The detail rows of DESCRIBE TABLE EXTENDED (Type, Location, Provider, ...) as a mapping."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name.quoted}").collect()
    details: dict[str, str] = {}
    in_details = False
    for row in rows:
        key, value = str(row[0] or "").strip(), str(row[1] or "").strip()
        if key.startswith("# Detailed Table Information"):
            in_details = True
        elif in_details and key:
            details[key] = value
    return details


def _visible_columns(spark: SparkSession, name: CatalogName, table: str) -> tuple[str, ...]:
    try:
        # This session may hold the entry's earlier schema in its relation cache.
        spark.catalog.refreshTable(name.qualified)
        return tuple(spark.table(name.quoted).columns)
    except Exception as exc:  # noqa: BLE001 - the entry exists but cannot be read: say so with the remedy
        raise CatalogRegistrationError(
            f"{name.qualified} is registered, but reading it fails: {_first_line(exc)}",
            remedy="check that the catalog's Spark (and its Delta) can read the table's location, then run "
            "`binlake register`",
            table=table,
        ) from None


def same_location(registered: str, location: str) -> bool:
    """Whether a catalog's location names `location`: Spark stores local folders as `file:/...`."""
    return _normal_location(registered) == _normal_location(location)


def _normal_location(location: str) -> str:
    if location.startswith("file:"):
        location = "/" + location.removeprefix("file:").lstrip("/")
    return location.rstrip("/")


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return " ".join(text.splitlines()[0].split())[:300] if text else type(error).__name__


__all__ = [
    "CatalogName",
    "CatalogRegistrationError",
    "Registration",
    "RegistrationContext",
    "RegistrationOutcome",
    "SnapshottedTables",
    "catalog_name",
    "check_after_schema_change",
    "check_session",
    "register_after_snapshot",
    "register_table",
    "register_tables",
    "same_location",
]
