"""One writer per pipeline: a second runner fails fast; the S3 offset store is compare-and-swap."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cdc_lib.common.faults import PAUSE_FILE_VARIABLE, PAUSE_VARIABLE
from cdc_lib.errors import ConcurrentRunError, OffsetStoreError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.offset_store import S3OffsetStore, StateHandle
from cdc_lib.state.offsets import PipelineState
from tests.conftest import CDC_PASSWORD, delta_rows, run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import wait_for


def test_second_concurrent_sync_fails_with_clear_error(mariadb, database, make_config, tmp_path) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {database}.t VALUES (1,1)")
    config = make_config([f"{database}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {database}.t SELECT seq + 1, seq FROM {database}.seq_1_to_50")
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    # The first sync holds the lease, paused before its Delta commit, until the second has been refused: a batch
    # on the delta-rs writer ends within a second, sooner than a second process starts.
    flag = tmp_path / "first-sync-paused"
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, PAUSE_VARIABLE: "before_delta_commit",
                   PAUSE_FILE_VARIABLE: str(flag)}
    first = subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "sync"],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = pipeline.read_state()
        if state.lease is not None and state.lease.pid == first.pid:
            break
        time.sleep(0.05)
    else:
        first.kill()
        pytest.fail("the first sync never took the lease")
    second = run_cli(config_path, "sync")
    assert second.returncode == ConcurrentRunError.exit_code
    assert f"(pid {first.pid} on host" in second.stderr
    assert "one runner per pipeline" in second.stderr
    wait_for(flag.exists, timeout=60, interval=0.05, what="the first sync to pause before its commit")
    flag.unlink()
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err[-2000:]
    assert delta_rows(config, f"{database}.t") == source_rows(mariadb, f"{database}.t")


def test_s3_offset_store_round_trip_and_conditional_writes(s3_endpoint, s3_bucket) -> None:
    store = S3OffsetStore(f"s3://{s3_bucket}/offsets", endpoint_url=s3_endpoint)
    assert store.read("p") == (None, None)
    token = store.write(PipelineState(pipeline="p", batch_seq=1), None)
    with pytest.raises(ConcurrentRunError):
        store.write(PipelineState(pipeline="p", batch_seq=99), None)
    state, read_token = store.read("p")
    assert state is not None and state.batch_seq == 1 and read_token == token
    next_token = store.write(PipelineState(pipeline="p", batch_seq=2), token)
    with pytest.raises(ConcurrentRunError, match="conditional PUT refused"):
        store.write(PipelineState(pipeline="p", batch_seq=3), token)
    assert store.read("p")[1] == next_token
    holder = StateHandle(store, "p", lease_seconds=60)
    holder.acquire()
    with pytest.raises(ConcurrentRunError, match="held by runner"):
        StateHandle(store, "p", lease_seconds=60).acquire()
    holder.release()


def test_pipeline_with_offsets_on_s3(mariadb, database, make_config, s3_endpoint, s3_bucket) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {database}.t VALUES (1, 'a')")
    config = make_config(
        [f"{database}.t"], offsets={"uri": f"s3://{s3_bucket}/binlake", "endpoint_url": s3_endpoint}
    )
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"UPDATE {database}.t SET v = 'b'", f"INSERT INTO {database}.t VALUES (2, 'c')")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, f"{database}.t") == source_rows(mariadb, f"{database}.t")
    state, _ = pipeline.store.read(config.pipeline)
    assert state is not None and state.tables[f"{database}.t"].consistent


def test_unreachable_s3_store_is_reported(make_config, database) -> None:
    from cdc_lib.dev.local_mariadb import free_port

    config = make_config(
        [f"{database}.t"],
        offsets={"uri": "s3://nowhere/binlake", "endpoint_url": f"http://127.0.0.1:{free_port()}"},
    )
    with pytest.raises(OffsetStoreError, match="offsets.endpoint_url"):
        Pipeline(config).store.check_writable(config.pipeline)
