"""The SparkSession binlake uses: Delta enabled, jars from the cache, everything in UTC.

Spark starts only when a caller asks for it; a batch with nothing to write never calls here.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from cdc_lib.config import SparkConfig
from cdc_lib.jars import ensure_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None
started_sessions = 0
# Where the driver stages a batch as Parquet for Spark to read (see cdc_lib.delta_sink); set from `spark.staging_path`.
STAGING_PATH_CONF = "spark.binlake.stagingPath"


def spark_session(config: SparkConfig) -> SparkSession:
    """Return the process's SparkSession, building it on first use."""
    global _session, started_sessions
    with _lock:
        if _session is not None:
            return _session
        os.environ.setdefault("TZ", "UTC")
        os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
        from pyspark.sql import SparkSession

        jars = ",".join(str(path) for path in ensure_jars())
        utc_java = "-Duser.timezone=UTC -Dfile.encoding=UTF-8"
        builder = (
            SparkSession.builder.appName("binlake")
            .master(config.master)
            .config("spark.jars", jars)
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", utc_java)
            .config("spark.executor.extraJavaOptions", utc_java)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.legacy.charVarcharAsString", "true")
            .config("spark.sql.readSideCharPadding", "false")
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.databricks.delta.snapshotPartitions", "2")
            # New tables get deletion vectors: a MERGE marks changed rows instead of rewriting whole files,
            # so its cost follows the batch, not the table (override under spark.conf if readers lack support).
            .config("spark.databricks.delta.properties.defaults.enableDeletionVectors", "true")
            .config("spark.databricks.delta.merge.repartitionBeforeWrite.enabled", "true")
            .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        )
        for key, value in mode_defaults(config).items():
            builder = builder.config(key, value)
        if config.staging_path:
            builder = builder.config(STAGING_PATH_CONF, config.staging_path)
        for key, value in config.conf.items():
            builder = builder.config(key, value)
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("ERROR")
        started_sessions += 1
        return _session


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def mode_defaults(config: SparkConfig) -> dict[str, str]:
    """Settings that depend on where the tasks run; `spark.conf` overrides each of them.

    Local mode runs every task in the driver JVM, and Spark's 1g default is too small to MERGE into tables of
    tens of millions of rows. On a cluster the driver only plans and commits while executors do the work, so
    the executor must fit the worker's memory: Spark's own defaults (1g driver, 1g executors) are kept.
    """
    if is_local_master(config.master):
        return {"spark.driver.memory": "4g"}
    return {}


def spark_started() -> bool:
    return _session is not None


def stop_spark() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
