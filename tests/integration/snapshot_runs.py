"""A chunked snapshot as the tests drive and inspect it: the CLI in a child process, an `items` table, and the
records a snapshot leaves (its finished document, its wave commits in the Delta log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, sql


def popen_cli(config_path: Path, *arguments: str, env: dict[str, str]) -> subprocess.Popen[str]:
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **env}
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), *arguments],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def make_items(mariadb: Any, database: str, rows: int, name: str = "items") -> str:
    sql(
        mariadb,
        f"CREATE TABLE {database}.{name} (id INT PRIMARY KEY, price DECIMAL(9,2) NOT NULL, label VARCHAR(24))",
        f"INSERT INTO {database}.{name} SELECT CAST(seq AS SIGNED) * 3 - 7, seq * 12.25, CONCAT('n-', seq * 7) "
        f"FROM {database}.seq_1_to_{rows}",
    )
    return f"{database}.{name}"


def finished_record(config: Any, table: str) -> dict[str, Any]:
    """The document of the table's last installed snapshot (`snapshots-done/`)."""
    document, _ = Pipeline(config).store.read_document(config.pipeline, f"snapshots-done/{table}.json")
    assert document is not None, "an installed snapshot keeps its record"
    return document


def wave_commits(config: Any, table: str) -> list[dict[str, Any]]:
    """The commit metadata of every snapshot wave in the table's Delta log, oldest first."""
    log_dir = Path(Pipeline(config).table_path(table)) / "_delta_log"
    found = []
    for path in sorted(log_dir.glob("*.json")):
        for line in path.read_text().split("\n"):
            if '"commitInfo"' in line:
                info = json.loads(line)["commitInfo"]
                metadata = json.loads(info.get("userMetadata") or "{}")
                if "wave" in metadata:
                    found.append({**metadata, "delta_version": int(path.stem), "timestamp": info["timestamp"]})
    return found
