"""Idle is cheap: a batch with no relevant change neither starts Spark nor imports it, yet moves offsets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, sql, write_config_file

PROBE = """
import json, sys
from cdc_lib.config.load import load_config
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.spark import session as spark
results = Pipeline(load_config(sys.argv[1])).sync()
print(json.dumps({
    "spark_started": [r.spark_started for r in results],
    "sessions": spark.started_sessions,
    "pyspark_session_imported": "pyspark.sql.session" in sys.modules,
    "position": results[-1].end,
}))
"""


def test_idle_sync_does_not_start_spark_and_still_advances(mariadb, database, make_config, tmp_path) -> None:
    sql(mariadb, f"CREATE TABLE {database}.watched (id INT PRIMARY KEY)", f"CREATE TABLE {database}.other (id INT)")
    config = make_config([f"{database}.watched"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    before = pipeline.read_state().tables[f"{database}.watched"].position
    sql(mariadb, f"INSERT INTO {database}.other VALUES (1), (2)")  # traffic the pipeline does not follow
    path = write_config_file(config, tmp_path / "binlake.yaml")
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD}
    probe = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True,
                           env=environment, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    assert report["spark_started"] == [False]
    assert report["sessions"] == 0
    assert report["pyspark_session_imported"] is False
    after = pipeline.read_state().tables[f"{database}.watched"].position
    assert after > before, "an idle batch still moves the offset past unrelated traffic"


def test_idle_table_follows_a_binlog_rotation(mariadb, database, make_config) -> None:
    sql(mariadb, f"CREATE TABLE {database}.quiet (id INT PRIMARY KEY)")
    config = make_config([f"{database}.quiet"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, "FLUSH BINARY LOGS")
    result = pipeline.sync()[0]
    assert not result.spark_started
    status = pipeline.status()[0]
    assert (status.lag_bytes, status.lag_events, status.lag_seconds) == (0, 0, 0.0), status
    newest = sql(mariadb, "SHOW MASTER STATUS")[0][0]
    assert pipeline.read_state().tables[f"{database}.quiet"].position.file == newest
