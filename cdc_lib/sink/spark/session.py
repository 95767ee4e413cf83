"""The SparkSession binlake uses: Delta enabled, jars from the cache, everything in UTC.

Spark starts only when a caller asks for it; a batch with nothing to write never calls here.
An s3a:// sink's endpoint, region, path style and credentials become `spark.hadoop.fs.s3a.*`
settings for its bucket; whatever the user sets under `spark.conf` wins.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_lib.common.s3 import S3Credentials, split_s3_uri
from cdc_lib.config.model import SinkConfig, SparkConfig
from cdc_lib.errors import SinkError
from cdc_lib.sink.spark.jars import CORE_ARTIFACTS, ensure_jars, s3a_artifacts, s3a_jars_cached

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")

_lock = threading.Lock()
_session: SparkSession | None = None
_session_has_s3a = False
started_sessions = 0
# Where the driver stages a batch as Parquet for Spark to read (see cdc_lib.sink.spark.writer); set from
# `spark.staging_path`.
STAGING_PATH_CONF = "spark.binlake.stagingPath"
# Where the JVM this process starts next sends its stdout and stderr (None: this process's own); see jvm_output_to.
_jvm_output: Path | None = None
# The file the running JVM writes to, when it was started with its output routed.
jvm_log_file: Path | None = None


_HADOOP_PREFIX = "spark.hadoop."
_S3A_PREFIX = "spark.hadoop.fs.s3a."


def s3a_conf(sink: SinkConfig, *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`spark.hadoop.fs.s3a.bucket.<bucket>.*` settings for an s3a:// sink (empty for a local one).

    Per-bucket keys, so pipelines with different S3 stores can share one session. Credentials are the
    sink's own, else the standard AWS variables, else S3A's default chain (instance roles etc.).
    """
    if not sink.path.startswith("s3a://"):
        return {}
    bucket, _ = split_s3_uri(sink.path)
    settings = sink.s3
    options: dict[str, str] = {
        "endpoint.region": settings.resolved_region(environ),
        "path.style.access": str(settings.path_style).lower(),
        **settings.s3a_timeouts(),
    }
    if settings.endpoint_url:
        options["endpoint"] = settings.endpoint_url
        options["connection.ssl.enabled"] = str(settings.endpoint_url.startswith("https://")).lower()
    credentials = settings.credentials or S3Credentials.from_environment(environ)
    if credentials is not None:
        options["access.key"] = credentials.access_key_id
        options["secret.key"] = credentials.secret_access_key
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if credentials.session_token:
            options["session.token"] = credentials.session_token
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        options["aws.credentials.provider"] = provider
    return {f"{_S3A_PREFIX}bucket.{bucket}.{option}": value for option, value in options.items()}


def sink_conf(sink: SinkConfig, user_conf: Mapping[str, str]) -> dict[str, str]:
    """`s3a_conf` minus every option the user set under spark.conf, for this bucket or for all buckets."""
    if not sink.on_s3:
        return {}
    per_bucket = f"{_S3A_PREFIX}bucket.{split_s3_uri(sink.path)[0]}."
    return {
        key: value
        for key, value in s3a_conf(sink).items()
        if key not in user_conf and f"{_S3A_PREFIX}{key.removeprefix(per_bucket)}" not in user_conf
    }


def _wants_s3a(config: SparkConfig, sink: SinkConfig | None) -> bool:
    """s3a jars join the class path when this session needs them, or, in local mode, when they are already
    cached, so that one session (a Dagster code location, a test run) can serve local and S3 sinks alike."""
    needed = (sink is not None and sink.on_s3) or any(
        key.startswith(_S3A_PREFIX) or "s3a://" in value for key, value in config.conf.items()
    )
    # Not on a cluster: there spark.jars would ship the 500 MB SDK bundle to every executor for nothing.
    return needed or (is_local_master(config.master) and s3a_jars_cached())


def spark_session(config: SparkConfig, *, sink: SinkConfig | None = None) -> SparkSession:
    """Return the process's SparkSession, building it on first use.

    Args:
        config: master and extra confs (used only when the session is built).
        sink: an s3a:// sink whose S3 settings the session must carry; applied to a running session too.
    """
    global _session, _session_has_s3a, started_sessions
    extra = sink_conf(sink, config.conf) if sink is not None else {}
    with _lock:
        if _session is not None:
            if sink is not None and sink.on_s3 and not _session_has_s3a:
                raise SinkError(
                    f"this process's SparkSession was started without the s3a jars, so it cannot write {sink.path}",
                    remedy="run `python -m cdc_lib.sink.spark.jars` (or ./run setup) to cache them, then restart the "
                    "process",
                )
            # Per-bucket keys read when S3A opens that bucket, so a running session can learn a new sink.
            hadoop = _session.sparkContext._jsc.hadoopConfiguration()
            for key, value in extra.items():
                hadoop.set(key.removeprefix(_HADOOP_PREFIX), value)
            return _session
        os.environ.setdefault("TZ", "UTC")
        os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
        from pyspark.sql import SparkSession

        jars = ",".join(str(path) for path in ensure_jars(CORE_ARTIFACTS))
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
            .config("spark.databricks.delta.merge.repartitionBeforeWrite.enabled", "true")
            .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        )
        for key, value in mode_defaults(config).items():
            builder = builder.config(key, value)
        if config.staging_path:
            builder = builder.config(STAGING_PATH_CONF, config.staging_path)
        settings = {**extra, **config.conf}
        with_s3a = _wants_s3a(config, sink)
        if with_s3a:
            settings.update(_s3a_jar_settings(config))
        for key, value in settings.items():
            builder = builder.config(key, value)
        _session = _get_or_create(builder)
        _session_has_s3a = with_s3a or any("hadoop-aws" in value for value in config.conf.values())
        # A log file is read after trouble, so it keeps Spark's warnings; a console gets errors only.
        _session.sparkContext.setLogLevel("WARN" if jvm_log_file is not None else "ERROR")
        started_sessions += 1
        return _session


@contextmanager
def jvm_output_to(path: Path | None) -> Iterator[None]:
    """Within this block, a JVM that Spark starts writes its stdout and stderr to `path` (appended).

    That output (JVM warnings, SLF4J's binder notices, log4j's console lines) is printed before Spark's own log
    level applies, so only the child process's file descriptors can catch it. A JVM already running keeps
    whatever output it had; the setting is undone on exit so that a later session in this process (a test run,
    a Dagster code location) is not routed by accident.
    """
    global _jvm_output
    previous, _jvm_output = _jvm_output, path
    try:
        yield
    finally:
        _jvm_output = previous


def _get_or_create(builder: SparkSession.Builder) -> SparkSession:
    global jvm_log_file
    from pyspark import SparkConf, SparkContext

    path = _jvm_output
    if path is None or SparkContext._gateway is not None:
        return builder.getOrCreate()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        output = path.open("ab")
    except OSError as error:
        log.warning("cannot write Spark's log to %s (%s); its output stays on the console", path, error)
        return builder.getOrCreate()
    from pyspark.java_gateway import launch_gateway

    # launch_gateway's popen_kwargs is pyspark's hook for capturing the JVM's output, and SparkContext accepts
    # the gateway; the builder then finds that context. The JVM takes the full conf on its command line, as
    # when the builder launches it (driver memory, class path and Java options apply only at launch).
    conf = SparkConf(loadDefaults=False).setAll(list(builder._options.items()))
    with output:
        gateway = launch_gateway(  # type: ignore[no-untyped-call]  # java_gateway.py is unannotated
            conf, popen_kwargs={"stdout": output, "stderr": subprocess.STDOUT}
        )
    jvm_log_file = path
    SparkContext(conf=conf, gateway=gateway)
    return builder.getOrCreate()


def _s3a_jar_settings(config: SparkConfig) -> dict[str, str]:
    """hadoop-aws and the AWS SDK on the class path, next to whatever class path the user set."""
    s3a_jars = [str(path) for path in ensure_jars(s3a_artifacts())]
    if is_local_master(config.master):
        # Local mode runs tasks in the driver JVM: the driver's class path is enough, and it spares Spark
        # serving the 500 MB SDK bundle to its own executor at every start (spark.jars would copy it).
        key, separator = "spark.driver.extraClassPath", os.pathsep
    else:
        key, separator = "spark.jars", ","
        s3a_jars = [*(str(path) for path in ensure_jars(CORE_ARTIFACTS)), *s3a_jars]
    existing = config.conf.get(key)
    return {key: separator.join([*s3a_jars, *([existing] if existing else [])])}


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
