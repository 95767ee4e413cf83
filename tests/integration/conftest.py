"""Fixtures for fault tests: private servers a test may kill, and output checks (the proxies are in tests/net_proxy.py).

The session MariaDB and moto server (tests/conftest.py) are shared, so nothing here ever stops
them; a test that kills a server starts its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB, free_port
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.offset_store import S3OffsetStore
from tests.conftest import CDC_PASSWORD, CDC_USER, sql


@pytest.fixture
def own_mariadb(tmp_path: Path) -> Iterator[LocalMariaDB]:
    """A private MariaDB for one test, which the test may SIGKILL and restart."""
    server = LocalMariaDB(tmp_path / "own-mariadb", server_id=31).start()
    server.create_cdc_user(CDC_USER, CDC_PASSWORD)
    yield server
    if server.process is not None:
        server.stop()


# -- tables and change backlogs ------------------------------------------------------------------


#: Row width: a backlog must outgrow the loopback socket buffers (several MB), or the server has
#: handed over the whole binlog before any kill and the reader never notices it.
PAD = 1000


def make_items(server: LocalMariaDB, db: str, rows: int, *, pad: int = PAD) -> str:
    sql(
        server,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, qty INT NOT NULL, pad VARCHAR({PAD}))",
        f"INSERT INTO {db}.items SELECT seq, 0, REPEAT('p', {pad}) FROM {db}.seq_1_to_{rows}",
    )
    return f"{db}.items"


def backlog(server: LocalMariaDB, db: str, *, transactions: int, rows: int) -> int:
    """Transactions that insert `rows` rows, update as many and delete a few; returns the row changes."""
    changes = 0
    for number in range(transactions):
        base = 1_000_000 + number * rows
        statements = [
            "START TRANSACTION",
            f"INSERT INTO {db}.items SELECT {base} + seq, {number}, REPEAT('b', {PAD}) FROM {db}.seq_1_to_{rows}",
            f"UPDATE {db}.items SET qty = qty + 1 WHERE id <= {rows}",
        ]
        changes += 2 * rows
        if number:
            statements.append(f"DELETE FROM {db}.items WHERE id BETWEEN {base - rows + 1} AND {base - rows + 10}")
            changes += 10
        sql(server, *statements, "COMMIT")
    return changes


# -- private moto servers ------------------------------------------------------------------------


@dataclass
class MotoServer:
    endpoint: str
    process: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])


def start_moto(log_path: Path, *, environment: dict[str, str] | None = None) -> MotoServer:
    port = free_port()
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(environment or {})},
    )
    log.close()
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            # The moto API path is not an AWS action, so it does not count against auth settings.
            urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=1)
            return MotoServer(endpoint, process)
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                stop_moto(MotoServer(endpoint, process))
                raise RuntimeError(f"moto server did not start; see {log_path}") from None
            time.sleep(0.1)


def stop_moto(server: MotoServer) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=10)


@pytest.fixture
def private_moto(tmp_path: Path, s3_endpoint: str) -> Iterator[MotoServer]:
    """A moto S3 server only this test talks to (AWS_* test credentials come from `s3_endpoint`)."""
    server = start_moto(tmp_path / "private-moto.log")
    yield server
    stop_moto(server)


def s3_sink(endpoint: str, bucket: str, **extra: Any) -> dict[str, Any]:
    """A sink section for s3a://<bucket>/lake on the moto server at `endpoint` (offsets default to the sink)."""
    return {
        "path": f"s3a://{bucket}/lake",
        "endpoint_url": endpoint,
        "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        **extra,
    }


def quickly_failing_store(config: PipelineConfig) -> S3OffsetStore:
    """The configured S3 store with two attempts per request instead of five, to keep the test short."""
    import boto3
    from botocore.config import Config

    store = S3OffsetStore(config.offsets.uri, endpoint_url=config.offsets.endpoint_url)
    store.client = boto3.client("s3", endpoint_url=config.offsets.endpoint_url, config=Config(
        retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=2, read_timeout=10))
    return store


@dataclass(frozen=True)
class ReadOnlyS3:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str


@pytest.fixture(scope="module")
def readonly_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadOnlyS3]:
    """A moto server that enforces IAM, a bucket, and a credential that may read it but not write."""
    import boto3
    from botocore.exceptions import ClientError

    server = start_moto(tmp_path_factory.mktemp("moto-iam") / "moto.log",
                        environment={"INITIAL_NO_AUTH_ACTION_COUNT": "8"})
    try:
        admin: dict[str, Any] = {"endpoint_url": server.endpoint, "region_name": "us-east-1",
                 "aws_access_key_id": "admin", "aws_secret_access_key": "admin"}
        bucket = f"binlake-ro-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", **admin).create_bucket(Bucket=bucket)
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="reader")
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:Get*", "s3:List*", "s3:Head*"], "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="read-only", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        # Spend the unauthenticated allowance so every later request is checked.
        for _ in range(10):
            try:
                boto3.client("s3", **admin).list_buckets()
            except ClientError:
                break
        else:
            raise RuntimeError("moto never started enforcing IAM")
        yield ReadOnlyS3(server.endpoint, bucket, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        stop_moto(server)


# -- what a run left behind -------------------------------------------------------------------


def stored_objects(config: PipelineConfig, **client_options: Any) -> dict[str, bytes]:
    """Every file (local) or object (S3) under the offset store's root for this pipeline."""
    uri = config.offsets.uri
    if uri.startswith("s3://"):
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, prefix = uri.split("://", 1)[1].partition("/")
        client = boto3.client("s3", endpoint_url=config.offsets.endpoint_url, **client_options,
                              config=Config(retries={"max_attempts": 1}))
        try:
            listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        except (ClientError, BotoCoreError):
            return {}  # no bucket, or no server: nothing can have been written there
        return {item["Key"]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read() for item in listed}
    root = Path(uri) / config.pipeline
    if not root.is_dir():
        return {}
    return {str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*")
            if path.is_file() and path.name != ".lock"}


def sink_files(config: PipelineConfig) -> dict[str, int]:
    root = Path(config.sink.path)
    if not root.is_dir():
        return {}
    return {str(path.relative_to(root)): path.stat().st_size for path in root.rglob("*")
            if path.is_file() and "_offsets" not in path.parts}


def assert_nothing_written(config: PipelineConfig, **client_options: str) -> None:
    """No Delta file and no offset state: the failed command left no trace."""
    assert sink_files(config) == {}, f"Delta files were written: {sorted(sink_files(config))[:5]}"
    stored = stored_objects(config, **client_options)
    assert stored == {}, f"offset state was written: {sorted(stored)}"


@dataclass(frozen=True)
class Footprint:
    """The durable state of a pipeline: offset documents (minus the lease) and the Delta files."""

    tables: dict[str, Any]
    batch_seq: int
    delta_files: dict[str, int]


def footprint(config: PipelineConfig) -> Footprint:
    state = Pipeline(config).read_state()
    return Footprint(
        tables={name: table.to_json() for name, table in state.tables.items()},
        batch_seq=state.batch_seq,
        delta_files={name: size for name, size in sink_files(config).items() if "_delta_log" in name},
    )


# -- Delta log and server introspection ---------------------------------------------------------


@dataclass(frozen=True)
class LoggedCommit:
    delta_version: int
    kind: str
    txn_version: int
    start: BinlogPosition | None
    end: BinlogPosition


def binlake_commits(config: PipelineConfig, table: str) -> list[LoggedCommit]:
    """binlake's commits in a table's Delta log, oldest first."""
    log_dir = Path(Pipeline(config).table_path(table)) / "_delta_log"
    commits = []
    for file in sorted(log_dir.glob("*.json")):
        txn_version: int | None = None
        metadata: dict[str, Any] | None = None
        for line in file.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "txn" in action:
                txn_version = int(action["txn"]["version"])
            if "commitInfo" in action and action["commitInfo"].get("userMetadata"):
                metadata = json.loads(action["commitInfo"]["userMetadata"])
        # A fence (cdc_lib/sink/fencing.py) carries a SetTransaction but applies no binlog: it has no range to check.
        if txn_version is not None and metadata is not None and metadata.get("kind") != "fence":
            commits.append(LoggedCommit(
                delta_version=int(file.stem), kind=str(metadata.get("kind")), txn_version=txn_version,
                start=BinlogPosition.from_json(metadata["start"]) if "start" in metadata else None,
                end=BinlogPosition.from_json(metadata["end"]),
            ))
    return commits


def assert_each_change_applied_once(config: PipelineConfig, table: str) -> None:
    """Since the last snapshot, every MERGE starts where the previous commit ended: no binlog range twice."""
    commits = binlake_commits(config, table)
    snapshots = [index for index, commit in enumerate(commits) if commit.kind == "snapshot"]
    assert snapshots, f"{table} has no snapshot commit"
    since = commits[snapshots[-1]:]
    # A chunked snapshot's waves number themselves from 1 under their own app id: only the MERGEs since count.
    versions = [commit.txn_version for commit in since[1:]]
    assert versions == sorted(set(versions)), f"a batch was committed twice: {versions}"
    for previous, current in zip(since, since[1:], strict=False):
        assert current.start is not None and current.start >= previous.end, (
            f"Delta v{current.delta_version} re-applies binlog from {current.start}, "
            f"before v{previous.delta_version} ended at {previous.end}"
        )


def dump_threads(server: LocalMariaDB, user: str = CDC_USER, *, sending: bool = False) -> list[int]:
    """Ids of the server's binlog dump threads serving `user`.

    With `sending`, only threads blocked handing events to the reader: the reader is then mid-read
    with binlog still to come, so a kill now cuts the stream rather than its idle tail.
    """
    state = " AND (STATE LIKE 'Writing to net%' OR STATE LIKE 'Sending binlog%')" if sending else ""
    rows = sql(server, "SELECT ID FROM information_schema.PROCESSLIST "
                       f"WHERE COMMAND LIKE 'Binlog Dump%' AND USER = '{user}'{state}")
    return [int(row[0]) for row in rows]


def wait_for(condition: Any, *, timeout: float, interval: float = 0.02, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Background(threading.Thread):
    """Runs a call in a thread and keeps its result or exception."""

    def __init__(self, call: Any) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def outcome(self, timeout: float = 300) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the background call did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def cli_in_process(config_path: Path, *arguments: str, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `binlake` in this process (its warm SparkSession) and return exit code, stdout and stderr."""
    import logging

    from cdc_lib import cli

    monkeypatch.setenv("BINLAKE_TEST_PASSWORD", CDC_PASSWORD)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    capsys.readouterr()
    try:
        code = cli.main(["--config", str(config_path), *arguments])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    captured = capsys.readouterr()
    return code, captured.out, captured.err
