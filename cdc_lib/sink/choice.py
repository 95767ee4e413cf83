"""Which engine writes a table: Spark, or delta-rs where it writes the table exactly as Spark would.

`delta_rs_write_blocker` says what `deltalake` itself cannot write exactly; `spark_only_reasons` adds binlake's own
policy (what it keeps on Spark, e.g. deletion vectors); `writer_for` chooses the engine of a table's share of a
batch (`batch.writer`), before any Spark session starts. Both engines' writes, the snapshot's writer choice
(`delta_rs.snapshot_wave`) and the fences (`fencing`) ask the same questions here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import SpilledChanges
from cdc_lib.config.model import BatchWriter, TableMode
from cdc_lib.errors import BinlakeError
from cdc_lib.sink import delta_log
from cdc_lib.sink.commits import CHANGE_DATA_FEED, DELETION_VECTORS, UNIFORM_FORMATS
from cdc_lib.sink.delta_log import TableDetail
from cdc_lib.sink.storage import SinkStorage

Engine = Literal["spark", "delta-rs"]

#: The writer features delta-rs 1.6.6 writes exactly on binlake's tables (tested, docs/performance.md).
#: `appendOnly` and `invariants` are the legacy features Spark lists in every table-features protocol.
WRITABLE_FEATURES = frozenset({"appendOnly", "invariants", "timestampNtz"})
#: Properties whose `true` (or value) turns on what delta-rs does not write as Spark does.
_SPARK_ONLY_PROPERTIES: Mapping[str, str] = {
    DELETION_VECTORS: "deletion vectors",
    CHANGE_DATA_FEED: "the change data feed",
    "delta.enableTypeWidening": "type widening",
    "delta.enableRowTracking": "row tracking",
    "delta.appendOnly": "an append-only table",
}
#: Table features `deltalake` 1.6.6 writes exactly, as tests/integration/test_engine_interplay.py shows on
#: tables Spark created: `timestampNtz`, `changeDataFeed` (`cdc` files Spark's change feed reads), and
#: `deletionVectors`, whose tables it MERGEs into by rewriting files (it writes no vector; the rows a vector
#: deleted stay deleted). Also `columnMapping` in `name` mode (checked apart: `id` mode is not proven).
DELTA_RS_WRITABLE_FEATURES = frozenset({"appendOnly", "invariants", "timestampNtz", "changeDataFeed",
                                        "deletionVectors"})
#: What a legacy protocol (no feature lists) lets a writer use, by `minWriterVersion`.
_LEGACY_WRITER_FEATURES = {
    2: {"appendOnly", "invariants"}, 3: {"checkConstraints"}, 4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"}, 6: {"identityColumns"},
}
#: delta-rs 1.6.6 keeps exact min/max statistics of a DECIMAL up to this precision (through a 64-bit float),
#: and of a DECIMAL(p, 0) up to 18 digits (a 64-bit integer); beyond, they are rounded or clamped.
DELTA_RS_EXACT_DECIMAL_DIGITS = 15
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
#: Delta's default number of leading columns with statistics (`delta.dataSkippingNumIndexedCols`).
_DEFAULT_INDEXED_COLUMNS = 32


def delta_rs_write_blocker(settings: TableDetail) -> str | None:
    """Why `deltalake` 1.6.6 cannot write this table exactly; None when it can.

    None means a delta-rs MERGE or append leaves a table that Spark and delta-rs read alike, whose log binlake
    reads back, and whose statistics do not make any reader's data skipping miss rows. Otherwise the reason,
    with what to do, for the caller to fall back on Spark (`batch.writer: auto`) or refuse (`delta-rs`).
    """
    features = set(settings.features)
    if not features:  # a legacy protocol: what its writer version allows and the table actually uses
        features = {feature for version, named in _LEGACY_WRITER_FEATURES.items() if version <= settings.writer_version
                    for feature in named}
        features -= {"checkConstraints", "generatedColumns", "identityColumns"} - _in_use(settings)
        if settings.properties.get("delta.columnMapping.mode", "none") == "none":
            features.discard("columnMapping")
    if "checkpointProtection" in features:
        return ("the table has the checkpointProtection feature (left by `DROP FEATURE deletionVectors` when a "
                "re-snapshot turned deletion vectors off), which deltalake 1.6.6 refuses to write; the table stays "
                "on Spark (batch.writer: spark or auto) until it is re-created without it")
    if "columnMapping" in features and settings.properties.get("delta.columnMapping.mode") == "name":
        features.discard("columnMapping")  # by name: delta-rs writes the physical names Spark reads back
    unsupported = sorted(features - DELTA_RS_WRITABLE_FEATURES)
    if unsupported:
        return (f"the table uses Delta features deltalake 1.6.6 does not write exactly: {', '.join(unsupported)}; "
                "write it with Spark (batch.writer: spark or auto)")
    inexact = inexact_statistics(settings.column_types, settings.properties)
    if inexact:
        return (f"deltalake 1.6.6 writes inexact min/max statistics for {', '.join(inexact)} (DECIMAL beyond "
                f"{DELTA_RS_EXACT_DECIMAL_DIGITS} digits, or beyond 18 without a scale: rounded through a float or "
                "clamped to 64 bits), and data skipping then misses rows (binlake's own MERGE prunes by key range); "
                "exclude them from statistics (delta.dataSkippingStatsColumns) or write with Spark")
    return None


def _in_use(settings: TableDetail) -> set[str]:
    """The legacy-protocol features the table shows in use: a CHECK constraint, a generated or identity column."""
    used = set()
    if any(key.startswith("delta.constraints.") for key in settings.properties):
        used.add("checkConstraints")
    if "delta.generationExpression" in settings.column_metadata_keys:
        used.add("generatedColumns")
    if any(key.startswith("delta.identity.") for key in settings.column_metadata_keys):
        used.add("identityColumns")
    return used


def inexact_statistics(column_types: Iterable[tuple[str, str]], properties: Mapping[str, str]) -> list[str]:
    """The columns (name, Delta type) delta-rs would keep statistics for, under the table's `properties`, whose
    min/max it cannot write exactly; for a table that does not exist yet, its first write's columns."""
    column_types = tuple(column_types)
    listed = properties.get("delta.dataSkippingStatsColumns")
    if listed is not None:
        wanted = {name.strip().strip("`") for name in listed.split(",") if name.strip()}
        indexed = [name for name, _ in column_types if name in wanted]
    else:
        count = int(properties.get("delta.dataSkippingNumIndexedCols", _DEFAULT_INDEXED_COLUMNS))
        names = [name for name, _ in column_types]
        indexed = names if count < 0 else names[:count]
    types = dict(column_types)
    inexact = []
    for name in indexed:
        match = _DECIMAL.match(types[name].replace(" ", ""))
        if match is None:
            continue
        precision, scale = int(match.group(1)), int(match.group(2))
        if precision > DELTA_RS_EXACT_DECIMAL_DIGITS and not (scale == 0 and precision <= 18):
            inexact.append(f"{name} ({types[name]})")
    return inexact


class DeltaRsWriterError(BinlakeError):
    """`batch.writer: delta-rs` names a table whose Delta protocol delta-rs cannot write exactly."""


@dataclass(frozen=True)
class WriterChoice:
    engine: Engine
    #: Why Spark writes the table (empty when delta-rs does).
    reason: str = ""


def spark_only_reasons(settings: TableDetail) -> list[str]:
    """What in the table's protocol or properties delta-rs does not write exactly (empty: it does)."""
    reasons = []
    if settings.reader_version > 3 or settings.writer_version > 7:
        reasons.append(f"protocol ({settings.reader_version}, {settings.writer_version}) is newer than delta-rs's")
    elif settings.writer_version < 7 and (settings.reader_version > 1 or settings.writer_version > 2):
        # Legacy versions 2-6 bring column mapping, check constraints, generated or identity columns, CDF.
        reasons.append(f"legacy protocol ({settings.reader_version}, {settings.writer_version})")
    unknown = sorted(settings.features - WRITABLE_FEATURES)
    if unknown:
        reasons.append(f"table features {', '.join(unknown)}")
    for key, what in _SPARK_ONLY_PROPERTIES.items():
        if settings.properties.get(key, "false").lower() == "true":
            reasons.append(f"{what} ({key})")
    if settings.properties.get("delta.columnMapping.mode", "none") != "none":
        reasons.append("column mapping (delta.columnMapping.mode)")
    if settings.properties.get("delta.checkpointPolicy", "classic") != "classic":
        reasons.append("v2 checkpoints (delta.checkpointPolicy)")
    if any(key.startswith("delta.constraints.") for key in settings.properties):
        reasons.append("CHECK constraints")
    if formats := uniform_formats(settings.properties):
        # Named apart from the icebergCompatV2 feature it brings: delta-rs 1.6.6 writes no UniForm metadata at all,
        # so a delta-rs commit would leave the Iceberg (or Hudi) readers of the table behind (docs/iceberg.md).
        reasons.append(f"Delta UniForm ({UNIFORM_FORMATS} = {', '.join(formats)}), whose metadata delta-rs does "
                       "not write")
    if settings.partition_columns:
        # delta-rs would write the partitions, but binlake has not proven its MERGE and appends lay them out as
        # Spark does (docs/layout.md); a clustered table is kept on Spark by its `clustering` feature above.
        reasons.append(f"partition columns ({', '.join(settings.partition_columns)})")
    # What delta-rs itself writes inexactly (e.g. wide DECIMAL statistics) where binlake's policy above allows it.
    blocker = delta_rs_write_blocker(settings)
    if blocker is not None and not reasons:
        reasons.append(blocker)
    return reasons


def uniform_formats(properties: Mapping[str, str]) -> list[str]:
    """The formats Delta UniForm writes beside the table's log (`iceberg`, `hudi`); empty when it has none."""
    listed = properties.get(UNIFORM_FORMATS, "")
    return [name.strip().lower() for name in listed.split(",") if name.strip()]


def spark_log_store(spark_conf: Mapping[str, str] | None) -> str | None:
    """Why a Delta log store set for Spark keeps a table's writes on Spark (None: none is set).

    e.g. the DynamoDB log store for S3: Spark's commits coordinate through it, and delta-rs would bypass it.
    """
    if any(key.startswith("spark.delta.logStore.") for key in spark_conf or {}):
        return "a Delta log store is set under spark.conf (spark.delta.logStore.*), which delta-rs would bypass"
    return None


def writer_for(
    configured: BatchWriter,
    *,
    mode: TableMode,
    changes: TableChanges,
    path: str,
    storage: SinkStorage,
    table: str,
    spark_conf: Mapping[str, str] | None = None,
) -> WriterChoice:
    """The engine that writes `table`'s share of a batch; DeltaRsWriterError when `delta-rs` is forced on a table
    it cannot write.

    No size threshold: delta-rs MERGEd faster than Spark at every source size measured (1k to 1M rows into a
    2M-row table, bench/writer_threshold.py), and a table's batch larger than `batch.max_buffered_changes`
    spills, which goes to Spark (its parts are staged for Spark a bucket at a time, with bounded memory).
    """
    if configured == "spark":
        return WriterChoice("spark", "batch.writer: spark")
    reasons: list[str] = []
    if mode != "mirror":
        reasons.append(f"the {mode} table mode")
    if isinstance(changes, SpilledChanges):
        reasons.append("a spilled batch (batch.max_buffered_changes)")
    if (log_store := spark_log_store(spark_conf)) is not None:
        reasons.append(log_store)
    settings = delta_log.table_detail(path, storage=storage)
    if settings is not None:
        reasons += spark_only_reasons(settings)
    if reasons and configured == "delta-rs":
        raise DeltaRsWriterError(
            f"batch.writer is delta-rs, but delta-rs cannot write this batch exactly: {'; '.join(reasons)}",
            remedy="set batch.writer to auto (Spark writes such tables) or spark"
            + (", or raise batch.max_buffered_changes above the batch's size" if isinstance(changes, SpilledChanges)
               else ""),
            table=table,
        )
    return WriterChoice("spark", "; ".join(reasons)) if reasons else WriterChoice("delta-rs")


__all__ = [
    "DELTA_RS_WRITABLE_FEATURES", "WRITABLE_FEATURES", "DeltaRsWriterError", "Engine", "WriterChoice",
    "delta_rs_write_blocker", "inexact_statistics", "spark_log_store", "spark_only_reasons", "uniform_formats",
    "writer_for",
]
