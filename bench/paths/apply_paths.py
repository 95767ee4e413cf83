"""The apply path alone: one sync batch of a fixed workload, old way vs new way, alternated.

Scenarios (each one batch; the lake is restored before every run, so every run applies the same changes):
  one-table mixed      10,000 changes (inserts, updates, deletes) in 1 table
  hundred-tables mixed 10,000 changes over 100 tables
  one-table inserts    10,000 inserts in 1 table
  hundred-tables inserts 10,000 inserts over 100 tables
Variants: `serial` (one table after another, MERGE for every change: the engine before issue 12's apply
work) and `new` (the defaults: tables in parallel, inserts appended). Also prints the rate at which MariaDB
applied each workload, and the load average, since the machine is shared.

    PYTHONPATH=$PWD python -m bench.paths.apply_paths --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER  # noqa: E402
from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.pipeline.pipeline import Pipeline  # noqa: E402

TABLES = 100
BASE_ROWS = 20_000
VARIANTS = {
    "serial": "batch: {max_events: 500000, max_seconds: 600, apply_threads: 1, append_inserts: false}\n",
    "new": "batch: {max_events: 500000, max_seconds: 600}\n",
    "threads4": "batch: {max_events: 500000, max_seconds: 600, apply_threads: 4}\n",
    "serial-append": "batch: {max_events: 500000, max_seconds: 600, apply_threads: 1}\n",
}


def table_name(index: int) -> str:
    return f"ap.t{index:03d}"


def config_text(port: int, lake: Path, variant: str) -> str:
    tables = ", ".join(table_name(index) for index in range(TABLES))
    return (
        "pipeline: apply\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: 7711, "
        f"tables: [{tables}]}}\n"
        f"sink: {{path: {lake}}}\n"
        'spark: {master: "local[2]"}\n' + VARIANTS[variant]
    )


def load(server: LocalMariaDB) -> None:
    server.execute("DROP DATABASE IF EXISTS ap", "CREATE DATABASE ap")
    for index in range(TABLES):
        name = table_name(index)
        server.execute(
            f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, status VARCHAR(16) NOT NULL, "
            "note VARCHAR(200), updated DATETIME(6) NOT NULL)",
            f"INSERT INTO {name} SELECT seq, seq / 100, 'new', REPEAT('n', 40), TIMESTAMP('2026-01-01') + INTERVAL seq "
            f"SECOND FROM ap.seq_1_to_{BASE_ROWS}",
        )


class Workload:
    """Source changes of each scenario; `next_id` keeps inserted keys new across scenarios."""

    def __init__(self, server: LocalMariaDB) -> None:
        self.server = server
        self.next_id = BASE_ROWS + 1
        self.round = 0

    def run(self, tables: int, changes: int, *, inserts_only: bool) -> float:
        """Write `changes` row changes spread over `tables` tables, ~100 rows per transaction; MariaDB's seconds."""
        per_table = changes // tables
        statements: list[str] = []
        first = self.next_id
        for index in range(tables):
            name = table_name(index)
            done, next_id = 0, first
            while done < per_table:
                step = min(100, per_table - done)
                # Rotated by chunk and by table: with 100 rows per table each table still gets one kind.
                kind = (done // 100 + index) % 3
                if inserts_only or kind == 0:
                    statements.append(
                        f"INSERT INTO {name} SELECT seq, 12.25, 'new', 'fresh', NOW(6) "
                        f"FROM seq_{next_id}_to_{next_id + step - 1}"
                    )
                    next_id += step
                elif kind == 1:
                    low = 1 + (self.round * 977 + done * 7) % (BASE_ROWS - 200)
                    statements.append(f"UPDATE {name} SET amount = amount + 1, status = 'paid' "
                                      f"WHERE id BETWEEN {low} AND {low + step - 1}")
                else:
                    low = 1 + (self.round * 1319 + done * 11) % (BASE_ROWS - 200)
                    statements.append(f"DELETE FROM {name} WHERE id BETWEEN {low} AND {low + step - 1}")
                done += step
        self.next_id = first + per_table + 1
        self.round += 1
        connection = self.server.admin_connection("ap")
        try:
            started = time.perf_counter()
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
                    connection.commit()
            return time.perf_counter() - started
        finally:
            connection.close()


def sync_seconds(pipelines: dict[str, Pipeline], variant: str, lake: Path, saved: Path) -> tuple[float, int]:
    shutil.rmtree(lake)
    shutil.copytree(saved, lake)
    started = time.perf_counter()
    results = pipelines[variant].sync(until_caught_up=True)
    seconds = time.perf_counter() - started
    return seconds, sum(result.row_changes for result in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--variants", default="serial,new")
    parser.add_argument("--only", default="one-mixed,hundred-mixed,one-inserts,hundred-inserts")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="binlake-apply-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        load(server)
        lake = work / "lake"
        pipelines = {}
        for variant in arguments.variants.split(","):
            path = work / f"{variant}.yaml"
            path.write_text(config_text(server.port, lake, variant))
            pipelines[variant] = Pipeline(load_config(path))
        first = next(iter(pipelines.values()))
        first.snapshot()
        first.sync(until_caught_up=True)  # past the snapshots' high watermarks: every table consistent
        workload = Workload(server)
        for variant in pipelines:  # the first MERGE and append of the process warm the JVM up: not timed
            for inserts_only in (False, True):
                workload.run(2, 400, inserts_only=inserts_only)
                pipelines[variant].sync(until_caught_up=True)
        scenarios = {
            "one-mixed": (1, False), "hundred-mixed": (TABLES, False),
            "one-inserts": (1, True), "hundred-inserts": (TABLES, True),
        }
        report: dict[str, Any] = {}
        for scenario in arguments.only.split(","):
            tables, inserts_only = scenarios[scenario]
            source_seconds = workload.run(tables, arguments.changes, inserts_only=inserts_only)
            saved = work / f"lake-{scenario}"
            shutil.copytree(lake, saved)
            runs: dict[str, list[float]] = {variant: [] for variant in pipelines}
            rows = 0
            for _ in range(arguments.repeat):
                for variant in pipelines:  # alternated, so a load spike hits both variants alike
                    seconds, rows = sync_seconds(pipelines, variant, lake, saved)
                    runs[variant].append(seconds)
            line = [f"{scenario:16s} rows {rows:,}  MariaDB {rows / source_seconds:,.0f} rows/s"]
            for variant, values in runs.items():
                median = statistics.median(values)
                ratio = source_seconds / median
                line.append(f"{variant} {median:.2f} s = {rows / median:,.0f} rows/s ({ratio:.2f}× MariaDB)")
                report[f"{scenario}:{variant}"] = median
            line.append(f"load {os.getloadavg()[0]:.1f}")
            print("  ".join(line), flush=True)
            shutil.rmtree(saved)
        for variant in pipelines:
            one, hundred = report.get(f"one-mixed:{variant}"), report.get(f"hundred-mixed:{variant}")
            if one and hundred:
                print(f"{variant}: 100 tables / 1 table (mixed) = {hundred / one:.2f}×")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
