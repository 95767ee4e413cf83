"""A passing fault is not the table's fault (invariant 14): a full disk, an object store answering 503 SlowDown
and a commit conflict with another Delta writer leave the table *retrying* — nothing of its batch applied, its
offset where it was, the other tables flowing — and a later sync applies it exactly, without a re-snapshot.
`binlake resume` takes a stopped table back at its offset once the user fixed the cause.

Each test prints one `FAULT` line (outcome, time to detect, time to recover, rows lost, rows applied twice);
run with `-s` to read them. Delta contents are read back with delta-rs's own scan, not binlake's.
"""

from __future__ import annotations

import datetime as dt
import http.client
import http.server
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB, free_port
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_rs.writer import storage_options, table_uri
from tests.conftest import run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import s3_sink

# -- helpers -----------------------------------------------------------------------------------------------------


def _tables(server: LocalMariaDB, db: str, *names: str, rows: int = 50) -> list[str]:
    for name in names:
        sql(server, f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(200))",
            f"INSERT INTO {db}.{name} SELECT seq, seq, REPEAT('n', 100) FROM {db}.seq_1_to_{rows}")
    return [f"{db}.{name}" for name in names]


def _change(server: LocalMariaDB, table: str, round_number: int) -> None:
    """Inserts, updates and deletes in one transaction: a replay that doubled or lost one would show."""
    base = 1000 * (round_number + 1)
    sql(server, "START TRANSACTION",
        f"INSERT INTO {table} SELECT {base} + seq, seq, REPEAT('r', 150) FROM seq_1_to_40",
        f"UPDATE {table} SET qty = qty + 100 WHERE id % 3 = {round_number % 3}",
        f"DELETE FROM {table} WHERE id % 7 = {round_number % 7} AND id < {base}",
        "COMMIT", database=table.partition(".")[0])


def _compare(server: LocalMariaDB, pipeline: Pipeline, table: str, *, endpoint: str | None = None
             ) -> tuple[int, int, bool]:
    """(rows lost, rows applied twice, equal) of the table's Delta copy, read by delta-rs, against the source;
    `endpoint`: the S3 server to read from (the real one, not the test's proxy)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    path = pipeline.table_path(table)
    options = storage_options(path, pipeline.sink)
    if options is not None and endpoint is not None:
        options["AWS_ENDPOINT_URL"] = endpoint
    target = DeltaTable(table_uri(path), storage_options=options)
    reader = QueryBuilder().register("t", target).execute("SELECT * FROM t")
    delta = sorted(tuple(row.values()) for row in pa.table(reader.read_all()).to_pylist())
    source = source_rows(server, table)
    keys = [row[0] for row in delta]
    lost = len({row[0] for row in source} - set(keys))
    doubled = len(keys) - len(set(keys))
    return lost, doubled, delta == source


def _report(fault: str, outcome: str, detect: float, recover: float, lost: int, doubled: int) -> None:
    print(f"\nFAULT {fault}: outcome {outcome}; detected in {detect:.2f}s; recovered in {recover:.2f}s; "
          f"rows lost {lost}; rows applied twice {doubled}")


def _compare_all(server: LocalMariaDB, pipeline: Pipeline, tables: tuple[str, ...], *, endpoint: str
                 ) -> tuple[int, int]:
    """Each table equal to its source (nothing lost, nothing doubled); the rows lost and doubled in all."""
    totals = [0, 0]
    for name in tables:
        lost, doubled, equal = _compare(server, pipeline, name, endpoint=endpoint)
        assert (lost, doubled, equal) == (0, 0, True), name
        totals[0] += lost
        totals[1] += doubled
    return totals[0], totals[1]


def _wait_until_due(pipeline: Pipeline, table: str) -> None:
    """Sleep out the table's back-off (its next attempt time)."""
    retrying = pipeline.read_state().tables[table].retrying
    assert retrying is not None
    left = (dt.datetime.fromisoformat(retrying.next_attempt_at) - dt.datetime.now(dt.UTC)).total_seconds()
    if left > 0:
        time.sleep(left + 0.05)


def _no_native_noise(stderr: str) -> None:
    for marker in ("panicked", "RUST_BACKTRACE", "stack backtrace", "Traceback"):
        assert marker not in stderr, f"{marker!r} reached the terminal:\n{stderr[-3000:]}"


# -- (a) a full disk ------------------------------------------------------------------------------------------------


@pytest.fixture
def small_filesystem() -> Iterator[Callable[[str], Path]]:
    """Mounts a 16 MiB tmpfs at a folder, for this test only (the suite runs as root in CI); never skipped."""
    mounted: list[Path] = []

    def mount(folder: str) -> Path:
        mount_point = Path(folder)
        mount_point.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"cannot mount a tmpfs for the full-disk test (it needs root or CAP_SYS_ADMIN): "
                        f"{done.stderr.strip()}")
        mounted.append(mount_point)
        return mount_point

    yield mount
    for mount_point in mounted:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(mount_point: Path) -> Path:
    """Fill the filesystem to the last byte (unbuffered writes: a buffered close would fail on the last flush)."""
    filler = mount_point / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while os.write(descriptor, b"\0" * chunk):
                    pass
            except OSError:
                pass
    finally:
        os.close(descriptor)
    return filler


def test_a_full_disk_leaves_the_table_retrying_and_a_later_sync_applies_it(
    mariadb, database, config_file, small_filesystem, tmp_path
) -> None:
    full, other = _tables(mariadb, database, "full", "other")
    config, config_path = config_file([full, other])
    pipeline = Pipeline(config)
    # The one table's Delta folder is a small filesystem of its own: the lake's disk fills for it alone.
    full_path = pipeline.table_path(full)
    small_disk = small_filesystem(full_path)
    pipeline.snapshot()
    offset = pipeline.read_state().tables[full].position
    filler = _fill(small_disk)
    for round_number in range(2):
        _change(mariadb, full, round_number)
        _change(mariadb, other, round_number)
    logs = tmp_path / "logs"
    env = {"BINLAKE_LOG_DIR": str(logs), "RUST_BACKTRACE": "1"}

    began = time.monotonic()
    failed = run_cli(config_path, "sync", env=env)
    detect = time.monotonic() - began

    assert failed.returncode == 0, failed.stderr
    _no_native_noise(failed.stderr)
    assert f"{full}: retrying: disk full" in failed.stdout, failed.stdout
    state = pipeline.read_state().tables[full]
    assert state.error is None and state.retrying is not None and state.retrying.attempts == 1
    assert "No space left on device" in state.retrying.cause
    assert state.position == offset, "the offset did not move"
    assert _compare(mariadb, pipeline, other) == (0, 0, True), "the other table flowed"
    status = json.loads(run_cli(config_path, "status", "--json", env=env).stdout)
    shown = {row["table"]: row for row in status}
    assert shown[full]["error"] is None and shown[full]["retrying"]["attempts"] == 1
    text = run_cli(config_path, "status", env=env).stdout
    assert "retrying: disk full" in text and "1 attempt" in text, text

    # Still full: the next sync after the back-off tries again, counts the attempt, and still asks for nothing.
    _wait_until_due(pipeline, full)
    again = run_cli(config_path, "sync", env=env)
    assert again.returncode == 0, again.stderr
    _no_native_noise(again.stderr)
    state = pipeline.read_state().tables[full]
    assert state.retrying is not None and state.retrying.attempts == 2 and state.position == offset
    assert "snapshot" not in again.stdout + again.stderr, "no re-snapshot asked for"

    freed = time.monotonic()
    filler.unlink()
    _wait_until_due(pipeline, full)
    recovered = run_cli(config_path, "sync", "--until-caught-up", env=env)
    recover = time.monotonic() - freed
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    _no_native_noise(recovered.stderr)
    state = pipeline.read_state().tables[full]
    assert state.error is None and state.retrying is None and state.position > offset
    lost, doubled, equal = _compare(mariadb, pipeline, full)
    assert (lost, doubled, equal) == (0, 0, True)
    _report("disk full (ENOSPC on the table's Delta folder)", "retrying, then applied", detect, recover, lost,
            doubled)


# -- (b) an object store that answers 503 SlowDown -------------------------------------------------------------


class SlowDownProxy:
    """An HTTP proxy on loopback in front of the moto server that can answer 503 SlowDown, as S3 does when it
    throttles: `throttle(seconds, path_part=..., methods=...)` refuses the matching requests for that long (`stop`
    ends it early); `requests_refused` counts the refusals."""

    BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request '
            b"rate.</Message><RequestId>binlake-test</RequestId></Error>")

    def __init__(self, target: str) -> None:
        self.target_port = int(target.rsplit(":", 1)[1])
        self.port = free_port()
        self.failing_until = 0.0
        self.path_part = ""
        self.methods: frozenset[str] | None = None
        self.requests_refused = 0
        self.first_refused: float | None = None
        self.stalled_until = 0.0
        self.stall_part = ""
        self.stall_methods: frozenset[str] | None = None
        self.requests_stalled = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body()
                if proxy.stalls(self.command, self.path):
                    # A silent object store: the request is taken and never answered while the stall lasts.
                    proxy.requests_stalled += 1
                    while proxy.stalls(self.command, self.path):
                        time.sleep(0.1)
                    self.close_connection = True
                    return
                if proxy.refuses(self.command, self.path):
                    proxy.requests_refused += 1
                    proxy.first_refused = proxy.first_refused or time.monotonic()
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(proxy.BODY)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(proxy.BODY)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.target_port, timeout=60)
                try:
                    headers = {key: value for key, value in self.headers.items()
                               if key.lower() not in ("transfer-encoding", "content-length", "connection")}
                    headers["Content-Length"] = str(len(body))
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for key, value in answer.getheaders():
                        if key.lower() not in ("transfer-encoding", "content-length", "connection", "date", "server"):
                            self.send_header(key, value)
                    # A HEAD answer's length is the object's, not of the (empty) body.
                    length = answer.getheader("Content-Length") if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 - http.server's names

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def throttle(self, seconds: float, *, path_part: str = "", methods: frozenset[str] | None = None) -> None:
        self.first_refused = None
        self.path_part, self.methods = path_part, methods
        self.failing_until = time.monotonic() + seconds

    def stop(self) -> None:
        self.failing_until = 0.0
        self.stalled_until = 0.0

    def stall(self, seconds: float, *, path_part: str = "", methods: frozenset[str] | None = None) -> None:
        """Take the matching requests and answer none of them for `seconds` (then drop their connections)."""
        self.stall_part, self.stall_methods = path_part, methods
        self.stalled_until = time.monotonic() + seconds

    def stalls(self, method: str, path: str) -> bool:
        return (time.monotonic() < self.stalled_until and self.stall_part in path
                and (self.stall_methods is None or method in self.stall_methods))

    def refuses(self, method: str, path: str) -> bool:
        return (time.monotonic() < self.failing_until and self.path_part in path
                and (self.methods is None or method in self.methods))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slowdown_proxy(s3_endpoint: str) -> Iterator[SlowDownProxy]:
    proxy = SlowDownProxy(s3_endpoint)
    yield proxy
    proxy.close()


def test_an_object_store_answering_503_slowdown_is_retried_and_recovers(
    mariadb, database, make_config, s3_bucket, s3_endpoint, slowdown_proxy, tmp_path
) -> None:
    throttled, other = _tables(mariadb, database, "throttled", "other")
    # The throttled table's sink goes through the proxy, as do the offsets; the other table's sink is the same
    # bucket (one sink per pipeline), so the proxy's window decides which requests fail.
    config: PipelineConfig = make_config(
        [throttled, other], sink=s3_sink(slowdown_proxy.endpoint, s3_bucket),
        offsets={"uri": f"s3://{s3_bucket}/offsets", "endpoint_url": slowdown_proxy.endpoint},
    )
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    offsets = {name: table.position for name, table in pipeline.read_state().tables.items()}
    for round_number in range(2):
        _change(mariadb, throttled, round_number)
        _change(mariadb, other, round_number)
    env = {"AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
           "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"], "BINLAKE_LOG_DIR": str(tmp_path / "logs")}

    # The object store throttles the writes of one table's files past every client's own retries (boto3's five
    # attempts, delta-rs's object store's ten): that table must wait, not stop, and ask for no re-snapshot.
    slowdown_proxy.throttle(3600, path_part=f"/{database}/throttled/", methods=frozenset({"PUT", "POST"}))
    began = time.monotonic()
    during = run_cli(config_path, "sync", env=env)
    detect = time.monotonic() - began
    slowdown_proxy.stop()
    freed = time.monotonic()
    refused = slowdown_proxy.requests_refused
    assert refused > 0, (pipeline.table_path(throttled), during.stdout, during.stderr[-2000:])
    assert during.returncode == 0, during.stdout + during.stderr
    _no_native_noise(during.stderr)
    assert "snapshot --table" not in during.stdout + during.stderr, during.stdout + during.stderr
    state = pipeline.read_state()
    assert all(table.error is None for table in state.tables.values()), {n: t.error for n, t in state.tables.items()}
    waiting = state.tables[throttled].retrying
    assert waiting is not None and waiting.cause.startswith("object store"), waiting
    assert state.tables[throttled].position == offsets[throttled], "the throttled table's offset stays"
    assert _compare(mariadb, pipeline, other, endpoint=s3_endpoint) == (0, 0, True), "the other table flowed"
    _wait_until_due(pipeline, throttled)
    recovered = run_cli(config_path, "sync", "--until-caught-up", env=env)
    recover = time.monotonic() - freed
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    state = pipeline.read_state()
    assert all(table.error is None and table.retrying is None for table in state.tables.values())
    lost, doubled, equal = _compare(mariadb, pipeline, throttled, endpoint=s3_endpoint)
    assert (lost, doubled, equal) == (0, 0, True)
    _report(f"S3 503 SlowDown on one table's writes past the clients' retries ({refused} requests refused)",
            "retrying, then applied", detect, recover, lost, doubled)

    # A short storm on every request (the offset store's too): the clients' retries and the next run absorb it.
    for round_number in range(2, 4):
        _change(mariadb, throttled, round_number)
        _change(mariadb, other, round_number)
    slowdown_proxy.throttle(6)
    began = time.monotonic()
    short = run_cli(config_path, "sync", env=env)
    detect = time.monotonic() - began
    _no_native_noise(short.stderr)
    assert short.returncode in (0, 2), short.stdout + short.stderr
    assert "snapshot --table" not in short.stdout + short.stderr, short.stdout + short.stderr
    time.sleep(max(0.0, slowdown_proxy.failing_until - time.monotonic()))
    freed = time.monotonic()
    for name, table in pipeline.read_state().tables.items():
        assert table.error is None, table.error
        if table.retrying is not None:
            _wait_until_due(pipeline, name)
    again = run_cli(config_path, "sync", "--until-caught-up", env=env)
    recover = time.monotonic() - freed
    assert again.returncode == 0, again.stdout + again.stderr
    totals = _compare_all(mariadb, pipeline, (throttled, other), endpoint=s3_endpoint)
    outcome = "the run failed retryably (exit 2), the next recovered" if short.returncode else "absorbed by retries"
    _report(f"S3 503 SlowDown on every request for 6 s ({slowdown_proxy.requests_refused - refused} refused)",
            outcome, detect, recover, totals[0], totals[1])


def test_a_stalled_object_store_is_bounded_and_recovers(
    mariadb, database, make_config, s3_bucket, s3_endpoint, slowdown_proxy, tmp_path
) -> None:
    """An object store that takes a table's writes and never answers (a half-open connection, a stuck gateway):
    the run does not hang — each call is bounded by `source.network_timeout_seconds` — the table waits without a
    re-snapshot, and once the store answers again the next run applies the batch exactly once."""
    stalled, other = _tables(mariadb, database, "stalled", "other")
    bound = 5
    config: PipelineConfig = make_config(
        [stalled, other], sink=s3_sink(slowdown_proxy.endpoint, s3_bucket),
        offsets={"uri": f"s3://{s3_bucket}/offsets", "endpoint_url": s3_endpoint},
        source__network_timeout_seconds=bound,
    )
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    offsets = {name: table.position for name, table in pipeline.read_state().tables.items()}
    _change(mariadb, stalled, 0)
    _change(mariadb, other, 0)
    env = {"AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
           "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"], "BINLAKE_LOG_DIR": str(tmp_path / "logs")}
    slowdown_proxy.stall(3600, path_part=f"/{database}/stalled/", methods=frozenset({"PUT", "POST"}))
    began = time.monotonic()
    during = run_cli(config_path, "sync", env=env, timeout=600)  # without the bounds: still waiting at 600 s
    detect = time.monotonic() - began
    slowdown_proxy.stop()
    freed = time.monotonic()
    assert slowdown_proxy.requests_stalled > 0, during.stdout + during.stderr[-2000:]
    assert during.returncode in (0, 2), during.stdout + during.stderr
    _no_native_noise(during.stderr)
    assert "snapshot --table" not in during.stdout + during.stderr, during.stdout + during.stderr
    state = pipeline.read_state()
    assert all(table.error is None for table in state.tables.values()), {n: t.error for n, t in state.tables.items()}
    assert state.tables[stalled].position == offsets[stalled], "the stalled table's offset stays"
    if state.tables[stalled].retrying is not None:
        _wait_until_due(pipeline, stalled)
    recovered = run_cli(config_path, "sync", "--until-caught-up", env=env)
    recover = time.monotonic() - freed
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    totals = _compare_all(mariadb, pipeline, (stalled, other), endpoint=s3_endpoint)
    outcome = "the run failed retryably (exit 2)" if during.returncode else "the table waited (retrying)"
    _report(f"S3 stalled on one table's writes (bound {bound} s, {slowdown_proxy.requests_stalled} requests held)",
            f"{outcome}, the next run applied it", detect, recover, totals[0], totals[1])


# -- (c) a commit conflict with another Delta writer ----------------------------------------------------------


def test_a_concurrent_deltalake_writer_never_stops_the_table(mariadb, database, make_config, caplog) -> None:
    from deltalake import DeltaTable

    caplog.set_level(logging.WARNING, logger="binlake")
    table, other = _tables(mariadb, database, "contested", "other")
    config = make_config([table, other])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    stop = threading.Event()
    commits = [0]
    conflicts_seen = [0]

    def outside_writer() -> None:
        # What OPTIMIZE or a compliance job does: commits to the table that change no row's value (a rewrite of
        # a row as it is), as fast as it can, while the syncs run.
        while not stop.is_set():
            try:
                target = DeltaTable(path)
                rows = target.to_pyarrow_table(columns=["id"]).slice(0, 1)
                if rows.num_rows:
                    target.update(predicate=f"id = {rows.column('id')[0].as_py()}", updates={"qty": "qty"})
                else:
                    target.delete("false")
                commits[0] += 1
            except Exception:  # noqa: BLE001 - the outside writer loses races too; it simply tries again
                conflicts_seen[0] += 1
            time.sleep(0.005)

    writer = threading.Thread(target=outside_writer, daemon=True)
    writer.start()
    began = time.monotonic()
    try:
        for round_number in range(10):
            _change(mariadb, table, round_number)
            _change(mariadb, other, round_number)
            pipeline.sync(until_caught_up=True)
            state = pipeline.read_state().tables[table]
            assert state.error is None, state.error
    finally:
        stop.set()
        writer.join(timeout=30)
    detect = time.monotonic() - began
    assert commits[0] > 0, "the outside writer committed"
    freed = time.monotonic()
    for _ in range(20):
        state = pipeline.read_state().tables[table]
        if state.retrying is None and _compare(mariadb, pipeline, table)[2]:
            break
        if state.retrying is not None:
            _wait_until_due(pipeline, table)
        pipeline.sync(until_caught_up=True)
    recover = time.monotonic() - freed
    state = pipeline.read_state().tables[table]
    assert state.error is None and state.retrying is None
    lost, doubled, equal = _compare(mariadb, pipeline, table)
    assert (lost, doubled, equal) == (0, 0, True)
    assert _compare(mariadb, pipeline, other) == (0, 0, True)
    met = sum("conflicted with another writer" in record.getMessage() for record in caplog.records)
    assert met > 0, "binlake's commits met the outside writer's (else this test proves nothing)"
    _report(f"commit conflicts ({commits[0]} outside commits during 10 syncs, {met} conflicts met)",
            "retried, never stopped", detect, recover, lost, doubled)


# -- (d) binlake resume ------------------------------------------------------------------------------------------


def test_resume_takes_a_stopped_table_back_without_a_resnapshot(mariadb, database, config_file, tmp_path) -> None:
    table, other = _tables(mariadb, database, "checked", "other")
    config, config_path = config_file([table, other], batch__writer="spark")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    # A downstream team adds a CHECK constraint the source breaks: the table's own fault, so it stops.
    pipeline.spark().sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT small CHECK (qty < 100000)")
    offset = pipeline.read_state().tables[table].position
    sql(mariadb, f"UPDATE {table} SET qty = 100000 WHERE id = 1", f"INSERT INTO {table} VALUES (9000, 1, 'x')")
    _change(mariadb, other, 0)
    [result] = pipeline.sync()
    stopped = pipeline.read_state().tables[table]
    assert stopped.error is not None and "binlake resume --table" in stopped.error
    assert stopped.position == offset and result.tables
    env = {"BINLAKE_LOG_DIR": str(tmp_path / "logs")}

    # The user fixes the cause (drops the constraint) and resumes: the binlog from the offset is replayed.
    pipeline.spark().sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT small")
    began = time.monotonic()
    resumed = run_cli(config_path, "resume", "--table", table, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{table}: resumed from {offset}" in resumed.stdout, resumed.stdout
    assert pipeline.read_state().tables[table].error is None
    pipeline.sync(until_caught_up=True)
    recover = time.monotonic() - began
    lost, doubled, equal = _compare(mariadb, pipeline, table)
    assert (lost, doubled, equal) == (0, 0, True)
    assert pipeline.read_state().tables[table].snapshot_at == stopped.snapshot_at, "no re-snapshot"
    again = run_cli(config_path, "resume", "--table", table, env=env)
    assert again.returncode == 0 and "not stopped" in again.stdout
    _report("a stop whose cause the user fixed (CHECK constraint)", "stopped, resumed, replayed", 0.0, recover,
            lost, doubled)


def test_resume_refuses_when_the_binlog_no_longer_holds_the_offset(
    mariadb, database, config_file, tmp_path
) -> None:
    [table] = _tables(mariadb, database, "purged")
    config, config_path = config_file([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    handle = pipeline.context.handle()
    state = handle.acquire()
    # The table stopped long ago, at an offset in a binlog file the server no longer has.
    gone = state.tables[table].position
    never_kept = re.sub(r"\d+$", lambda number: "0" * len(number.group()), gone.file)
    state.tables[table] = replace(state.tables[table], error="stopped", position=replace(gone, file=never_kept))
    handle.save()
    handle.release()

    refused = run_cli(config_path, "resume", "--table", table, env={"BINLAKE_LOG_DIR": str(tmp_path / "logs")})

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cannot resume" in refused.stderr and f"binlake snapshot --table {table}" in refused.stderr
    assert pipeline.read_state().tables[table].error == "stopped"


# -- no native noise on the terminal ------------------------------------------------------------------------------


def test_native_stderr_goes_to_the_log_file_and_python_messages_stay(tmp_path) -> None:
    """What Rust's panic hook writes (straight to file descriptor 2) lands in the run's log file."""
    log_file = tmp_path / "binlake-run.log"
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from cdc_lib.common.logs import native_stderr_to\n"
        f"with native_stderr_to(Path({str(log_file)!r})) as captured:\n"
        "    os.write(2, b\"thread 'tokio-rt-worker' panicked at object_store/src/buffered.rs:369:41:\\n"
        "Already shut down\\nstack backtrace:\\n\")\n"
        "    print('binlake: error: one line with its remedy', file=sys.stderr)\n"
        "print('captured' if captured else 'not captured')\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "captured"
    assert "binlake: error: one line with its remedy" in ran.stderr
    assert "panicked" not in ran.stderr and "backtrace" not in ran.stderr
    assert "panicked at object_store" in log_file.read_text()


def test_an_unexpected_failure_prints_one_line_and_leaves_its_traceback_in_the_log_file(
    mariadb, database, config_file, tmp_path
) -> None:
    [table] = _tables(mariadb, database, "t")
    config, config_path = config_file([table])
    Pipeline(config).snapshot()
    _change(mariadb, table, 0)
    logs = tmp_path / "logs"
    # A failure binlake does not expect, deep in a batch (a pause failpoint given a duration that is no number).
    env = {"BINLAKE_LOG_DIR": str(logs), "BINLAKE_FAILPOINT_PAUSE": "before_delta_commit",
           "BINLAKE_FAILPOINT_PAUSE_SECONDS": "not-a-number"}

    crashed = run_cli(config_path, "sync", env=env)

    assert crashed.returncode == 2, crashed.stdout + crashed.stderr
    _no_native_noise(crashed.stderr)
    [line] = [line for line in crashed.stderr.splitlines() if line.startswith("binlake: error:")]
    assert "unexpected ValueError" in line and "the traceback is in " in line, line
    log_file = Path(line.rsplit("the traceback is in ", 1)[1].split()[0].rstrip(";,"))
    assert log_file.parent == logs and "Traceback (most recent call last)" in log_file.read_text()
