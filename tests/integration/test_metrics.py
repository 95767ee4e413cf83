"""Metrics from a real pipeline: `binlake status --format openmetrics` after a snapshot, changes and a stopped table,
and follow mode's `/metrics` endpoint scraped while batches run; both read with Prometheus's OpenMetrics parser."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_text_families

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.status.metrics import collect
from tests.conftest import CDC_PASSWORD, run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import wait_for

#: What an OpenMetrics endpoint must answer with (written out here, not taken from binlake).
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _value(families: dict[str, Any], family: str, sample: str, **labels: str) -> float | None:
    matches = [s.value for s in families[family].samples if s.name == sample
               and all(s.labels.get(key) == value for key, value in labels.items())] if family in families else []
    assert len(matches) <= 1, matches
    return float(matches[0]) if matches else None


def _live_files(path: str) -> tuple[int, int]:
    """The table's live data files and their bytes on disk, as delta-rs names them and the file system sizes them."""
    uris = DeltaTable(path).file_uris()
    return len(uris), sum(os.path.getsize(uri.removeprefix("file://")) for uri in uris)


def _make_tables(server: LocalMariaDB, db: str) -> None:
    sql(
        server,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {db}.items SELECT seq, seq * 3, 'start' FROM {db}.seq_1_to_50",
        f"CREATE TABLE {db}.bad (id INT PRIMARY KEY, a INT, b INT)",
        f"INSERT INTO {db}.bad VALUES (1, 1, 1)",
    )


def test_status_openmetrics_after_snapshot_changes_and_a_stopped_table(
    mariadb: LocalMariaDB, database: str, make_config: Any, tmp_path: Path
) -> None:
    db = database
    _make_tables(mariadb, db)
    items, bad = f"{db}.items", f"{db}.bad"
    config = make_config([items, bad])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    # Distinct keys per operation, so no change folds into another: what is applied is what was made.
    sql(
        mariadb,
        f"INSERT INTO {db}.items SELECT 1000 + seq, seq, 'new' FROM {db}.seq_1_to_5",
        f"UPDATE {db}.items SET qty = qty + 1 WHERE id BETWEEN 1 AND 3",
        f"DELETE FROM {db}.items WHERE id IN (10, 11)",
        f"ALTER TABLE {db}.bad DROP COLUMN b",  # not applied exactly: stops `bad` (invariant 9)
        f"INSERT INTO {db}.bad VALUES (2, 2)",
    )
    pipeline.sync(until_caught_up=True)
    sql(
        mariadb,
        f"INSERT INTO {db}.items VALUES (2001, 1, 'x'), (2002, 2, 'y')",
        f"UPDATE {db}.items SET label = 'moved' WHERE id = 20",
        f"DELETE FROM {db}.items WHERE id = 30",
    )
    pipeline.sync(until_caught_up=True)
    assert sorted(scan_rows(pipeline.table_path(items))) == source_rows(mariadb, items)

    started = time.monotonic()
    statuses = pipeline.status()
    status_seconds = time.monotonic() - started
    collect(pipeline.context, statuses)
    print(f"status {status_seconds * 1000:.0f} ms; the metrics' own share (a Delta log load per table) "
          f"{(time.monotonic() - started - status_seconds) * 1000:.0f} ms for {len(statuses)} tables")
    done = run_cli(config_path, "status", "--format", "openmetrics")

    assert done.returncode == 0, done.stderr  # the stopped table is in the metrics, not in the exit code
    assert done.stdout.endswith("# EOF\n")
    families = _families(done.stdout)
    pipeline_name = config.pipeline
    for operation, made in (("insert", 7), ("update", 4), ("delete", 3)):
        assert _value(families, "binlake_rows_applied", "binlake_rows_applied_total", table=items,
                      operation=operation, pipeline=pipeline_name) == made, operation
    assert _value(families, "binlake_table_state", "binlake_table_state", table=items, state="healthy") == 1
    assert _value(families, "binlake_table_state", "binlake_table_state", table=bad, state="stopped") == 1
    assert _value(families, "binlake_table_state", "binlake_table_state", table=bad, state="healthy") == 0
    assert _value(families, "binlake_lag_seconds", "binlake_lag_seconds", table=items) == 0
    assert _value(families, "binlake_lag_bytes", "binlake_lag_bytes", table=items) == 0
    assert _value(families, "binlake_lag_events", "binlake_lag_events", table=items) == 0
    files, size = _live_files(pipeline.table_path(items))
    assert _value(families, "binlake_table_files", "binlake_table_files", table=items) == files
    assert _value(families, "binlake_table_bytes", "binlake_table_bytes", table=items) == size
    assert _value(families, "binlake_delta_version", "binlake_delta_version", table=items) == DeltaTable(
        pipeline.table_path(items)).version()
    runway = _value(families, "binlake_binlog_runway_seconds", "binlake_binlog_runway_seconds", table=items)
    assert runway is not None and runway > 0
    # The older text format, for node_exporter's textfile collector: the same figures.
    classic = run_cli(config_path, "status", "--format", "prometheus")
    assert classic.returncode == 0, classic.stderr
    parsed = {family.name: family for family in prometheus_text_families(classic.stdout)}
    assert parsed["binlake_rows_applied"].type == "counter"
    assert sorted((s.labels["operation"], s.value) for s in parsed["binlake_rows_applied"].samples
                  if s.labels["table"] == items) == [("delete", 3), ("insert", 7), ("update", 4)]
    # The other formats are unchanged: JSON (now with the rows applied) and the table for a person.
    as_json = run_cli(config_path, "status", "--format", "json")
    assert as_json.returncode == 1  # a stopped table
    assert {row["table"]: row["rows_applied"] for row in json.loads(as_json.stdout)}[items] == {
        "insert": 7, "update": 4, "delete": 3}
    as_text = run_cli(config_path, "status")
    assert as_text.stdout.startswith("table ") and items in as_text.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: How long each scrape of the follow test took, while batches ran.
SCRAPE_SECONDS: list[float] = []


def _scrape(url: str) -> tuple[str, dict[str, Any]]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as response:
        body = response.read().decode()
        SCRAPE_SECONDS.append(time.monotonic() - started)
        return response.headers["Content-Type"], _families(body)


def test_follow_serves_metrics_that_move_and_stops_serving_with_it(
    mariadb: LocalMariaDB, database: str, make_config: Any, tmp_path: Path
) -> None:
    db = database
    _make_tables(mariadb, db)
    items = f"{db}.items"
    config = make_config([items])
    Pipeline(config).snapshot()
    port = _free_port()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    document = yaml.safe_load(config_path.read_text())
    document["metrics"] = {"address": f"127.0.0.1:{port}", "refresh_seconds": 1}
    config_path.write_text(yaml.safe_dump(document))
    url = f"http://127.0.0.1:{port}/metrics"
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"}
    with open(tmp_path / "follow.err", "wb") as stderr:
        follower = subprocess.Popen(
            [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "sync", "--follow", "--poll", "0.25"],
            env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
        )
    try:
        def served() -> tuple[str, dict[str, Any]] | None:
            assert follower.poll() is None, (tmp_path / "follow.err").read_text()[-3000:]
            try:
                content_type, families = _scrape(url)
            except (urllib.error.URLError, ConnectionError):
                return None
            return (content_type, families) if "binlake_table_state" in families else None

        content_type, first = wait_for(served, timeout=180, interval=0.2, what="the metrics endpoint")
        assert content_type == OPENMETRICS_CONTENT_TYPE
        assert _value(first, "binlake_table_state", "binlake_table_state", table=items, state="healthy") == 1
        before_batches = _value(first, "binlake_batches", "binlake_batches_total") or 0
        for round_number in range(3):
            base = 10_000 * (round_number + 1)
            sql(mariadb, f"INSERT INTO {db}.items SELECT {base} + seq, seq, 'r' FROM {db}.seq_1_to_4",
                f"DELETE FROM {db}.items WHERE id = {round_number + 40}")
            wanted = 4 * (round_number + 1)

            def moved(wanted: int = wanted) -> dict[str, Any] | None:
                _, families = _scrape(url)  # while the follower runs its batches
                applied = _value(families, "binlake_rows_applied", "binlake_rows_applied_total", table=items,
                                 operation="insert")
                return families if applied == wanted else None

            families = wait_for(moved, timeout=120, interval=0.2, what=f"{wanted} inserts in the metrics")
        assert _value(families, "binlake_process_rows_applied", "binlake_process_rows_applied_total", table=items,
                      operation="insert") == 12
        assert _value(families, "binlake_rows_applied", "binlake_rows_applied_total", table=items,
                      operation="delete") == 3
        assert (_value(families, "binlake_batches", "binlake_batches_total") or 0) >= before_batches + 3
        commits = _value(families, "binlake_commit_duration_seconds", "binlake_commit_duration_seconds_count",
                         table=items)
        assert commits is not None and commits >= 3
        assert (_value(families, "binlake_batch_duration_seconds", "binlake_batch_duration_seconds_sum") or 0) > 0
        assert _value(families, "binlake_lag_bytes", "binlake_lag_bytes", table=items) == 0
        print(f"{len(SCRAPE_SECONDS)} scrapes while following: max {max(SCRAPE_SECONDS) * 1000:.1f} ms, "
              f"median {sorted(SCRAPE_SECONDS)[len(SCRAPE_SECONDS) // 2] * 1000:.1f} ms")
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(timeout=120) == 0, (tmp_path / "follow.err").read_text()[-3000:]
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(timeout=30)
    with pytest.raises(urllib.error.URLError):  # the endpoint went with follow mode: nothing listens there
        urllib.request.urlopen(url, timeout=5)
    assert sorted(scan_rows(Pipeline(config).table_path(items))) == source_rows(mariadb, items)
