"""Snapshot throughput of one table on local Spark vs a standalone master + one worker on this machine.

    python -m bench.snapshot.cluster [--rows 200000] [--repeat 2] [--worker-cores 2] [--worker-memory 2g]

Starts its own MariaDB and Spark standalone cluster (127.0.0.1 only), generates the table server-side,
then, for each master, runs the snapshots in a fresh process (one SparkSession per process, as in
production): one first snapshot that includes the JVM start and the executor launch, then `--repeat`
timed ones. Prints rows/s (median) per master. Nothing is written to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER, load_rows  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.dev.local_spark_cluster import LocalSparkCluster  # noqa: E402

# Runs in the child process: its own SparkSession on the configured master.
_CHILD = """
import json, sys, time
from cdc_lib.config.load import load_config
from cdc_lib.pipeline.pipeline import Pipeline
pipeline = Pipeline(load_config(sys.argv[1]))
started = time.perf_counter()
first = pipeline.snapshot()[0]
first_s = time.perf_counter() - started
runs = [pipeline.snapshot()[0] for _ in range(int(sys.argv[2]))]
print(json.dumps({"first_s_with_start": first_s, "rows": first.rows, "partitions": first.partitions,
                  "snapshot_s": [run.seconds for run in runs]}))
"""


def config_text(port: int, lake: Path, master: str) -> str:
    return (
        "pipeline: cluster-bench\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: 7702, "
        "tables: [bench.orders]}\n"
        f"sink: {{path: {lake}}}\n"
        f'spark: {{master: "{master}", conf: {{spark.driver.host: 127.0.0.1, spark.driver.bindAddress: 127.0.0.1}}}}\n'
        "snapshot: {rows_per_partition: 1000000, max_partitions: 8}\n"
    )


def measure(work: Path, port: int, master: str, label: str, repeat: int) -> dict[str, Any]:
    config_path = work / f"{label}.yaml"
    config_path.write_text(config_text(port, work / f"lake-{label}", master))
    environment = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(config_path), str(repeat)],
        capture_output=True, text=True, env=environment, timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{label} snapshot failed: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["master"] = master
    figures["rows_per_s"] = figures["rows"] / statistics.median(figures["snapshot_s"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=2)
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="binlake-cluster-bench-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    cluster = LocalSparkCluster(work / "spark", worker_cores=arguments.worker_cores,
                                worker_memory=arguments.worker_memory)
    results: dict[str, Any] = {"rows": arguments.rows, "load": os.getloadavg()[0]}
    try:
        server.create_cdc_user(USER, PASSWORD)
        load_rows(server, arguments.rows)
        results["local"] = measure(work, server.port, f"local[{arguments.worker_cores}]", "local", arguments.repeat)
        started = time.perf_counter()
        cluster.start()
        results["cluster_start_s"] = time.perf_counter() - started
        results["cluster"] = measure(work, server.port, cluster.master_url, "cluster", arguments.repeat)
        results["cluster_apps"] = [app["id"] for app in cluster.status()["completedapps"]]
        results["executor_logs"] = len(cluster.executor_logs())
    finally:
        cluster.stop()
        server.stop()
    results["load_after"] = os.getloadavg()[0]
    for label in ("local", "cluster"):
        figures = results[label]
        print(f"{label:8} {figures['master']:28} {figures['rows_per_s']:>10,.0f} rows/s "
              f"(median of {figures['snapshot_s']}, {figures['partitions']} partitions; "
              f"first incl. start {figures['first_s_with_start']:.1f} s)")
    print(f"cluster start {results['cluster_start_s']:.1f} s; load average {results['load']:.1f} → "
          f"{results['load_after']:.1f} (the machine is shared)")
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
