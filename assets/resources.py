"""The `binlake` resource: one pipeline, named by its config file (or a component's inline keys), and how engine
errors become Dagster failures.

Transient errors (dropped connection, S3 5xx, a lease held by another runner)
are re-raised so the asset's `RetryPolicy` retries them. Permanent ones (bad
credentials, purged binlog, schema change, bad config) become
`dagster.Failure(allow_retries=False)`: the run fails at once, with the
remedy in its metadata.

A run step that starts Spark sends the JVM's own output (launcher and SLF4J notices, log4j lines) to a file
under `cdc_lib.common.logs.log_dir()` ($BINLAKE_LOG_DIR, else ~/.cache/binlake/logs), as the CLI does: the step's
captured stdout/stderr (Dagster's compute logs) keep binlake's and Dagster's lines only, and the run's log
names the file.

It sits with the assets, below `orchestration`: the assets and checks call the
engine through it, and the definitions hand one to each pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from pydantic import Field, PrivateAttr

from cdc_lib.common.failures import is_transient
from cdc_lib.common.logs import log_dir, spark_log_path
from cdc_lib.config.load import config_from_document, load_config
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import BinlakeError, ConfigError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import DEFAULT_CHUNK_ROWS
from cdc_lib.sink.spark import session as spark
from cdc_lib.status.runway import DEFAULT_RUNWAY_WARN_HOURS

#: The lag check warns when a table's copy trails its source by more than this (the resource's default).
DEFAULT_LAG_WARN_SECONDS = 300.0

# Retries after 10 s, 30 s and 70 s: long enough for a dropped connection or a held lease to clear.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL)


def failure_for(error: BinlakeError, action: str) -> dg.Failure:
    """A Dagster failure that skips retries and tells the person what to do."""
    metadata: dict[str, Any] = {
        "error": error.__class__.__name__,
        "cause": error.cause,
        "remedy": error.remedy,
        "retryable": False,
    }
    if error.table:
        metadata["table"] = error.table
    return dg.Failure(description=f"{action} failed: {error}", metadata=metadata, allow_retries=False)


@contextmanager
def engine_errors(action: str, log: Any | None = None) -> Iterator[None]:
    """Let transient engine errors through to the retry policy; turn permanent ones into a final Failure."""
    try:
        yield
    except BinlakeError as error:
        if is_transient(error):
            if log is not None:
                log.warning(f"{action}: transient failure, the retry policy will try again: {error}")
            raise
        raise failure_for(error, action) from None


@contextmanager
def jvm_output_to_log_file(log: Any) -> Iterator[None]:
    """Within the block, a JVM that Spark starts in this process writes its own output to a new file under
    `log_dir()`, not to the step's stdout/stderr; the run's log names the file when one was started."""
    path = spark_log_path(log_dir())
    try:
        with spark.jvm_output_to(path):
            yield
    finally:
        if spark.jvm_log_file == path:
            log.info(f"Spark started; the JVM's own output is in {path}")


class BinlakeResource(dg.ConfigurableResource["BinlakeResource"]):
    """A binlake pipeline: assets, checks and sensors call the engine through `pipeline()`."""

    config_path: str | None = Field(
        default=None, description="Path of the pipeline YAML ($BINLAKE_CONFIG's file, or a component's config_path)."
    )
    config_yaml: str | None = Field(
        default=None,
        description="The pipeline keys a binlake component gives inline, as written (`${VAR}` unexpanded, so no "
        "secret shows here); each run validates them again. Wins over config_path.",
    )
    config_base_dir: str | None = Field(
        default=None, description="Folder that relative paths in config_yaml resolve against (the component's folder)."
    )
    auto_resnapshot: bool = Field(
        default=False, description="Re-snapshot a table that stopped with an error (purged binlog, schema change)."
    )
    lag_warn_seconds: float = Field(
        default=DEFAULT_LAG_WARN_SECONDS, description="The lag check warns above this many seconds."
    )
    runway_warn_hours: float = Field(
        default=DEFAULT_RUNWAY_WARN_HOURS,
        description="The binlog runway check warns when a needed binlog expires sooner than this.",
    )
    reconcile_chunk_rows: int = Field(default=DEFAULT_CHUNK_ROWS, description="Rows per reconciliation chunk.")
    reconcile_recheck_seconds: float = Field(
        default=90.0, description="Pause before re-comparing chunks that differed while the source was busy (0: off)."
    )

    _pipeline: Pipeline | None = PrivateAttr(default=None)

    def load_config(self) -> PipelineConfig:
        with engine_errors("loading the pipeline config"):
            if self.config_yaml is not None:
                base_dir = Path(self.config_base_dir) if self.config_base_dir else None
                return config_from_document(yaml.safe_load(self.config_yaml), base_dir=base_dir)
            if self.config_path is None:
                raise ConfigError(
                    "config_path", "the binlake resource names no pipeline",
                    remedy="set the resource's config_path (a pipeline YAML) or config_yaml",
                )
            return load_config(self.config_path)

    def pipeline(self) -> Pipeline:
        """The pipeline, built once per resource instance (once per run step)."""
        if self._pipeline is None:
            config = self.load_config()
            with engine_errors("opening the offset store"):
                self._pipeline = Pipeline(config)
        return self._pipeline
