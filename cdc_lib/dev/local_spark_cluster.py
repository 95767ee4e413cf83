"""A private Spark standalone cluster (one master, one worker) on 127.0.0.1, for the tests and the bench.

It runs the installed pyspark's own `bin/spark-class`, so the cluster and the driver are the same Spark
version. Work and log folders live under `base_dir`, never inside the pyspark package. Both JVMs are
started in their own process group and stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_lib.dev.local_mariadb import free_port
from cdc_lib.errors import BinlakeError


def spark_home() -> Path:
    """The folder of the installed pyspark, which holds `bin/spark-class` and `jars/`."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class LocalSparkCluster:
    """Starts and stops a standalone master and one worker.

    Attributes:
        base_dir: work, log and pid files of both daemons.
        worker_cores / worker_memory: what the worker offers to executors.
    """

    base_dir: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    port: int = 0
    webui_port: int = 0
    worker_webui_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}/json/"

    @property
    def work_dir(self) -> Path:
        return self.base_dir / "work"

    def _environment(self) -> dict[str, str]:
        home = spark_home()
        return {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.base_dir / "logs"),
            "SPARK_PID_DIR": str(self.base_dir),
            "TZ": "UTC",
            # Daemons need little heap; executors get their own JVMs sized by spark.executor.memory.
            "SPARK_DAEMON_MEMORY": "512m",
        }

    def _launch(self, name: str, *arguments: str) -> subprocess.Popen[bytes]:
        log = open(self.base_dir / f"{name}.log", "wb")  # noqa: SIM115 — closed when the daemon stops
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *arguments],
            stdout=log, stderr=subprocess.STDOUT, env=self._environment(), cwd=self.base_dir, start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def start(self, *, timeout: float = 120.0) -> LocalSparkCluster:
        """Start both daemons and wait until the worker has registered with the master."""
        if not (spark_home() / "bin" / "spark-class").exists():
            raise BinlakeError(
                f"{spark_home()}/bin/spark-class is missing", remedy="reinstall pyspark: pip install 'pyspark==4.0.*'"
            )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(exist_ok=True)
        self.port = self.port or free_port()
        self.webui_port = self.webui_port or free_port()
        self.worker_webui_port = self.worker_webui_port or free_port()
        self._launch(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port),
        )
        self._launch(
            "worker", "org.apache.spark.deploy.worker.Worker", self.master_url,
            "--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
            "--work-dir", str(self.work_dir), "--webui-port", str(self.worker_webui_port),
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                workers = [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]
                if workers:
                    return self
            except OSError:
                pass
            exited = [p for p in self.processes if p.poll() is not None]
            if exited or time.monotonic() > deadline:
                self.stop()
                logs = ", ".join(str(self.base_dir / f"{name}.log") for name in ("master", "worker"))
                raise BinlakeError(
                    "the local Spark standalone cluster did not come up",
                    remedy=f"check Java 17 is installed and read {logs}",
                )
            time.sleep(0.5)

    def status(self) -> dict[str, Any]:
        """The master's JSON status: workers, active and completed applications."""
        with urllib.request.urlopen(self.status_url, timeout=5) as response:
            document: dict[str, Any] = json.load(response)
        return document

    def executor_logs(self) -> list[Path]:
        """`stderr` files the worker kept for every executor it ran (work/<app-id>/<executor-id>/stderr)."""
        return sorted(self.work_dir.glob("app-*/*/stderr"))

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
