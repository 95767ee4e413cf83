"""A Dagster run that starts Spark: the JVM's own output goes to binlake's Spark log file, not the run's
captured stdout/stderr (the compute logs the UI shows per step)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD
from tests.dagster.conftest import Shop
from tests.jvm_noise import JVM_NOISE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("writer", ["spark", "auto"])
def test_a_dagster_run_keeps_the_jvm_output_out_of_its_compute_logs(shop: Shop, tmp_path: Path, writer: str) -> None:
    """With `batch.writer: spark` the MERGEs start Spark in the step's process; under `auto` delta-rs writes these
    mirror tables and the step starts no JVM at all."""
    Pipeline(shop.config).snapshot()
    document = yaml.safe_load(shop.config_path.read_text())
    document.setdefault("batch", {})["writer"] = writer
    shop.config_path.write_text(yaml.safe_dump(document))
    # Changes to MERGE, so the micro-batch step writes (in its own process: a fresh JVM if Spark writes).
    shop.sql("UPDATE orders SET status = 'paid' WHERE id <= 7", "DELETE FROM order_lines WHERE order_id = 60")
    home, logs = tmp_path / "dagster_home", tmp_path / "spark_logs"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "BINLAKE_CONFIG": str(shop.config_path),
        "BINLAKE_TEST_PASSWORD": CDC_PASSWORD,
        "BINLAKE_LOG_DIR": str(logs),
    }
    run = subprocess.run(
        [sys.executable, "-m", "dagster", "job", "execute", "-m", "orchestration.definitions", "-a", "defs",
         "-j", shop.names.sync_job],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    with dg.DagsterInstance.from_config(str(home)) as instance:
        [record] = instance.get_run_records()
        assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        run_id = record.dagster_run.run_id
        materialized = [event.asset_materialization for event in instance.all_logs(run_id)]
        spark_started = {
            materialization.asset_key.path[-1]: materialization.metadata["spark_started"].value
            for materialization in materialized
            if materialization is not None and "spark_started" in materialization.metadata
        }
        logged = "\n".join(event.user_message for event in instance.all_logs(run_id))
    on_spark = writer == "spark"
    assert spark_started == {"orders": on_spark, "order_lines": on_spark}, "which engine MERGEd in the step's process"
    captured = sorted((home / "storage" / run_id / "compute_logs").glob("*"))
    assert captured, f"no compute logs under {home / 'storage' / run_id}"
    step_output = "\n".join(path.read_text(errors="replace") for path in captured)
    assert not JVM_NOISE.search(step_output), step_output[-3000:]
    assert not JVM_NOISE.search(run.stdout + run.stderr), (run.stdout + run.stderr)[-3000:]

    if not on_spark:
        assert not sorted(logs.glob("spark-*.log")) and "Spark started" not in logged, "the step started a JVM"
        return
    (spark_log,) = sorted(logs.glob("spark-*.log"))
    assert JVM_NOISE.search(spark_log.read_text()), "the JVM's own lines landed in the Spark log file"
    assert f"Spark started; the JVM's own output is in {spark_log}" in logged
