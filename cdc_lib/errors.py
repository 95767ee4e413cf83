"""One root error for binlake; each subclass keeps its fields and names the remedy."""

from __future__ import annotations

from typing import Any


class BinlakeError(Exception):
    """Root of every error binlake raises on purpose.

    The message a person sees is ``"<cause> — remedy: <remedy>"`` on one line.
    """

    exit_code: int = 2
    #: Whether the same call can succeed later without a person acting (orchestrators retry these).
    retryable: bool = False

    def __init__(
        self, cause: str, *, remedy: str, table: str | None = None, retryable: bool | None = None
    ) -> None:
        self.cause = cause
        self.remedy = remedy
        self.table = table
        if retryable is not None:
            self.retryable = retryable
        prefix = f"[{table}] " if table else ""
        super().__init__(f"{prefix}{cause} — remedy: {remedy}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other constructor arguments than `args` holds; Dagster moves errors between
        # processes, so rebuild from the fields instead of calling __init__ again.
        return _rebuild, (type(self), self.args, dict(self.__dict__))


def _rebuild(cls: type[BinlakeError], args: tuple[Any, ...], fields: dict[str, Any]) -> BinlakeError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


class ConfigError(BinlakeError):
    """The configuration file is missing, malformed or names a bad value."""

    def __init__(self, key: str, problem: str, *, remedy: str | None = None) -> None:
        self.key = key
        super().__init__(
            f"config key '{key}': {problem}",
            remedy=remedy or f"fix '{key}' in the config file",
        )


class SourceConnectionError(BinlakeError):
    """The MySQL/MariaDB server cannot be reached (retryable) or refuses the credentials (not)."""

    retryable = True


class ServerSettingsError(BinlakeError):
    """The server's binlog settings make CDC impossible or unsafe."""

    def __init__(self, setting: str, actual: str, expected: str, *, remedy: str | None = None) -> None:
        self.setting = setting
        self.actual = actual
        self.expected = expected
        super().__init__(
            f"server setting {setting} is '{actual}', binlake needs '{expected}'",
            remedy=remedy or f"set {setting}={expected} in the server's my.cnf (or SET GLOBAL) and restart it",
        )


class MissingGrantError(BinlakeError):
    """The replication user lacks a privilege binlake needs."""


class TableError(BinlakeError):
    """A configured table is missing, has no primary key, or cannot be copied."""


class ColumnRulesError(TableError):
    """A table's column projection or masking (`sink.tables.<t>.columns`, `.mask`) does not fit its schema."""


class BooleanValueError(ColumnRulesError):
    """A column landed as boolean (`sink.tables.<t>.types.<column>: boolean`) holds a value other than 0, 1, NULL."""

    def __init__(self, table: str, column: str, value: str | None = None) -> None:
        self.column = column
        shown = f" {value}" if value else " a value other than 0 and 1"
        super().__init__(
            f"column '{column}' is landed as boolean (sink.tables.{table}.types.{column}), but holds{shown}: "
            "only 0 (false), 1 (true) and NULL have a boolean meaning, so binlake stops rather than guess",
            remedy=f"correct the rows at the source (e.g. UPDATE {table} SET {column} = 1 WHERE {column} NOT IN "
            f"(0, 1)), or remove sink.tables.{table}.types.{column} to land the column as a number; then "
            f"re-snapshot: binlake snapshot --table {table}",
            table=table,
        )


class RoutingError(TableError):
    """A source routed into a shared Delta table (`sink.routes`) cannot land there exactly: its schema differs
    from its siblings', or the write asks for what routing does not support yet (docs/routing.md)."""


class LayoutError(TableError):
    """A table's partition or clustering columns (`sink.tables.<t>.partition_by`, `.cluster_by`) do not fit it."""


class SchemaChangeError(BinlakeError):
    """The source table's schema changed in a way binlake will not guess at."""


class SchemaChangeAwaitingApproval(SchemaChangeError):
    """A table under `schema_policy: approve` met a schema change: it waits until a person approves or rejects it."""


class BinlogPurgedError(BinlakeError):
    """A stored position is older than the oldest binlog the server still keeps."""


class OffsetStoreError(BinlakeError):
    """The offset store cannot be read or written; retryable when the store was unreachable or busy."""


class SinkError(BinlakeError):
    """The Delta sink (a folder or an S3 prefix) cannot be reached, read or written."""


class DeltaWriteError(TableError):
    """Writing one table's batch into Delta failed for a reason that belongs to that table."""


class UniformWriteError(DeltaWriteError):
    """A table has Delta UniForm (Iceberg metadata beside its log) that this process cannot keep current."""


class IcebergMetadataError(TableError):
    """A table's Iceberg metadata (`sink.tables.<t>.iceberg`, docs/iceberg.md) cannot describe its Delta version."""


class ConcurrentRunError(BinlakeError):
    """Another runner holds the pipeline, or won a compare-and-swap race."""

    exit_code = 3
    retryable = True


class NotSnapshottedError(BinlakeError):
    """A table has no snapshot yet, so it cannot be synced or reconciled."""


class DeltaStateError(BinlakeError):
    """The Delta table disagrees with the offset store in a way that needs a person."""


class ServerHistoryError(BinlakeError):
    """The server does not hold the history a stored offset refers to: another server, or a `RESET MASTER`."""


class ZeroDateError(TableError):
    """A row holds a MySQL zero or partial date and `source.zero_dates` is `error`."""

    def __init__(self, table: str, column: str, value: str | None = None) -> None:
        self.column = column
        shown = f" ('{value}')" if value else ""
        super().__init__(
            f"column '{column}' holds a zero or partial date{shown}, and source.zero_dates is 'error'",
            remedy=f"correct the rows at the source (e.g. UPDATE {table} SET {column} = NULL WHERE {column} = "
            f"'0000-00-00' OR MONTH({column}) = 0 OR DAY({column}) = 0), or set source.zero_dates: null to "
            f"store them as NULL; then re-snapshot: binlake snapshot --table {table}",
            table=table,
        )


class ZeroDateKeyError(ZeroDateError):
    """A primary-key column holds a zero or partial date: NULL in Delta under any `source.zero_dates`, so no key."""

    def __init__(self, table: str, column: str, value: str | None = None) -> None:
        self.column = column
        shown = f" ('{value}')" if value else ""
        BinlakeError.__init__(
            self,
            f"primary-key column '{column}' holds a zero or partial date{shown}, which Delta holds only as NULL: "
            "two such keys would become one, and their updates and deletes would match no row "
            "(source.zero_dates does not apply to key columns)",
            remedy=f"correct the keys at the source (UPDATE {table} SET {column} = <a real date> WHERE {column} = "
            f"'0000-00-00' OR YEAR({column}) = 0 OR MONTH({column}) = 0 OR DAY({column}) = 0), or remove the table "
            f"from source.tables; then re-snapshot: binlake snapshot --table {table}",
            table=table,
        )


class KeyMappingError(TableError):
    """A primary-key column whose type the mapping cannot keep distinct: two source keys would be one in Delta."""

    def __init__(self, table: str, column: str, problem: str, *, remedy: str) -> None:
        self.column = column
        super().__init__(f"primary-key column '{column}' {problem}", remedy=remedy, table=table)


class SurrogateTextError(TableError):
    """A snapshot read a text value holding a surrogate code point: MariaDB stores it, a Delta string cannot."""

    def __init__(self, table: str, column: str) -> None:
        self.column = column
        super().__init__(
            f"column '{column}' holds a surrogate code point (U+D800–U+DFFF), which MariaDB stores but a Delta "
            "string (UTF-8) cannot hold; the JDBC driver would have written U+FFFD in its place",
            remedy=f"correct the value on the source (HEX({column}) shows ED A0–ED BF in UTF-8, D800–DFFF in UCS-2 "
            f"or UTF-32), or make the column VARBINARY; then re-snapshot: binlake snapshot --table {table}",
            table=table,
        )


class RowDecodeError(TableError):
    """A followed table's row event could not be decoded or folded (bad bytes, an unexpected value)."""


class UnreadableEventError(TableError):
    """The binlog holds an event that may change a followed table's rows and that binlake cannot read exactly."""


class ServerMismatchError(BinlakeError):
    """A connection reached another server than the one the control connection read positions from.

    Retryable: after a DNS failover the next run's control connection reaches the new server too, and
    its positions then belong to it; behind a load balancer the error comes back until the config changes.
    """

    retryable = True

    def __init__(self, role: str, expected: str, actual: str, *, host: str) -> None:
        self.role = role
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"the {role} connection to {host} reached another server ({actual}) than the control connection "
            f"({expected}); its binlog positions would not mean the same thing, so nothing was read or written",
            remedy="point source.host at one server (the primary or one replica), not at a load balancer or a "
            "name that resolves to several servers; after a DNS failover, run again",
        )


class WatermarkRaceError(TableError):
    """A table's schema changed (DDL) each time binlake tried to pin it to a snapshot's low watermark."""

    retryable = True


class FencedCommitError(BinlakeError):
    """The Delta log holds a claim newer than the commit being made (cdc_lib/sink/fencing.py): a re-snapshot began on
    the table, or the snapshot this commit belongs to was taken over. Nothing was written; the actor that holds
    the newer claim owns the table now."""

    retryable = True


class SilentConnectionError(SourceConnectionError):
    """A connection stayed silent past its bound (`source.network_timeout_seconds`): neither closed nor answering.

    Retryable: nothing past the last committed batch was applied; the next run connects afresh.
    """

    retryable = True


class BinlogFileError(BinlakeError):
    """A binlog file given to `binlake binlog decode` cannot be read as one: no magic bytes, an event cut short, a
    start position inside an event, an event type no reader knows. What was decoded before it stands."""

