"""Whether this Spark session may commit to a Delta UniForm table without leaving its Iceberg metadata behind.

Delta writes a UniForm table's Iceberg metadata in a post-commit hook, with the converter of the
`io.delta:delta-iceberg` jar. Without that jar, delta-spark 4.0.1 commits the change to the Delta log first and
only then fails (`DELTA_UNIVERSAL_FORMAT_CONVERSION_FAILED` … `DELTA_MISSING_ICEBERG_CLASS`): the Delta table moves
on, the Iceberg metadata stays at the version before, and the write reports an error. binlake asks before each
Spark commit instead, and stops the table with its remedy while nothing is written (docs/iceberg.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_lib.errors import UniformWriteError
from cdc_lib.sink import delta_log
from cdc_lib.sink.choice import uniform_formats
from cdc_lib.sink.commits import UNIFORM_FORMATS
from cdc_lib.sink.spark.jars import DELTA_ICEBERG
from cdc_lib.sink.storage import SinkStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The class delta-spark 4.0.1 loads by name to write Iceberg metadata (`ProvidesUniFormConverters`).
ICEBERG_CONVERTER = "org.apache.spark.sql.delta.icebergShaded.IcebergConverter"


def converter_loadable(spark: SparkSession) -> bool:
    """Whether the session's JVM can load Delta's Iceberg converter, through the class loader Delta uses for it."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]

    jvm = spark.sparkContext._jvm
    assert jvm is not None, "a running SparkSession has a JVM"
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(ICEBERG_CONVERTER, False, loader)
    except Py4JError:  # ClassNotFoundException, as py4j raises it
        return False
    return True


#: Per table path: the newest version whose properties were read, and the UniForm formats as of it. A later
#: check reads only the commits after that version (usually binlake's own one), not the log back to its last
#: checkpoint, which `delta_log.table_detail` reads whole when no commit since carries a `metaData` action
#: (~10 ms for 40 commits on local disk, more on S3: as much as a batch commit's own fixed cost).
_known: dict[str, tuple[int, frozenset[str]]] = {}
#: More commits than this since the last check: read the properties whole again.
_INCREMENTAL_COMMITS = 32


def _formats_now(path: str, storage: SinkStorage) -> frozenset[str]:
    """The UniForm formats of the table at `path` as of its newest version (empty: none, or no table)."""
    newest = delta_log.newest_version(path, storage=storage)
    if newest is None:
        _known.pop(path, None)
        return frozenset()
    known = _known.get(path)
    if known is not None and known[0] <= newest and newest - known[0] <= _INCREMENTAL_COMMITS \
            and not _metadata_changed(storage, path, known[0], newest):
        formats = known[1]
    else:
        detail = delta_log.table_detail(path, storage=storage)
        formats = frozenset(uniform_formats(detail.properties)) if detail is not None else frozenset()
    _known[path] = (newest, formats)
    return formats


def _metadata_changed(storage: SinkStorage, path: str, after: int, through: int) -> bool:
    """Whether a commit in (after, through] may have changed the table's properties (a `metaData` action, or a
    commit file already cleaned up: then the properties are read whole)."""
    for version in range(after + 1, through + 1):
        content = storage.read_bytes(delta_log.commit_file(path, version))
        if content is None or b'"metaData"' in content:
            return True
    return False


def check_uniform_writable(spark: SparkSession, path: str, *, storage: SinkStorage, table: str | None) -> None:
    """Raise UniformWriteError when the table at `path` has UniForm Iceberg metadata this session cannot write.

    Read from the log (no Spark job); a table without UniForm, or not there yet, passes. Hudi is not checked:
    binlake has never written a Hudi UniForm table, and Delta refuses its commits the same loud way.
    """
    if "iceberg" not in _formats_now(path, storage):
        return
    if converter_loadable(spark):
        return
    name = table or path
    raise UniformWriteError(
        f"{name}'s Delta table has UniForm Iceberg metadata ({UNIFORM_FORMATS} = iceberg, set outside binlake), "
        f"and this Spark session has no Iceberg converter ({DELTA_ICEBERG.coordinate}, which binlake cannot fetch: "
        "Maven Central does not serve it). Delta would commit the change and then fail to convert it, leaving "
        "the Iceberg metadata behind the Delta table, so nothing was written",
        remedy=f"turn UniForm off on the table (ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES "
        f"('{UNIFORM_FORMATS}'), then run the sync again), or put a {DELTA_ICEBERG.file_name} you have on "
        "spark.conf spark.jars; docs/iceberg.md",
        table=table,
    )


__all__ = ["ICEBERG_CONVERTER", "check_uniform_writable", "converter_loadable"]
