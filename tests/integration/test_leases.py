"""The pipeline lease with its heartbeat, against the real MariaDB, Spark and Delta of the test session.

A batch longer than the lease keeps it; a runner whose lease was taken over stops before its next Delta
commit and writes nothing more; follow mode keeps the lease across idle stretches longer than it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cdc_lib.errors import ConcurrentRunError
from cdc_lib.pipeline.follow import follow
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.heartbeat import LeaseLostError
from cdc_lib.state.offset_store import StateHandle
from tests.conftest import delta_rows, source_rows, sql
from tests.integration.conftest import Background, assert_each_change_applied_once, binlake_commits, wait_for

LEASE_SECONDS = 5


def _pause_before_delta_commit(monkeypatch: pytest.MonkeyPatch, flag: Path) -> None:
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "before_delta_commit")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))


def _snapshotted_table(mariadb, database, make_config):
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v DECIMAL(9,2))",
        f"INSERT INTO {table} VALUES (1, 12.25), (2, 7.5)")
    config = make_config([table], offsets__lease_seconds=LEASE_SECONDS)
    Pipeline(config).snapshot()
    sql(mariadb, f"INSERT INTO {table} SELECT seq + 10, seq * 1.75 FROM {database}.seq_1_to_37",
        f"UPDATE {table} SET v = 99.13 WHERE id = 2")
    return config, table


def test_a_batch_longer_than_the_lease_keeps_it_and_commits(
    mariadb, database, make_config, tmp_path, monkeypatch
) -> None:
    config, table = _snapshotted_table(mariadb, database, make_config)
    pipeline = Pipeline(config)
    flag = tmp_path / "paused"
    _pause_before_delta_commit(monkeypatch, flag)
    run = Background(lambda: pipeline.sync())
    run.start()
    wait_for(flag.exists, timeout=120, what="the batch to reach its Delta commit")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
    paused_at = time.monotonic()
    refusals = 0
    while time.monotonic() - paused_at < LEASE_SECONDS * 1.75:  # well past the lease the batch started with
        with pytest.raises(ConcurrentRunError, match="held by runner"):
            StateHandle(pipeline.store, config.pipeline, lease_seconds=LEASE_SECONDS).acquire()
        refusals += 1
        time.sleep(0.5)
    assert refusals >= 15
    flag.unlink()
    results = run.outcome()
    assert results[0].tables[0].rows_written == 38
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert pipeline.read_state().lease is None, "released at the end"


def test_a_runner_whose_lease_was_taken_over_stops_before_its_next_delta_commit(
    mariadb, database, make_config, tmp_path, monkeypatch
) -> None:
    config, table = _snapshotted_table(mariadb, database, make_config)
    pipeline = Pipeline(config)
    commits_before = len(binlake_commits(config, table))
    flag = tmp_path / "paused"
    _pause_before_delta_commit(monkeypatch, flag)
    run = Background(lambda: pipeline.sync())
    run.start()
    wait_for(flag.exists, timeout=120, what="the batch to reach its Delta commit")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
    # Another runner writes the document (as one that found the lease expired would), while the first is paused.
    thief = StateHandle(pipeline.store, config.pipeline, lease_seconds=LEASE_SECONDS)
    thief.state, thief.token = pipeline.store.read(config.pipeline)  # type: ignore[assignment]
    thief.save()
    time.sleep(LEASE_SECONDS / 3 + 1.25)  # the first runner's next renewal is refused
    flag.unlink()
    with pytest.raises(LeaseLostError, match="another runner holds it now") as raised:
        run.outcome()
    assert raised.value.retryable
    assert len(binlake_commits(config, table)) == commits_before, "nothing more was committed"
    stored = pipeline.read_state()
    assert stored.lease is not None and stored.lease.owner == thief.owner, "the loser wrote nothing more"
    thief.release()
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert_each_change_applied_once(config, table)


def test_follow_keeps_the_lease_across_idle_stretches_longer_than_it(mariadb, database, make_config) -> None:
    config, table = _snapshotted_table(mariadb, database, make_config)
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)  # caught up: the follow run below has nothing to do for a while
    stop = threading.Event()
    run = Background(lambda: follow(pipeline, poll_seconds=0.25, stop=stop, give_up_after=0))
    run.start()
    wait_for(lambda: pipeline.read_state().lease is not None, timeout=60, what="follow to take the lease")
    started = time.monotonic()
    while time.monotonic() - started < LEASE_SECONDS * 2.25:
        with pytest.raises(ConcurrentRunError, match="held by runner"):
            StateHandle(pipeline.store, config.pipeline, lease_seconds=LEASE_SECONDS).acquire()
        time.sleep(0.75)
    sql(mariadb, f"UPDATE {table} SET v = 3.33 WHERE id = 1")
    wait_for(lambda: delta_rows(config, table) == source_rows(mariadb, table), timeout=120, interval=0.5,
             what="the change made after the idle stretch")
    stop.set()
    summary = run.outcome()
    assert summary.retries == 0 and summary.batches_written == 1
