"""Follow mode latency: from a source COMMIT to the Delta commit that carries it, vs a fresh `binlake sync` process.

Starts its own MariaDB, snapshots one small table, then runs `binlake sync --follow` as a child process and writes
small transactions one at a time (a random pause between them, so they land at every point of the poll cycle).
For each, the latency is the time from COMMIT returning to the Delta log's new version file being visible
(polled every 10 ms). Then it stops the follower (SIGTERM) and times fresh `binlake sync` processes applying
the same kind of change: process start + Spark start + first MERGE + offsets.

    python -m bench.keepup.follow [--transactions 50] [--poll 0.25] [--fresh 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER
from cdc_lib.dev.local_mariadb import LocalMariaDB


def config_text(port: int, work: Path) -> str:
    return json.dumps({
        "pipeline": "follow_bench",
        "source": {"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD, "server_id": 7811,
                   "tables": ["bench.items"]},
        "sink": {"path": str(work / "lake")},
        "offsets": {"uri": str(work / "lake" / "_offsets")},
        "spark": {"master": "local[2]"},
    })


def cli(config_path: Path, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "cdc_lib.cli", "-q", "--config", str(config_path), *arguments]


def delta_versions(log_dir: Path) -> int:
    return sum(1 for entry in os.scandir(log_dir) if entry.name.endswith(".json"))


def change(server: LocalMariaDB, number: int) -> None:
    server.execute(
        "START TRANSACTION",
        f"INSERT INTO bench.items VALUES ({100_000 + number}, {number * 3}, 'follow {number}')",
        f"UPDATE bench.items SET qty = qty + 1 WHERE id = {1 + number % 500}",
        "COMMIT",
    )


def wait_for_version(log_dir: Path, before: int, *, timeout: float = 600) -> float:
    """The time the Delta log first shows more versions than `before`."""
    deadline = time.time() + timeout
    while delta_versions(log_dir) <= before:
        if time.time() > deadline:
            raise TimeoutError(f"no Delta commit within {timeout}s")
        time.sleep(0.01)
    return time.time()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="binlake-follow-bench-"))
    server = LocalMariaDB(work / "mariadb", server_id=11).start()
    follower: subprocess.Popen[bytes] | None = None
    try:
        server.create_cdc_user(USER, PASSWORD)
        server.execute(
            "CREATE DATABASE bench",
            "CREATE TABLE bench.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(40))",
            "INSERT INTO bench.items SELECT seq, seq, 'start' FROM bench.seq_1_to_500",
        )
        config_path = work / "binlake.yaml"
        config_path.write_text(config_text(server.port, work))
        subprocess.run(cli(config_path, "snapshot"), check=True, stdout=subprocess.DEVNULL)
        log_dir = work / "lake" / "bench" / "items" / "_delta_log"
        environment = {**os.environ, "TZ": "UTC"}
        follower = subprocess.Popen(
            cli(config_path, "sync", "--follow", "--poll", str(arguments.poll)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
        )
        chooser = random.Random(20261123)
        started = time.time()
        before = delta_versions(log_dir)
        change(server, 0)
        committed = time.time()
        first = wait_for_version(log_dir, before) - committed
        print(f"first change (includes the follower's Spark start): {first:.2f}s", flush=True)
        latencies = []
        for number in range(1, arguments.transactions + 1):
            time.sleep(chooser.uniform(0.1, 0.6))
            before = delta_versions(log_dir)
            change(server, number)
            committed = time.time()
            latencies.append(wait_for_version(log_dir, before) - committed)
        follow_seconds = time.time() - started
        follower.send_signal(signal.SIGTERM)
        follower_exit = follower.wait(timeout=120)
        follower = None

        fresh = []
        for number in range(arguments.fresh):
            change(server, 10_000 + number)
            clock = time.perf_counter()
            subprocess.run(cli(config_path, "sync"), check=True, stdout=subprocess.DEVNULL, env=environment)
            fresh.append(time.perf_counter() - clock)
        return {
            "transactions": len(latencies),
            "poll_seconds": arguments.poll,
            "follow_first_change_s": round(first, 3),
            "follow_latency_p50_s": round(statistics.median(latencies), 3),
            "follow_latency_p95_s": round(percentile(latencies, 0.95), 3),
            "follow_latency_max_s": round(max(latencies), 3),
            "follow_run_s": round(follow_seconds, 1),
            "follower_exit_code": follower_exit,
            "fresh_sync_process_s": [round(value, 2) for value in fresh],
            "fresh_sync_process_median_s": round(statistics.median(fresh), 2),
            "cpus": os.cpu_count(),
        }
    finally:
        if follower is not None:
            follower.kill()
            follower.wait(timeout=30)
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transactions", type=int, default=50)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--fresh", type=int, default=3, help="fresh `binlake sync` processes to time")
    results = run(parser.parse_args())
    print(json.dumps(results, indent=1))
    print(
        f"source commit → Delta commit under follow: p50 {results['follow_latency_p50_s']:.2f}s, "
        f"p95 {results['follow_latency_p95_s']:.2f}s (poll {results['poll_seconds']:g}s, "
        f"{results['transactions']} transactions); a fresh `binlake sync` process for the same change: "
        f"{results['fresh_sync_process_median_s']:.1f}s (median of {len(results['fresh_sync_process_s'])})"
    )


if __name__ == "__main__":
    main()
