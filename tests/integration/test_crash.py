"""Crash safety: kill real `binlake` processes at the worst moments, rerun, and find nothing lost or doubled."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import CDC_PASSWORD, delta_rows, run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import s3_sink


def make_table(mariadb, db: str, rows: int = 200) -> str:
    sql(
        mariadb,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {db}.items SELECT seq, seq, 'start' FROM {db}.seq_1_to_{rows}",
    )
    return f"{db}.items"


def change_burst(mariadb, db: str, round_number: int) -> None:
    base = 10_000 * (round_number + 1)
    sql(
        mariadb,
        "START TRANSACTION",
        f"INSERT INTO {db}.items SELECT {base} + seq, seq, 'r{round_number}' FROM {db}.seq_1_to_40",
        f"UPDATE {db}.items SET qty = qty + 1 WHERE id % 5 = {round_number % 5}",
        f"DELETE FROM {db}.items WHERE id % 11 = {round_number % 11} AND id < 10000",
        "COMMIT",
        f"UPDATE {db}.items SET id = id + 500000 WHERE id BETWEEN {base + 1} AND {base + 3}",
    )


@pytest.mark.parametrize("sink", ["local", "s3"])
def test_kill_between_delta_commit_and_offset_write(sink, mariadb, database, make_config, tmp_path, request) -> None:
    """The same crash on a local folder and on S3 (moto on loopback, offsets beside the sink)."""
    table = make_table(mariadb, database)
    if sink == "s3":
        endpoint, bucket = request.getfixturevalue("s3_endpoint"), request.getfixturevalue("s3_bucket")
        config = make_config([table], sink=s3_sink(endpoint, bucket), offsets={})
        assert config.offsets.uri == f"s3a://{bucket}/lake/_offsets"
    else:
        config = make_config([table])
    Pipeline(config).snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")

    change_burst(mariadb, database, 1)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    stored = Pipeline(config).read_state()
    assert stored.tables[table].applied_seq < stored.batch_seq + 1, "the offsets did not move"
    assert delta_rows(config, table) == source_rows(mariadb, table), "the Delta commit itself landed"

    change_burst(mariadb, database, 2)
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table), "nothing lost, nothing doubled"
    state = pipeline.read_state()
    assert state.tables[table].consistent and state.tables[table].applied_seq == state.batch_seq
    assert all(result.matches for result in reconcile(pipeline))
    if sink == "s3":
        assert not (tmp_path / "lake").exists(), "nothing went to local disk"


def test_kill_after_snapshot_commit_before_offsets(mariadb, database, make_config, tmp_path) -> None:
    table = make_table(mariadb, database)
    config = make_config([table])
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    crashed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "after_snapshot_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert table not in Pipeline(config).read_state().tables

    change_burst(mariadb, database, 3)
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    assert table in pipeline.read_state().tables, "the snapshot was adopted from the Delta log"
    assert delta_rows(config, table) == source_rows(mariadb, table)


def test_kills_at_random_points_then_rerun(mariadb, database, make_config, tmp_path) -> None:
    table = make_table(mariadb, database, rows=500)
    config = make_config([table], batch__max_events=60)
    Pipeline(config).snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    chooser = random.Random(int(os.environ.get("BINLAKE_TEST_SEED", "20261121")))
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"}
    for round_number in range(4):
        change_burst(mariadb, database, round_number)
        process = subprocess.Popen(
            [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "sync", "--until-caught-up"],
            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(chooser.uniform(1.0, 14.0))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    change_burst(mariadb, database, 9)
    Pipeline(config).sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)
