"""Silent networks: a connection that stops answering without closing must never hang a run.

A loopback proxy (tests/net_proxy.py) sits between binlake and the test MariaDB and, on cue, stops
forwarding the connections open at that moment while keeping them open, as a NAT or load balancer
that forgot the flow does. `binlake sync` runs as a subprocess with a deadline of its own, so a run
that would wait for ever (today's failure) fails the test instead of hanging it. The bound is
`source.network_timeout_seconds`, set small here.

Each case prints what it measured (time to detect, time to recover) for the fault report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ConcurrentRunError
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, scan_rows, source_rows, write_config_file
from tests.integration.conftest import assert_each_change_applied_once, backlog, make_items, wait_for
from tests.net_proxy import SilenceableProxy

#: The bound under test (seconds): small, so that the cases run quickly.
BOUND = 3
#: What a run may take beyond its bound(s): starting Python, the rest of the read, the Delta writes.
MARGIN = 45


@pytest.fixture
def proxy(mariadb: LocalMariaDB) -> Any:
    with SilenceableProxy(mariadb.port) as running:
        yield running


def config_through(proxy: SilenceableProxy, make_config: Any, table: str, tmp_path: Path, *,
                   bound: int = BOUND, lease_seconds: int = 120, **overrides: Any) -> tuple[Any, Path]:
    """A pipeline that reaches MariaDB through `proxy`, with the network bound and lease given, and its file."""
    config = make_config([table], source__port=proxy.port, source__network_timeout_seconds=bound,
                         offsets__lease_seconds=lease_seconds, **overrides)
    path = write_config_file(config, tmp_path / "binlake.yaml")
    document = yaml.safe_load(path.read_text())
    document["source"]["network_timeout_seconds"] = bound
    document["offsets"]["lease_seconds"] = lease_seconds
    path.write_text(yaml.safe_dump(document))
    return config, path


def start_cli(config_path: Path, *arguments: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "--log-format", "json", *arguments],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def finish(process: subprocess.Popen[str], *, deadline: float, what: str) -> tuple[int, str, float]:
    """Wait for the run until `deadline` (monotonic); a run still waiting then is killed and fails the test."""
    try:
        _, stderr = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=30)
        pytest.fail(f"{what}: the run still waited past its bound; it hangs on the silent connection\n{stderr[-2000:]}")
    return process.returncode, stderr, time.monotonic()


def logged(stderr: str, fragment: str) -> list[dict[str, Any]]:
    lines = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if fragment in entry.get("message", ""):
                lines.append(entry)
    return lines


def wall_time(entry: dict[str, Any]) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()


def assert_table_equals_source(config: Any, server: LocalMariaDB, table: str) -> None:
    """Read back with delta-rs (not binlake's reader), and every binlog range applied once."""
    database, _, name = table.partition(".")
    assert sorted(scan_rows(Pipeline(config).table_path(table))) == source_rows(server, table)
    assert_each_change_applied_once(config, table)


def test_binlog_stream_goes_silent_mid_sync(mariadb: LocalMariaDB, database: str, make_config: Any,
                                           proxy: SilenceableProxy, tmp_path: Path) -> None:
    table = make_items(mariadb, database, rows=2000)
    config, path = config_through(proxy, make_config, table, tmp_path)
    Pipeline(config).snapshot()
    backlog(mariadb, database, transactions=10, rows=2000)  # ~40 MB of binlog: more than the socket buffers hold

    flag = tmp_path / "paused-mid-read"
    run = start_cli(path, "sync", "--until-caught-up", env={
        "BINLAKE_FAILPOINT_PAUSE": "binlog_mid_read", "BINLAKE_FAILPOINT_AT": "1",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag)})
    wait_for(flag.exists, timeout=120, what="the reader to pause after the batch's first rows event")
    assert proxy.silence("binlog") == 1, "exactly the binlog stream goes silent"
    silenced, silenced_wall = time.monotonic(), time.time()
    flag.unlink()
    code, stderr, ended = finish(run, deadline=silenced + 2 * BOUND + MARGIN, what="binlog stream silent")

    assert code == 0, stderr[-2000:]
    detected = logged(stderr, "was silent for")
    assert detected, f"the silence was not noticed:\n{stderr[-2000:]}"
    detect_seconds = wall_time(detected[0]) - silenced_wall
    assert detect_seconds < BOUND + 5, detect_seconds
    print(f"\nbinlog stream silent: detected after {detect_seconds:.1f}s (bound {BOUND}s), "
          f"run recovered and ended {ended - silenced:.1f}s after the silence")
    assert len(proxy.seen("binlog")) >= 2, "the batch was read again on a new binlog connection"
    assert_table_equals_source(config, mariadb, table)


def test_control_connection_goes_silent(mariadb: LocalMariaDB, database: str, make_config: Any,
                                        proxy: SilenceableProxy, tmp_path: Path) -> None:
    table = make_items(mariadb, database, rows=200)
    # One transaction per batch: after the first batch the run asks the control connection for the next one.
    config, path = config_through(proxy, make_config, table, tmp_path, batch__max_events=1)
    Pipeline(config).snapshot()
    backlog(mariadb, database, transactions=3, rows=200)

    flag = tmp_path / "paused-before-offsets"
    run = start_cli(path, "sync", "--until-caught-up", env={
        "BINLAKE_FAILPOINT_PAUSE": "before_offset_write", "BINLAKE_FAILPOINT_AT": "1",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag)})
    wait_for(flag.exists, timeout=120, what="the first batch to reach its offset write")
    assert proxy.silence("control") >= 1
    silenced = time.monotonic()
    flag.unlink()
    code, stderr, ended = finish(run, deadline=silenced + 2 * BOUND + MARGIN, what="control connection silent")

    detect_seconds = ended - silenced
    assert code != 0, "the run cannot go on without its control connection"
    assert "did not answer" in stderr and "network_timeout_seconds" in stderr, stderr[-2000:]
    assert "remedy: rerun" in stderr, stderr[-2000:]
    assert Pipeline(config).read_state().lease is None, "the failed run released its lease"

    # The rerun connects afresh (the proxy forwards new connections) and carries on from the saved offsets.
    rerun = start_cli(path, "sync", "--until-caught-up")
    code, stderr, recovered = finish(rerun, deadline=time.monotonic() + MARGIN, what="rerun")
    assert code == 0, stderr[-2000:]
    print(f"\ncontrol connection silent: the run ended {detect_seconds:.1f}s after the silence (bound {BOUND}s); "
          f"the rerun caught up in {recovered - ended:.1f}s")
    assert_table_equals_source(config, mariadb, table)


def test_a_stuck_runner_lets_its_lease_run_out(mariadb: LocalMariaDB, database: str, make_config: Any,
                                              proxy: SilenceableProxy, tmp_path: Path) -> None:
    bound, lease = 2, 5
    table = make_items(mariadb, database, rows=200)
    config, path = config_through(proxy, make_config, table, tmp_path, bound=bound, lease_seconds=lease)
    Pipeline(config).snapshot()
    backlog(mariadb, database, transactions=2, rows=200)

    # Runner A stops just before its binlog read, as on a wait no timeout covers, and stays there.
    flag = tmp_path / "stuck"
    stuck = start_cli(path, "sync", env={
        "BINLAKE_FAILPOINT_PAUSE": "before_binlog_stream", "BINLAKE_FAILPOINT_AT": "1",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag), "BINLAKE_FAILPOINT_PAUSE_SECONDS": "300"})
    wait_for(flag.exists, timeout=120, what="runner A to get stuck")
    stuck_at = time.monotonic()

    # Runner B retries as an orchestrator would; it gets the pipeline once A's unrenewed lease runs out.
    deadline = stuck_at + 2 * bound + lease + 20
    while True:
        try:
            Pipeline(config).sync(until_caught_up=True)
            break
        except ConcurrentRunError:
            if time.monotonic() > deadline:
                os.killpg(stuck.pid, signal.SIGKILL)
                stuck.communicate(timeout=30)
                pytest.fail("the stuck runner kept renewing its lease: nobody else could sync")
            time.sleep(0.5)
    took_over = time.monotonic() - stuck_at
    assert stuck.poll() is None, "runner A is still stuck while B works"
    print(f"\nstuck runner: lease not renewed after {2 * bound}s without progress; runner B took over "
          f"{took_over:.1f}s after A got stuck (lease {lease}s)")
    assert_table_equals_source(config, mariadb, table)

    # A, released, finds its lease gone and writes nothing.
    flag.unlink()
    code, stderr, _ = finish(stuck, deadline=time.monotonic() + MARGIN, what="runner A after the takeover")
    assert code != 0, "runner A must not go on under a lease it lost"
    assert "lease" in stderr or "held by" in stderr or "compare-and-swap" in stderr, stderr[-2000:]
    assert_table_equals_source(config, mariadb, table)
