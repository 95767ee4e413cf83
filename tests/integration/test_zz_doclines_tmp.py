# TEMPORARY: prints the error lines for docs/bad-input.md. Deleted after use.
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc_lib.errors import BinlakeError
from cdc_lib.local_mariadb import free_port
from cdc_lib.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, run_cli, sql, write_config_file
from tests.integration.conftest import quickly_failing_store
from tests.integration.test_security import tls_server, tls_table  # noqa: F401

OUT = Path("/tmp/exp/doclines.txt")


def record(case: str, call) -> None:
    try:
        call()
    except BinlakeError as exc:
        line = f"binlake: error: {exc}"
    except Exception as exc:  # noqa: BLE001
        line = f"UNEXPECTED {type(exc).__name__}: {exc}"
    else:
        line = "NO ERROR"
    with OUT.open("a") as handle:
        handle.write(f"{case}\t{line}\n")


def test_lines(mariadb, database, make_config, tmp_path, s3_endpoint, request, monkeypatch, tls_server, tls_table) -> None:  # noqa: F811
    pass
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)", f"CREATE TABLE {database}.nopk (a INT)")
    t = f"{database}.t"
    record("wrong password", Pipeline(make_config([t], source__password="wrong")).validate)
    record("unreachable server", Pipeline(make_config([t], source__port=free_port())).validate)
    for setting, bad in [("binlog_format", "STATEMENT"), ("binlog_format", "MIXED"), ("binlog_row_image", "MINIMAL"),
                         ("binlog_row_metadata", "MINIMAL")]:
        original = sql(mariadb, f"SELECT @@GLOBAL.{setting}")[0][0]
        sql(mariadb, f"SET GLOBAL {setting} = '{bad}'")
        try:
            record(f"{setting}={bad}", Pipeline(make_config([t])).validate)
        finally:
            sql(mariadb, f"SET GLOBAL {setting} = '{original}'")
    record("no primary key", Pipeline(make_config([f"{database}.nopk"])).validate)
    record("missing table", Pipeline(make_config([f"{database}.missing"])).validate)
    for name, grants in [("noslave", ["SELECT ON *.*", "BINLOG MONITOR ON *.*"]),
                         ("nomonitor", ["SELECT ON *.*", "REPLICATION SLAVE ON *.*"])]:
        for host in ("127.0.0.1", "localhost"):
            sql(mariadb, f"CREATE USER IF NOT EXISTS '{name}'@'{host}' IDENTIFIED BY 'x'",
                *(f"GRANT {g} TO '{name}'@'{host}'" for g in grants))
        record(f"grant {name}", Pipeline(make_config([t], source__user=name, source__password="x")).validate)
    blocker = tmp_path / "file"
    blocker.write_text("")
    record("local store unwritable", Pipeline(make_config([t], offsets={"uri": str(blocker / "offsets")})).validate)
    c = make_config([t], offsets={"uri": "s3://binlake-offsets/p", "endpoint_url": f"http://127.0.0.1:{free_port()}"})
    record("s3 unreachable", Pipeline(c, store=quickly_failing_store(c)).validate)
    record("s3 no bucket", Pipeline(make_config([t], offsets={"uri": "s3://no-such-bucket/p", "endpoint_url": s3_endpoint})).validate)
    import boto3
    ro = request.getfixturevalue("readonly_s3")
    for case, keys in [("s3 bad credentials", ("AKIAWRONG", "x")), ("s3 read-only", (ro.access_key, ro.secret_key))]:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[0])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1])
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
        record(case, Pipeline(make_config([t], offsets={"uri": f"s3://{ro.bucket}/p", "endpoint_url": ro.endpoint})).validate)
    monkeypatch.undo()
    tls = tls_server
    record("tls no ssl_ca", Pipeline(make_config([tls_table], source__port=tls.server.port)).validate)
    record("tls other ca", Pipeline(make_config([tls_table], source__port=tls.server.port, source__ssl_ca=str(tls.other_ca))).validate)
    record("tls hostname", Pipeline(make_config([tls_table], source__port=tls.server.port, source__host="localhost", source__ssl_ca=str(tls.ca))).validate)
    record("tls missing file", Pipeline(make_config([tls_table], source__port=tls.server.port, source__ssl_ca="/etc/binlake/ca.pem")).validate)
    # CLI lines
    config = make_config([t])
    path = write_config_file(config, tmp_path / "b.yaml")
    with OUT.open("a") as handle:
        for case, args, env in [
            ("cli missing config", ["status"], {}),
            ("cli env var missing", ["status"], {"BINLAKE_TEST_PASSWORD": None}),
        ]:
            environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD}
            for key, value in env.items():
                environment.pop(key, None) if value is None else environment.__setitem__(key, value)
            import subprocess, sys
            target = tmp_path / "absent.yaml" if case == "cli missing config" else path
            r = subprocess.run([sys.executable, "-m", "cdc_lib.cli", "--config", str(target), *args], capture_output=True, text=True, env=environment)
            handle.write(f"{case}\t{r.stderr.strip()}\n")
        bad = tmp_path / "bad.yaml"
        bad.write_text(path.read_text().replace("batch:", "batch:\n  size: 5"))
        r = run_cli(bad, "status"); handle.write(f"cli unknown key\t{r.stderr.strip()}\n")
        bad.write_text(path.read_text().replace("server_id:", "server_id: 0 #"))
        r = run_cli(bad, "status"); handle.write(f"cli bad value\t{r.stderr.strip()}\n")
        bad.write_text("pipeline: [unclosed\n")
        r = run_cli(bad, "status"); handle.write(f"cli bad yaml\t{r.stderr.strip()}\n")


def test_more_lines(mariadb, database, make_config, tmp_path, monkeypatch, capsys) -> None:
    from tests.integration.conftest import cli_in_process
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)", f"INSERT INTO {database}.t VALUES (1)")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    config = make_config([f"{database}.t"], sink={"path": str(blocker / "lake")}, offsets={"uri": str(tmp_path / "o")})
    code, out, err = cli_in_process(write_config_file(config, tmp_path / "b.yaml"), "snapshot", monkeypatch=monkeypatch, capsys=capsys)
    with OUT.open("a") as handle:
        handle.write(f"sink unwritable\t{err.strip()}\n")
    config = make_config([f"{database}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    from tests.integration.test_bad_input import purge_all_but_newest
    purge_all_but_newest(mariadb)
    record("purged", pipeline.validate)
    code, out, err = cli_in_process(write_config_file(config, tmp_path / "c.yaml"), "sync", monkeypatch=monkeypatch, capsys=capsys)
    with OUT.open("a") as handle:
        handle.write(f"purged sync (exit {code})\t{out.strip()}\n")
    from cdc_lib.offsets import StateHandle
    holder = StateHandle(pipeline.store, config.pipeline, lease_seconds=60)
    holder.acquire()
    code, out, err = cli_in_process(write_config_file(config, tmp_path / "c.yaml"), "sync", monkeypatch=monkeypatch, capsys=capsys)
    with OUT.open("a") as handle:
        handle.write(f"second runner (exit {code})\t{err.strip()}\n")
    holder.release()
