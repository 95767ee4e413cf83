"""The Spark session confs that make its next Delta DML one idempotent, annotated binlake commit.

A conf belongs to the session, and so to every thread that uses it: concurrent writers each take a session of
their own (`parallel_apply`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_lib.sink.commits import user_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class IdempotentCommit:
    """Session confs that make the next Delta DML an idempotent, annotated transaction."""

    def __init__(self, spark: SparkSession, application: str, version: int, metadata: dict[str, Any]) -> None:
        self.spark = spark
        self.settings = {
            "spark.databricks.delta.write.txnAppId": application,
            "spark.databricks.delta.write.txnVersion": str(version),
            "spark.databricks.delta.commitInfo.userMetadata": user_metadata(metadata, application),
        }

    def __enter__(self) -> None:
        for key, value in self.settings.items():
            self.spark.conf.set(key, value)

    def __exit__(self, *exc: object) -> None:
        for key in self.settings:
            self.spark.conf.unset(key)


__all__ = ["IdempotentCommit"]
