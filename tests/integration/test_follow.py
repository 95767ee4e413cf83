"""`binlake sync --follow` as a real process: changes flow while it runs, SIGTERM stops it between batches, a SIGKILL
around the Delta commit loses and doubles nothing, and a time budget ends it."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, scan_rows, source_rows, sql, write_config_file


class FollowProcess:
    """`binlake sync --follow` in a child process, its stdout lines collected as they come."""

    def __init__(self, config_path: Path, *arguments: str, env: dict[str, str] | None = None,
                 stderr_path: Path) -> None:
        environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **(env or {})}
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "sync", "--follow", *arguments],
                env=environment, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, wanted: Callable[[str], bool], *, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                assert self.process.poll() is None, f"follow exited {self.process.returncode}: {self.stderr()}"
                continue
            self.seen.append(line)
            if wanted(line):
                return line
        raise AssertionError(f"no such line within {timeout}s; saw {self.seen}; stderr: {self.stderr()}")

    def stop(self, *, timeout: float = 120) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout=timeout)

    def wait(self, *, timeout: float = 120) -> int:
        code = self.process.wait(timeout=timeout)
        time.sleep(0.2)  # let the reader thread drain the pipe
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]


def make_items(mariadb: Any, db: str) -> str:
    sql(
        mariadb,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {db}.items SELECT seq, seq * 3, 'start' FROM {db}.seq_1_to_120",
    )
    return f"{db}.items"


def change(mariadb: Any, db: str, round_number: int) -> None:
    base = 1000 * (round_number + 1)
    sql(
        mariadb,
        "START TRANSACTION",
        f"INSERT INTO {db}.items SELECT {base} + seq, seq + 7, 'r{round_number}' FROM {db}.seq_1_to_17",
        f"UPDATE {db}.items SET qty = qty + 13 WHERE id % 7 = {round_number % 7}",
        f"DELETE FROM {db}.items WHERE id % 19 = {round_number % 19} AND id < 1000",
        "COMMIT",
    )


def delta_matches_source(mariadb: Any, pipeline: Pipeline, table: str) -> bool:
    return sorted(scan_rows(pipeline.table_path(table))) == source_rows(mariadb, table)


def committed_versions(pipeline: Pipeline, table: str) -> list[int]:
    """The SetTransaction versions of binlake's commits to the table, in log order (one per batch that wrote it)."""
    application = pipeline.application(table)
    versions = []
    for entry in sorted((Path(pipeline.table_path(table)) / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action and action["txn"]["appId"] == application:
                versions.append(int(action["txn"]["version"]))
    return versions


def wrote(line: str) -> bool:
    return " batch " in line and " rows in " in line


@pytest.fixture
def followed(mariadb: Any, database: str, make_config: Any, tmp_path: Path) -> tuple[Pipeline, Path, str]:
    table = make_items(mariadb, database)
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    return pipeline, write_config_file(config, tmp_path / "binlake.yaml"), table


def test_changes_flow_while_following_and_sigterm_stops_cleanly(
    mariadb: Any, database: str, followed: tuple[Pipeline, Path, str], tmp_path: Path
) -> None:
    pipeline, config_path, table = followed
    runner = FollowProcess(config_path, "--poll", "0.25", stderr_path=tmp_path / "follow.err")
    try:
        change(mariadb, database, 1)
        first = runner.wait_for_line(wrote)
        assert f"{table} +17 " in first, first
        change(mariadb, database, 2)
        runner.wait_for_line(wrote)
        assert delta_matches_source(mariadb, pipeline, table)
        # Idle polls write nothing: the follow loop only looks at the binlog end.
        _, revision = pipeline.store.read(pipeline.config.pipeline)
        time.sleep(1.5)
        assert pipeline.store.read(pipeline.config.pipeline)[1] == revision
        assert runner.stop() == 0, runner.stderr()
    finally:
        runner.kill()
    assert any("follow stopped (stop requested)" in line for line in runner.seen), runner.seen
    state = pipeline.read_state()
    assert state.lease is None, "the lease is released on the way out"
    assert state.tables[table].applied_seq == state.batch_seq
    assert committed_versions(pipeline, table) == sorted(set(committed_versions(pipeline, table)))


def test_ctrl_c_during_a_batch_lets_it_finish_with_its_offsets(
    mariadb: Any, database: str, followed: tuple[Pipeline, Path, str], tmp_path: Path
) -> None:
    """SIGINT arrives while the batch sits right after its Delta commit (in a Spark session started by that very
    batch, which would take SIGINT over if it ran in the main thread): the batch still saves its offsets."""
    pipeline, config_path, table = followed
    pause = tmp_path / "paused"
    runner = FollowProcess(
        config_path, "--poll", "0.25", stderr_path=tmp_path / "follow.err",
        env={"BINLAKE_FAILPOINT_PAUSE": "after_delta_commit", "BINLAKE_FAILPOINT_PAUSE_FILE": str(pause)},
    )
    try:
        position_before = pipeline.read_state().tables[table].position
        change(mariadb, database, 3)
        deadline = time.monotonic() + 180
        while not pause.exists():
            assert time.monotonic() < deadline and runner.process.poll() is None, runner.stderr()
            time.sleep(0.1)
        runner.process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert runner.process.poll() is None, "it waits for the batch"
        pause.unlink()
        assert runner.wait() == 0, runner.stderr()
    finally:
        runner.kill()
    assert any(wrote(line) for line in runner.seen), runner.seen
    state = pipeline.read_state()
    assert state.lease is None
    assert state.tables[table].applied_seq == state.batch_seq == committed_versions(pipeline, table)[-1]
    assert state.tables[table].position > position_before
    assert delta_matches_source(mariadb, pipeline, table)


@pytest.mark.parametrize("failpoint", ["after_delta_commit", "before_offset_write"])
def test_kill_around_the_delta_commit_then_follow_again(
    failpoint: str, mariadb: Any, database: str, followed: tuple[Pipeline, Path, str], tmp_path: Path
) -> None:
    pipeline, config_path, table = followed
    # Written first, so that the follower's first batch (every batch reaches `before_offset_write`) carries it.
    change(mariadb, database, 4)
    before = committed_versions(pipeline, table)
    crashing = FollowProcess(config_path, "--poll", "0.25", stderr_path=tmp_path / "crash.err",
                             env={"BINLAKE_FAILPOINT": failpoint})
    try:
        assert crashing.wait(timeout=180) == -signal.SIGKILL, crashing.stderr()
    finally:
        crashing.kill()
    stored = pipeline.read_state()
    assert stored.lease is not None, "a killed follower leaves its lease behind"
    assert stored.tables[table].applied_seq < stored.batch_seq, "the offsets did not move"

    change(mariadb, database, 5)
    runner = FollowProcess(config_path, "--poll", "0.25", stderr_path=tmp_path / "follow.err")
    try:
        runner.wait_for_line(wrote)
        assert runner.stop() == 0, runner.stderr()
    finally:
        runner.kill()
    assert delta_matches_source(mariadb, pipeline, table), "nothing lost, nothing doubled"
    versions = committed_versions(pipeline, table)
    assert len(versions) == len(set(versions)) == len(before) + 2, (
        f"the crashed batch was adopted, not committed again: {before} → {versions}"
    )
    state = pipeline.read_state()
    assert state.tables[table].applied_seq == state.batch_seq == versions[-1]


def test_budget_ends_an_idle_follow_without_spark(followed: tuple[Pipeline, Path, str], tmp_path: Path) -> None:
    pipeline, config_path, table = followed
    started = time.monotonic()
    runner = FollowProcess(config_path, "--budget", "2.5", "--poll", "0.3", "--json",
                           stderr_path=tmp_path / "follow.err")
    try:
        assert runner.wait(timeout=60) == 0, runner.stderr()
    finally:
        runner.kill()
    took = time.monotonic() - started
    summary = json.loads(runner.seen[-1])["summary"]
    assert summary["stopped"] == "budget spent"
    assert summary["spark_started"] is False and summary["rows_written"] == 0
    assert 2.5 <= summary["seconds"] < 6 and took < 30, (summary, took)
    assert pipeline.read_state().lease is None


def test_a_busy_source_is_followed_with_each_batch_read_while_the_last_is_written(
    mariadb: Any, database: str, followed: tuple[Pipeline, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the source keeps writing, the next batch is read during the write of the current one (the open-ended
    read-ahead) and the follower goes on past the end it first saw; the table ends equal to the source."""
    from cdc_lib.pipeline import read_ahead
    from cdc_lib.pipeline.follow import follow

    pipeline, _, table = followed
    taken: list[bool] = []
    take = read_ahead.ReadAhead.take

    def counted(self: read_ahead.ReadAhead, cursors: list[Any]) -> Any:
        read = take(self, cursors)
        taken.append(read is not None)
        return read

    monkeypatch.setattr(read_ahead.ReadAhead, "take", counted)
    stop = threading.Event()
    outcome: list[Any] = []
    follower = threading.Thread(target=lambda: outcome.append(
        follow(pipeline, poll_seconds=0.05, stop=stop, budget_seconds=240)))
    follower.start()
    try:
        for round_number in range(60):  # back to back: commits land while batches are written
            change(mariadb, database, round_number)
        deadline = time.monotonic() + 120
        while not delta_matches_source(mariadb, pipeline, table) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        follower.join()
    (summary,) = outcome
    assert summary.stopped == "stop requested", summary
    assert summary.transactions >= 60 and sum(taken) >= 1, (summary, taken)
    assert delta_matches_source(mariadb, pipeline, table)
    state = pipeline.read_state()
    assert state.tables[table].applied_seq == state.batch_seq
    assert committed_versions(pipeline, table) == sorted(set(committed_versions(pipeline, table)))


def test_a_busy_sources_batches_are_a_poll_apart_and_the_follower_then_writes_nothing(
    mariadb: Any, database: str, followed: tuple[Pipeline, Path, str]
) -> None:
    """The cycle floor: a source committing every ~40 ms is followed in batches that begin a poll apart (not back
    to back, each as small as one write's time lets through), every change lands, and once the source stops the
    follower goes quiet: no batch, no offsets save."""
    from cdc_lib.pipeline.follow import FollowBatch, follow

    pipeline, _, table = followed
    poll = 0.85
    carried: list[FollowBatch] = []
    stop = threading.Event()
    outcome: list[Any] = []
    follower = threading.Thread(target=lambda: outcome.append(follow(
        pipeline, poll_seconds=poll, stop=stop, budget_seconds=240,
        on_batch=lambda batch: carried.append(batch) if batch.result.transactions else None)))
    follower.start()
    try:
        time.sleep(0.5)  # past the first batch, which saves what the reconciliation adopted
        writing_from = time.monotonic()
        for round_number in range(150):  # ~6 s of a commit every ~40 ms
            sql(mariadb, f"INSERT INTO {database}.items VALUES ({5000 + round_number}, {round_number * 3 + 1}, 'busy')")
            time.sleep(0.025)
        writing_s = time.monotonic() - writing_from
        deadline = time.monotonic() + 60
        while not delta_matches_source(mariadb, pipeline, table) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert delta_matches_source(mariadb, pipeline, table)
        caught_up_after = time.monotonic() - writing_from - writing_s
        # Quiet now: the idle follower writes nothing, not even its offsets.
        time.sleep(poll)
        _, revision = pipeline.store.read(pipeline.config.pipeline)
        batches_then = len(carried)
        time.sleep(3 * poll)
        assert pipeline.store.read(pipeline.config.pipeline)[1] == revision
        assert len(carried) == batches_then
    finally:
        stop.set()
        follower.join()
    (summary,) = outcome
    assert summary.transactions == 150 and summary.retries == 0, summary
    # Back to back, each batch would be one delta-rs append and its offsets (~0.1 s): dozens in the window.
    assert len(carried) <= writing_s / poll + 3, [round(batch.elapsed, 2) for batch in carried]
    assert len(carried) >= writing_s / poll / 2, "the batches still come a poll apart, not once at the end"
    assert caught_up_after < 4 * poll + 5, caught_up_after
    state = pipeline.read_state()
    assert state.tables[table].applied_seq == state.batch_seq
