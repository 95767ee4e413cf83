"""Keeping up with a busy primary (issue 12): MariaDB's apply rate and binlake's sustainable rate.

apply rate        the load writer (`bench.keepup.keepup_load`, its own process) writes the workload as fast as it
                  can for a few seconds: rows/s this MariaDB applies from one client.
drain rate        that backlog synced with `sync(until_caught_up=True)`: rows/s with full batches.
sustainable rate  the writer writes at a fixed rate R (transactions of `txn_rows` rows) for a window while
                  this process follows as `binlake sync --follow` does (`cdc_lib.pipeline.follow`: one lease, the next
                  batch read while one is written; `follow_trial(mode="sync")` calls `Pipeline.sync()`
                  back to back instead, as a scheduler of separate runs would); after each batch the lag is
                  the age of the oldest source commit not applied yet; the follower runs on past the window
                  until it has applied the writer's last commit. R passes when the lag stays under 60 s, does
                  not grow over the window's second half, and the last commit is applied in time
                  (`keepup_search.judge`). A log-space bisection (`keepup_search.RateSearch`) between drain/16
                  and 1.25 × drain picks the next R; the highest passing R is then held for the confirmation
                  window (5 minutes in a full run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.common import create_table, pipeline_config
from bench.keepup.keepup_search import (
    FollowSample,
    RateSearch,
    SourceCommit,
    applied_all,
    catch_up_seconds,
    judge,
    lag_series,
)
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.follow import follow
from cdc_lib.pipeline.pipeline import Pipeline

BASE_ROWS = 100_000


@dataclass(frozen=True)
class KeepupSizes:
    apply_seconds: float
    search_window_s: float
    confirm_window_s: float
    search_steps: int
    txn_rows: int
    lag_limit_s: float = 60.0


class Writer:
    """Runs the load writer process, carrying its key counters from one run to the next."""

    def __init__(self, server: LocalMariaDB, table: str, workload: str, txn_rows: int) -> None:
        self.server, self.table, self.workload, self.txn_rows = server, table, workload, txn_rows
        self.next_id, self.oldest_own = BASE_ROWS + 1, BASE_ROWS + 1

    def start(self, *, rate: float, seconds: float, out: Path | None) -> subprocess.Popen[str]:
        command = [
            sys.executable, "-m", "bench.keepup.keepup_load", "--socket", str(self.server.socket_path),
            "--table", self.table, "--workload", self.workload, "--rate", str(rate), "--seconds", str(seconds),
            "--txn-rows", str(self.txn_rows), "--first-id", str(self.next_id), "--oldest-own", str(self.oldest_own),
            "--base-rows", str(BASE_ROWS),
        ]
        if out is not None:
            command += ["--out", str(out)]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])

    def finish(self, process: subprocess.Popen[str]) -> dict[str, Any]:
        output, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"the load writer failed with exit code {process.returncode}")
        summary: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
        self.next_id, self.oldest_own = summary["next_id"], summary["oldest_own"]
        return summary


def read_commits(path: Path) -> list[SourceCommit]:
    commits = []
    for line in path.read_text().splitlines():
        at, rows, file_name, offset = json.loads(line)
        commits.append(SourceCommit(at=at, rows=rows, end=(file_name, offset)))
    return commits


#: How the follower runs: `follow` is `binlake sync --follow` (one lease and connection, the next batch read
#: while one is written); `sync` calls `Pipeline.sync()` back to back, as a scheduler of separate runs would.
FollowMode = Literal["follow", "sync"]


def follow_trial(pipeline: Pipeline, writer: Writer, table: str, *, rate: float, window_s: float,
                 limit_s: float, work: Path, mode: FollowMode = "follow") -> dict[str, Any]:
    """One window at `rate`: the writer writes, this process follows (`mode`); the lag verdict."""
    pipeline.sync(until_caught_up=True)  # start from no lag
    out = work / f"commits-{writer.workload}-{int(rate)}.jsonl"
    process = writer.start(rate=rate, seconds=window_s, out=out)
    started = time.time()
    samples: list[FollowSample] = []
    stopped_at: list[float] = []
    retries = 0

    def sample() -> None:
        position = pipeline.read_state().tables[table].position
        samples.append(FollowSample(at=time.time(), applied=(position.file, position.pos)))

    last_commit: list[SourceCommit | None] = []

    def drained_or_late() -> bool:
        """Once the writer is done: the follower applied its last commit, or `limit_s` passed since it."""
        if not last_commit:  # read once, after the writer closed the file
            commits = read_commits(out)
            last_commit.append(commits[-1] if commits else None)
        last = last_commit[0]
        return last is None or applied_all(samples, last) or time.time() >= last.at + limit_s

    if mode == "follow":
        stop = threading.Event()

        def stop_once_drained() -> None:
            # The window's last lag point is the batch that applies its last commit: a follower stops between
            # batches, so stopping it when the writer stops would leave the last point before the window's end.
            process.wait()
            time.sleep(max(0.0, started + window_s - time.time()))
            while not drained_or_late():
                time.sleep(0.05)
            stopped_at.append(time.time())
            stop.set()

        watcher = threading.Thread(target=stop_once_drained, daemon=True)
        watcher.start()
        followed = follow(pipeline, stop=stop, on_batch=lambda _: sample())  # the shipped poll
        watcher.join()
        retries = followed.retries
    else:
        while process.poll() is None or time.time() < started + window_s or not drained_or_late():
            pipeline.sync()
            sample()
    batches = len(samples)
    summary = writer.finish(process)
    commits = read_commits(out)
    if not commits:
        raise RuntimeError("the load writer committed nothing")
    series = lag_series(commits, samples)
    verdict = judge(series, window_start=commits[0].at, window_end=commits[-1].at, limit_s=limit_s)
    achieved = summary["rows"] / summary["seconds"]
    return {"rate": rate, "mode": mode, "achieved_rows_per_s": achieved, "window_s": window_s, "batches": batches,
            "steady": verdict.steady and achieved >= 0.9 * rate, "max_lag_s": verdict.max_lag_s,
            "late_slope": verdict.late_slope,
            "reason": verdict.reason if achieved >= 0.9 * rate else f"the writer reached only {achieved:,.0f} rows/s",
            "retries": retries,
            # When the last commit, the stop and the last batch happened, against the writer's window end.
            "last_sample_after_window_end_s": round(samples[-1].at - commits[-1].at, 2) if samples else None,
            "stop_after_window_end_s": round(stopped_at[0] - commits[-1].at, 2) if stopped_at else None,
            "sample_at_s": [round(point.at - commits[0].at, 2) for point in series],
            "lag_s": [round(point.lag_s, 2) for point in series]}


def keep_up(server: LocalMariaDB, work: Path, workload: str, sizes: KeepupSizes, server_id: int) -> dict[str, Any]:
    """Apply rate, drain rate and sustainable rate of one workload ('mixed' or 'insert')."""
    table = f"keepup.load_{workload}"  # not `keepup.insert`: INSERT is a reserved word
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, table.split(".")[1], BASE_ROWS)
    finally:
        connection.close()
    pipeline = Pipeline(load_config(pipeline_config(work, server.port, f"keepup_{workload}", [table], server_id)))
    pipeline.snapshot()
    writer = Writer(server, table, workload, sizes.txn_rows)
    summary = writer.finish(writer.start(rate=0, seconds=sizes.apply_seconds, out=None))
    apply_rate = summary["rows"] / summary["seconds"]
    started = time.perf_counter()
    batches = pipeline.sync(until_caught_up=True)
    drain_s = time.perf_counter() - started
    drained = sum(batch.row_changes for batch in batches)
    drain_rate = drained / drain_s
    print(f"  {workload}: MariaDB applies {apply_rate:,.0f} rows/s; binlake drains {drained:,} rows at "
          f"{drain_rate:,.0f} rows/s ({len(batches)} batches)", flush=True)
    search = RateSearch(low=drain_rate / 16, high=drain_rate * 1.25, steps=sizes.search_steps)
    trials = []
    while not search.done():
        rate = round(search.propose())
        trial = follow_trial(pipeline, writer, table, rate=rate, window_s=sizes.search_window_s,
                             limit_s=sizes.lag_limit_s, work=work)
        print(f"  {workload} at {rate:,} rows/s for {sizes.search_window_s:.0f} s: max lag {trial['max_lag_s']:.1f} s"
              f" → {trial['reason']}", flush=True)
        trials.append(trial)
        search.record(rate, trial["steady"])
    best = search.best
    confirm: dict[str, Any] | None = None
    if best is not None and sizes.confirm_window_s > sizes.search_window_s:
        confirm = follow_trial(pipeline, writer, table, rate=best, window_s=sizes.confirm_window_s,
                               limit_s=sizes.lag_limit_s, work=work)
        print(f"  {workload} confirmation at {best:,.0f} rows/s for {sizes.confirm_window_s:.0f} s: "
              f"max lag {confirm['max_lag_s']:.1f} s → {confirm['reason']}", flush=True)
    window = sizes.confirm_window_s if confirm is not None else sizes.search_window_s
    sustainable = best if confirm is None or confirm["steady"] else None
    for trial in trials:
        trial.pop("sample_at_s")
        trial.pop("lag_s")  # keep the JSON small: the verdict figures suffice for the search trials
    return {
        "workload": workload, "txn_rows": sizes.txn_rows, "apply_rows_per_s": apply_rate,
        "drain_rows_per_s": drain_rate, "drained_rows": drained, "drain_batches": len(batches),
        "sustainable_rows_per_s": sustainable, "window_s": window, "trials": trials, "confirmation": confirm,
        "sustainable_vs_apply": sustainable / apply_rate if sustainable else None,
        # One hour behind at the sustainable rate, the source going on at half of it: time to catch up.
        "catch_up_1h_backlog_s": catch_up_seconds(3600 * sustainable, drain_rate, sustainable / 2)
        if sustainable else None,
    }
