"""deploy/dagster.yaml, the production instance file, against a real PostgreSQL: it loads, migrates, and a
snapshot and a micro-batch run through it with their runs, materializations and check results stored there.

The docker compose stack around it cannot run here (no Docker engine); this is the part of it that can.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from cdc_lib.dev.local_mariadb import free_port
from tests.conftest import delta_rows, source_rows
from tests.dagster.conftest import Shop

REPOSITORY = Path(__file__).resolve().parents[2]


class LocalPostgres:
    """A throwaway PostgreSQL cluster on 127.0.0.1 from Debian's postgresql package, stopped by its own pg_ctl."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise RuntimeError("PostgreSQL server binaries are missing: ./run setup installs Debian's postgresql")
        self.bin = Path(found[-1]).parent
        # Not under pytest's tmp folder: that one is private to root, and the server runs as `postgres`.
        self.base = Path(tempfile.mkdtemp(prefix="binlake-postgres-"))
        self.data = self.base / "pgdata"
        self.port = free_port()
        self.user = "dagster"

    def _run(self, *command: str) -> None:
        # PostgreSQL refuses to run as root; CI runs as root, so the server runs as the package's own user.
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> LocalPostgres:
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust")
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.data / "server.log"),
            "-o", f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1", "start",
        )
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "dagster")
        return self

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def query(self, statement: str) -> str:
        return subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "dagster", "-At", "-c", statement],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()


@pytest.fixture(scope="module")
def postgres() -> Iterator[LocalPostgres]:
    server = LocalPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def production_instance(
    postgres: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPOSITORY / "deploy" / "dagster.yaml", home / "dagster.yaml")
    for name, value in {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(postgres.port),
                        "DAGSTER_PG_DB": "dagster", "DAGSTER_PG_USER": postgres.user,
                        "DAGSTER_PG_PASSWORD": "unused-with-trust-auth"}.items():
        monkeypatch.setenv(name, value)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


def test_deploy_instance_file_runs_binlake_on_postgres(
    shop: Shop, production_instance: dg.DagsterInstance, postgres: LocalPostgres
) -> None:
    instance = production_instance
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
    defs = shop.definitions()
    names = shop.names
    table = f"{shop.database}.orders"

    snapshot = defs.resolve_job_def(names.snapshot_job).execute_in_process(instance=instance, partition_key=table)
    assert snapshot.success
    shop.sql("UPDATE orders SET status = 'paid' WHERE id <= 5", "DELETE FROM orders WHERE id = 60")
    sync = defs.resolve_job_def(names.sync_job).execute_in_process(instance=instance)
    assert sync.success

    # FLOAT `weight` aside (MySQL prints it rounded), the copy is the source: ids, statuses, amounts.
    assert [row[:4] for row in delta_rows(shop.config, table)] == [row[:4] for row in source_rows(shop.server, table)]
    stored = instance.get_latest_materialization_event(names.table_key(table))
    assert stored is not None and stored.run_id == sync.run_id
    assert stored.asset_materialization is not None
    metadata = stored.asset_materialization.metadata
    assert metadata["rows_updated"].value == 5 and metadata["rows_deleted"].value == 1
    # Straight from PostgreSQL: both runs and the checks' results are in the deployment's database.
    assert postgres.query("SELECT count(*) FROM runs WHERE status = 'SUCCESS'") == "2"
    checks = postgres.query("SELECT count(*) FROM asset_check_executions WHERE run_id = "
                            f"'{sync.run_id}' AND execution_status = 'SUCCEEDED'")
    assert int(checks) >= 3
