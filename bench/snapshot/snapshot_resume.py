"""A big snapshot killed at 50 %: time to finish after the resume vs an uninterrupted run, and the rows read twice.

Starts its own MariaDB, loads one table, then times three `binlake snapshot` processes (each with its JVM start):
an uninterrupted one (pipeline A); one of pipeline B SIGKILLed just before the commit of the wave past the
half-way chunk; and the resume of B. The re-read is what the snapshot document counts (chunks read by any run
minus the plan's chunks) times the chunk size.

    python -m bench.snapshot.snapshot_resume [--rows 2000000] [--rows-per-chunk 100000] [--chunks-per-wave 2]
    (--rows 20000000 for the issue's figure, where the machine allows it)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER
from cdc_lib.dev.local_mariadb import LocalMariaDB


def config_text(port: int, work: Path, pipeline: str, *, rows_per_chunk: int, chunks_per_wave: int) -> str:
    return json.dumps({
        "pipeline": pipeline,
        "source": {"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD, "server_id": 7911,
                   "tables": ["bench.big"]},
        "sink": {"path": str(work / f"lake-{pipeline}")},
        "offsets": {"uri": str(work / f"lake-{pipeline}" / "_offsets")},
        "spark": {"master": "local[2]"},
        "snapshot": {"rows_per_chunk": rows_per_chunk, "chunks_per_wave": chunks_per_wave},
    })


def load(server: LocalMariaDB, rows: int) -> None:
    server.execute(
        "CREATE DATABASE IF NOT EXISTS bench",
        "CREATE TABLE bench.big (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, note VARCHAR(60))",
    )
    step = 500_000
    for start in range(0, rows, step):
        count = min(step, rows - start)
        server.execute(
            f"INSERT INTO bench.big SELECT seq, seq * 12.25, CONCAT('note ', seq % 977) "
            f"FROM bench.seq_{start + 1}_to_{start + count}"
        )
    server.execute("ANALYZE TABLE bench.big")


def snapshot_process(config_path: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    started = time.perf_counter()
    finished = subprocess.run(
        [sys.executable, "-m", "cdc_lib.cli", "-q", "--config", str(config_path), "snapshot"],
        env={**os.environ, "TZ": "UTC", **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    if finished.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(finished.stderr[-3000:])
    return time.perf_counter() - started, finished.returncode


def measure(
    server: LocalMariaDB, work: Path, *, rows: int, rows_per_chunk: int, chunks_per_wave: int
) -> dict[str, Any]:
    """The figures of one kill-at-50 % run against an uninterrupted one, on a table `load` filled."""
    settings = {"rows_per_chunk": rows_per_chunk, "chunks_per_wave": chunks_per_wave}
    whole = work / "whole.yaml"
    whole.write_text(config_text(server.port, work, "whole", **settings))
    uninterrupted, _ = snapshot_process(whole)

    killed_config = work / "killed.yaml"
    killed_config.write_text(config_text(server.port, work, "killed", **settings))
    chunks = math.ceil(rows / rows_per_chunk)
    waves = math.ceil(chunks / chunks_per_wave)
    kill_at = waves // 2 + 1  # killed before this wave's commit: half the waves are in Delta
    until_kill, code = snapshot_process(killed_config, {"BINLAKE_FAILPOINT": "before_snapshot_wave_commit",
                                                        "BINLAKE_FAILPOINT_AT": str(kill_at)})
    assert code == -signal.SIGKILL, "the run was not killed: fewer waves than planned?"
    resumed, code = snapshot_process(killed_config)
    assert code == 0
    record = json.loads((work / "lake-killed" / "_offsets" / "killed" / "snapshots-done" / "bench.big.json")
                        .read_text())
    planned = len(record["plan"])
    reread_chunks = int(record["chunks_read"]) - planned
    return {
        "rows": rows, "chunks": planned, "waves": len(record["waves"]), "killed_before_wave": kill_at,
        "uninterrupted_s": uninterrupted, "until_kill_s": until_kill, "resume_s": resumed,
        "resume_vs_uninterrupted": resumed / uninterrupted, "reread_chunks": reread_chunks,
        "reread_rows_about": reread_chunks * rows_per_chunk, "rows_in_delta": sum(w["rows"] for w in record["waves"]),
    }


def report(figures: dict[str, Any]) -> str:
    return "\n".join([
        f"snapshot of {figures['rows']:,} rows in {figures['chunks']} chunks ({figures['waves']} waves), "
        f"killed before wave {figures['killed_before_wave']}:",
        f"  uninterrupted run        {figures['uninterrupted_s']:8.1f} s",
        f"  killed run (to the kill) {figures['until_kill_s']:8.1f} s",
        f"  resume to the end        {figures['resume_s']:8.1f} s  "
        f"({figures['resume_vs_uninterrupted']:.0%} of an uninterrupted run)",
        f"  read twice               {figures['reread_chunks']} chunks (~{figures['reread_rows_about']:,} rows); "
        f"rows in Delta {figures['rows_in_delta']:,}",
        "  (each time includes a process and JVM start)",
    ])


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="binlake-resume-bench-"))
    server = LocalMariaDB(work / "mariadb", server_id=12).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        print(f"loading {arguments.rows:,} rows …", flush=True)
        load(server, arguments.rows)
        return measure(server, work, rows=arguments.rows, rows_per_chunk=arguments.rows_per_chunk,
                       chunks_per_wave=arguments.chunks_per_wave)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot.snapshot_resume", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rows-per-chunk", type=int, default=100_000)
    parser.add_argument("--chunks-per-wave", type=int, default=2)
    arguments = parser.parse_args()
    print(report(run(arguments)))


if __name__ == "__main__":
    main()
