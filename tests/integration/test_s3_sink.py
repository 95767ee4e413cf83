"""Delta tables on s3a:// (moto's S3 server on loopback, real Spark + hadoop-aws): same guarantees as a local sink."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from cdc_lib.dev.local_mariadb import free_port
from cdc_lib.errors import SinkError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import delta_rows, run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import ReadOnlyS3, s3_sink


def make_table(mariadb: Any, db: str, rows: int = 300) -> str:
    sql(
        mariadb,
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20), at DATETIME(3))",
        f"INSERT INTO {db}.items SELECT seq, seq, 'start', '2026-01-02 03:04:05.678' FROM {db}.seq_1_to_{rows}",
    )
    return f"{db}.items"


def change_burst(mariadb: Any, db: str, round_number: int) -> None:
    base = 10_000 * (round_number + 1)
    sql(
        mariadb,
        "START TRANSACTION",
        f"INSERT INTO {db}.items SELECT {base} + seq, seq, 'r{round_number}', NULL FROM {db}.seq_1_to_30",
        f"UPDATE {db}.items SET qty = qty + 1, label = 'u{round_number}' WHERE id % 7 = {round_number % 7}",
        f"DELETE FROM {db}.items WHERE id % 13 = {round_number % 13} AND id < 10000",
        "COMMIT",
        f"UPDATE {db}.items SET id = id + 500000 WHERE id BETWEEN {base + 1} AND {base + 2}",
    )


def keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_snapshot_and_sync_into_s3a(mariadb, database, make_config, s3_endpoint, s3_bucket, tmp_path) -> None:
    table = make_table(mariadb, database)
    # Offsets default to <sink>/_offsets: on the same bucket, reached with the sink's settings.
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket), offsets={})
    assert config.offsets.uri == f"s3a://{s3_bucket}/lake/_offsets"
    pipeline = Pipeline(config)

    assert pipeline.snapshot()[0].rows == 300
    for round_number in range(2):
        change_burst(mariadb, database, round_number)
    pipeline.sync(until_caught_up=True)

    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert all(result.matches for result in reconcile(pipeline))
    state = pipeline.read_state()
    # The chunked snapshot's waves carry their own app id; the sync's batches take the table's sequence on from 1.
    assert state.tables[table].consistent and state.tables[table].applied_seq >= 1
    stored = keys(s3_endpoint, s3_bucket)
    assert f"lake/{database}/items/_delta_log/00000000000000000000.json" in stored
    assert f"lake/_offsets/{config.pipeline}/state.json" in stored
    assert not (tmp_path / "lake").exists(), "nothing went to local disk"


@pytest.mark.parametrize("fault", ["s3_down", "no_bucket", "bad_credentials", "read_only_credentials"])
def test_unusable_s3_sink_fails_before_any_write(
    fault, mariadb, database, make_config, s3_endpoint, s3_bucket, tmp_path, request
) -> None:
    table = make_table(mariadb, database, rows=10)
    if fault == "s3_down":
        sink = s3_sink(f"http://127.0.0.1:{free_port()}", s3_bucket)
    elif fault == "no_bucket":
        sink = s3_sink(s3_endpoint, "binlake-no-such-bucket")
    else:
        guarded: ReadOnlyS3 = request.getfixturevalue("readonly_s3")  # a moto server that enforces IAM
        sink = s3_sink(guarded.endpoint, guarded.bucket)
        if fault == "bad_credentials":
            sink.update(access_key_id="AKIAWRONGWRONGWRONG1", secret_access_key="nope")
        else:
            sink.update(access_key_id=guarded.access_key, secret_access_key=guarded.secret_key)
    # Offsets on the working S3 server: the failed run must leave no trace there either.
    offsets_uri = f"s3://{s3_bucket}/offsets"
    config = make_config([table], sink=sink, offsets={"uri": offsets_uri, "endpoint_url": s3_endpoint})

    with pytest.raises(SinkError) as raised:
        Pipeline(config).snapshot()
    message = str(raised.value)
    assert "remedy:" in message and "\n" not in message
    assert sink["secret_access_key"] not in message and sink["access_key_id"] not in message, "no secret shown"
    expected = {
        "s3_down": "endpoint is up",
        "no_bucket": "does not exist",
        "bad_credentials": "credentials cannot reach",
        "read_only_credentials": "credentials cannot write",
    }[fault]
    assert expected in message

    failed = run_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot", env={
        "AWS_ACCESS_KEY_ID": sink["access_key_id"], "AWS_SECRET_ACCESS_KEY": sink["secret_access_key"]})
    assert failed.returncode == 2, failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("binlake: error:") and expected in lines[0], failed.stderr
    assert keys(s3_endpoint, s3_bucket) == [], "no offsets, no lease, no probe left behind"
