"""What one `read_log_tail` costs on a Delta table with 10 vs 10,000 commits, local and on S3 (moto server).

    python -m bench.paths.log_costs [--commits 10 10000] [--calls 5]

Per table it prints the median time of a `read_log_tail` call, the objects its listing returned and the files it
read, next to what a listing of the whole `_delta_log` returns (what every call listed before it started from the
last checkpoint).

The tables are built the quick way that is still a valid Delta log: commit 0 holds the protocol and the schema,
every later commit is a binlake-shaped commit (a SetTransaction for the app id and a `commitInfo.userMetadata`,
no data files: binlake's reads touch only the log), and delta-rs (`deltalake`) writes a checkpoint at
the last multiple of 10 — where Spark's default `delta.checkpointInterval` would have put it. delta-rs then
opens the table and reads the app's transaction version, the check that the log is valid.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from cdc_lib.common.s3 import S3Settings
from cdc_lib.dev.local_mariadb import free_port
from cdc_lib.sink.delta_log import read_log_tail
from cdc_lib.sink.storage import LocalSinkStorage, S3SinkStorage, SinkStorage

APP = "binlake:bench:db.t"
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "integer", "nullable": True, "metadata": {}}]}


def build_log(path: Path, commits: int) -> None:
    """A Delta table with `commits` commits (versions 0 … commits-1) and a checkpoint at the last multiple of 10."""
    log = path / "_delta_log"
    log.mkdir(parents=True)
    created = 1_795_000_000_000
    first = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "3f1c0b8e-6a52-4d0e-9b1e-1f4d2a7c9e11", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(SCHEMA), "partitionColumns": [], "configuration": {},
                      "createdTime": created}},
        _commit_info(0, created),
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(action) for action in first) + "\n")
    for version in range(1, commits):
        actions = [{"txn": {"appId": APP, "version": version, "lastUpdated": created + version}},
                   _commit_info(version, created + version)]
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(action) for action in actions) + "\n")
    from deltalake import DeltaTable

    checkpoint_at = (commits - 1) // 10 * 10
    if checkpoint_at > 0:
        DeltaTable(str(path), version=checkpoint_at).create_checkpoint()
    table = DeltaTable(str(path))
    assert table.version() == commits - 1 and table.transaction_version(APP) == (commits - 1 or None), "invalid log"


def _commit_info(version: int, timestamp: int) -> dict[str, Any]:
    metadata = {"app_id": APP, "kind": "merge", "batch_seq": version, "end": {"file": "bin.000001", "pos": version}}
    return {"commitInfo": {"timestamp": timestamp, "operation": "MERGE", "operationParameters": {},
                           "userMetadata": json.dumps(metadata)}}


def measure(label: str, location: str, storage: SinkStorage, calls: int) -> dict[str, Any]:
    times = []
    for _ in range(calls):
        storage.counters.reset()
        started = time.perf_counter()
        tail = read_log_tail(location, application=APP, storage=storage)
        times.append(time.perf_counter() - started)
        assert tail is not None and tail.last_binlake_commit is not None
    per_call = storage.counters.names_listed, storage.counters.files_read
    storage.counters.reset()
    started = time.perf_counter()
    storage.list_names(f"{location}/_delta_log")
    whole = time.perf_counter() - started
    return {"table": label, "read_log_tail_ms": round(statistics.median(times) * 1000, 2),
            "listed": per_call[0], "read": per_call[1], "whole_log_listed": storage.counters.names_listed,
            "whole_listing_ms": round(whole * 1000, 2)}


def upload(client: Any, bucket: str, prefix: str, path: Path) -> None:
    for file in sorted(path.rglob("*")):
        if file.is_file() and not file.name.startswith("."):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{file.relative_to(path)}", Body=file.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--no-s3", action="store_true", help="skip the moto S3 server")
    arguments = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="binlake-log-costs-") as scratch:
        root = Path(scratch)
        for commits in arguments.commits:
            started = time.perf_counter()
            build_log(root / f"t{commits}", commits)
            print(f"built a {commits}-commit table in {time.perf_counter() - started:.1f}s", file=sys.stderr)
            rows.append(measure(f"local {commits} commits", str(root / f"t{commits}"), LocalSinkStorage(),
                                arguments.calls))
        if not arguments.no_s3:
            rows += _on_moto(root, arguments.commits, arguments.calls)
    columns = list(rows[0])
    widths = [max(len(column), *(len(str(row[column])) for row in rows)) for column in columns]
    print("  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row[column]).ljust(width) for column, width in zip(columns, widths, strict=True)))


def _on_moto(root: Path, commits: list[int], calls: int) -> list[dict[str, Any]]:
    import os

    import boto3

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.2)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        rows = []
        for count in commits:
            started = time.perf_counter()
            upload(client, "bench", f"t{count}", root / f"t{count}")
            print(f"uploaded the {count}-commit table in {time.perf_counter() - started:.1f}s", file=sys.stderr)
            storage = S3SinkStorage(S3Settings(endpoint_url=endpoint, region="us-east-1"))
            rows.append(measure(f"s3 {count} commits", f"s3a://bench/t{count}", storage, calls))
        return rows
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
