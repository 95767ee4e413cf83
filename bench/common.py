"""Setup the benchmarks share: the CDC user they create, the `bench.orders` table and the keep-up workload's
table with their rows, and a pipeline config for a list of tables.

Kept light (no Spark, no Dagster): the keep-up load writer imports it in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pymysql

from cdc_lib.dev.local_mariadb import LocalMariaDB

#: The repository, whose shipped packages a timed new process imports.
ROOT = Path(__file__).resolve().parents[1]

#: The packages the wheel installs (pyproject.toml's `packages.find`).
SHIPPED_PACKAGES = ("cdc_lib", "assets", "orchestration")

#: The CDC user every benchmark creates on its own MariaDB.
USER, PASSWORD = "bench", "bench-pw"

#: The main run's table (`python -m bench`, bench/snapshot/cluster.py), filled by `load_rows`.
ORDERS = (
    "CREATE TABLE bench.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL, "
    "status VARCHAR(16) NOT NULL, note VARCHAR(200), created DATETIME(6) NOT NULL, updated TIMESTAMP(6) NOT NULL)"
)


def load_rows(server: LocalMariaDB, rows: int) -> None:
    server.execute("DROP DATABASE IF EXISTS bench", "CREATE DATABASE bench", ORDERS)
    chunk = 200_000
    for start in range(0, rows, chunk):
        count = min(chunk, rows - start)
        server.execute(
            "INSERT INTO bench.orders SELECT seq, seq % 5000, (seq % 100000) / 100, ELT(1 + seq % 3, 'new', 'paid', "
            "'shipped'), REPEAT(CHAR(97 + seq % 26), 20 + seq % 150), TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, "
            f"TIMESTAMP('2026-01-01') + INTERVAL seq SECOND FROM bench.seq_{start + 1}_to_{start + count}"
        )


def pipeline_config(work: Path, port: int, name: str, tables: list[str], server_id: int,
                    max_events: int | None = None) -> Path:
    """A pipeline YAML for `tables`; the shipped batch defaults unless `max_events` is given."""
    path = work / f"{name}.yaml"
    batch = f"batch: {{max_events: {max_events}, max_seconds: 600}}\n" if max_events else ""
    path.write_text(
        f"pipeline: {name}\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: {server_id}, "
        f"tables: [{', '.join(tables)}]}}\n"
        f"sink: {{path: {work / ('lake-' + name)}}}\n"
        'spark: {master: "local[2]"}\n' + batch
    )
    return path


#: The keep-up workload's table (`create_table`): the columns of `bench.orders`.
COLUMNS = "(id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL, " \
    "status VARCHAR(16) NOT NULL, note VARCHAR(200), created DATETIME(6) NOT NULL, updated TIMESTAMP(6) NOT NULL)"


def create_table(connection: pymysql.connections.Connection, table: str, rows: int) -> None:
    """The workload's table with `rows` initial rows (keys 1..rows)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} {COLUMNS}")
        if rows:
            cursor.execute(
                f"INSERT INTO {table} SELECT seq, seq % 5000, (seq % 100000) / 100, 'new', "
                f"REPEAT(CHAR(97 + seq % 26), 20 + seq % 150), NOW(6), NOW(6) FROM seq_1_to_{rows}"
            )


def installed_like_environment(work: Path) -> dict[str, str]:
    """The environment for a timed new `binlake` or Dagster process: binlake's bytecode compiled beforehand, as
    `pip install` of the wheel compiles it, and read from a cache under `work`.

    A machine that sets PYTHONDONTWRITEBYTECODE (this one does) otherwise compiles binlake's ~120 modules from
    source in every new process — ~0.2 s of an idle sync's ~0.45 s (2026-11-28), which no installed binlake pays.
    Third-party packages are already compiled at install; this brings binlake's own to the same footing."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(work / "bytecode")
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / name) for name in SHIPPED_PACKAGES)],
                   env=environment, check=True, stdout=subprocess.DEVNULL)
    return environment
