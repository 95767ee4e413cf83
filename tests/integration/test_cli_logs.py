"""What a user sees: `binlake` prints its results and its own log lines; the JVM's output goes to a file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import delta_rows, run_cli, source_rows, sql, write_config_file
from tests.jvm_noise import JVM_NOISE

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
SNAPSHOT_LINE = re.compile(r"^t_\w+\.items: \d+ rows in [\d.]+s .*Delta version \d+, low .+, high .+$")


def _spark_logs(folder: Path) -> list[Path]:
    return sorted(folder.glob("spark-*.log"))


@pytest.mark.slow  # four CLI runs, each starting its own JVM
def test_cli_output_has_no_jvm_line_and_the_jvm_log_has_them(
    mariadb, database, make_config, tmp_path, spark_log_dir
) -> None:
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, seq FROM {database}.seq_1_to_100")
    config = make_config([table], batch__writer="spark")  # the sync's MERGE starts a JVM (delta-rs would not)
    path = write_config_file(config, tmp_path / "binlake.yaml")
    logs = tmp_path / "logs"
    env = {"BINLAKE_LOG_DIR": str(logs)}

    snapshot = run_cli(path, "snapshot", env=env)
    assert snapshot.returncode == 0, snapshot.stderr[-2000:]
    assert [line for line in snapshot.stdout.splitlines() if not SNAPSHOT_LINE.match(line)] == [], snapshot.stdout
    assert len(snapshot.stdout.splitlines()) == 1
    (first_log,) = _spark_logs(logs)
    assert JVM_NOISE.search(first_log.read_text()), "the JVM's own lines landed in its log file"

    sql(mariadb, f"UPDATE {table} SET qty = qty + 1 WHERE id <= 10", f"DELETE FROM {table} WHERE id > 90")
    sync = run_cli(path, "sync", env=env)
    assert sync.returncode == 0, sync.stderr[-2000:]
    assert re.match(r"batch \d+: 20 row changes", sync.stdout) and "~10 -10" in sync.stdout, sync.stdout
    assert len(_spark_logs(logs)) == 2, "the sync started its own JVM, with its own log file"
    assert delta_rows(config, table) == source_rows(mariadb, table)

    for run in (snapshot, sync):
        assert not JVM_NOISE.search(run.stdout + run.stderr), run.stdout + run.stderr
        assert all(TEXT_LINE.match(line) for line in run.stderr.splitlines()), run.stderr
    assert "INFO binlake: snapshot " in snapshot.stderr, "binlake's own INFO lines still show by default"
    assert str(logs) not in snapshot.stdout + snapshot.stderr, "the log file is named only with --verbose"

    # A schema change: its log line is about one table, so its JSON record carries the `table` field.
    sql(mariadb, f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20)", f"INSERT INTO {table} (id, qty) VALUES (1000, 1)")
    verbose = run_cli(path, "--log-format", "json", "--verbose", "sync", "--until-caught-up", "--json", env=env)
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    batches = json.loads(verbose.stdout)
    assert sum(batch["row_changes"] for batch in batches) == 1, "stdout holds the result alone"
    records = [json.loads(line) for line in verbose.stderr.splitlines()]
    assert records and all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    assert any(str(logs) in record["message"] and record["level"] == "DEBUG" for record in records), records
    assert all(record["pipeline"] == config.pipeline for record in records[1:]), records
    [schema_change] = [record for record in records if "schema change applied" in record["message"]]
    assert schema_change["table"] == table and schema_change["level"] == "INFO", schema_change
    assert all(record.get("table") in (None, table) for record in records), records
    assert "table" not in records[0], "a line about no table carries no table field"
    assert not JVM_NOISE.search(verbose.stdout + verbose.stderr)

    # A failure inside Spark: one line, --quiet keeps it, and it names the JVM's log for the details.
    broken = make_config([table], pipeline=config.pipeline, sink={"path": str(tmp_path / "lake2")},
                         offsets={"uri": str(tmp_path / "offsets2")},
                         spark={"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "not-a-number"}})
    # Without its own BINLAKE_LOG_DIR, a test's CLI run writes into the suite's folder (the `spark_log_dir`
    # fixture), never into the user's ~/.cache/binlake/logs.
    failed = run_cli(write_config_file(broken, tmp_path / "broken.yaml"), "--quiet", "snapshot")
    assert failed.returncode == 2, failed.stderr[-2000:]
    (line,) = failed.stderr.splitlines()
    newest = _spark_logs(spark_log_dir)[-1]
    assert line.startswith("binlake: error: unexpected ") and line.endswith(f"(Spark's log: {newest})"), line
    assert failed.stdout == ""


@pytest.mark.slow  # its own MariaDB and JVM: ~45 s on two cores
def test_demo_prints_its_story_and_keeps_the_jvm_log_in_its_workdir(tmp_path) -> None:
    environment = {key: value for key, value in os.environ.items() if key != "BINLAKE_LOG_DIR"}
    demo = subprocess.run(
        [sys.executable, "-m", "cdc_lib.cli", "demo", "--workdir", str(tmp_path / "demo")],
        capture_output=True, text=True, env={**environment, "TZ": "UTC"}, timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "verdict: every table matches its source" in demo.stdout
    assert not JVM_NOISE.search(demo.stdout + demo.stderr), demo.stdout + demo.stderr
    assert all(TEXT_LINE.match(line) for line in demo.stderr.splitlines()), demo.stderr
    (spark_log,) = _spark_logs(tmp_path / "demo" / "logs")
    assert JVM_NOISE.search(spark_log.read_text())
