"""A table's binlake commits as its Delta log records them, and the check that both readers see the source's rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import scan_rows, source_rows


def commits_of(pipeline: Pipeline, table: str) -> list[dict[str, Any]]:
    """binlake's commits of the table: version, operation, engine and writer, in version order."""
    found = []
    for file in sorted((Path(pipeline.table_path(table)) / "_delta_log").glob("*.json")):
        for line in file.read_text().split("\n"):
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info and info.get("userMetadata"):
                metadata = json.loads(info["userMetadata"])
                found.append({"version": int(file.stem), "operation": info["operation"],
                              "engine": info.get("engineInfo", ""), "writer": metadata.get("writer"),
                              "path": metadata.get("path", metadata["kind"])})
    return found


def assert_equal_to_source(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    delta = sorted(scan_rows(pipeline.table_path(table)))
    assert delta == source_rows(mariadb, table), f"{table}: Delta (delta-rs scan) differs from the source"
    frame = spark_session(pipeline.config.spark).read.format("delta").load(pipeline.table_path(table))
    assert sorted(tuple(row) for row in frame.collect()) == delta, "Spark reads another table than delta-rs"
