"""Each bad input gets one clear error naming the remedy, and nothing is half-written.

docs/bad-input.md lists every case here with the line a user sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.dev.local_mariadb import LocalMariaDB, free_port
from cdc_lib.errors import (
    BinlakeError,
    BinlogPurgedError,
    MissingGrantError,
    OffsetStoreError,
    ServerSettingsError,
    SourceConnectionError,
    TableError,
)
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import CDC_PASSWORD, delta_rows, run_cli, source_rows, sql, write_config_file
from tests.integration.binlog_purge import purge_all_but_newest
from tests.integration.conftest import (
    Background,
    ReadOnlyS3,
    assert_nothing_written,
    backlog,
    cli_in_process,
    dump_threads,
    footprint,
    make_items,
    quickly_failing_store,
    wait_for,
)


@pytest.fixture(scope="module")
def binlog_off_server(tmp_path_factory: pytest.TempPathFactory):
    server = LocalMariaDB(tmp_path_factory.mktemp("nobinlog"), server_id=21, extra_options={"log-bin": ""})
    server.start()
    server.create_cdc_user("binlake_test", CDC_PASSWORD)
    yield server
    server.stop()


def test_wrong_password(make_config, database) -> None:
    config = make_config([f"{database}.t"], source__password="wrong-password-123")
    with pytest.raises(SourceConnectionError, match="refused the credentials") as raised:
        Pipeline(config).snapshot()
    assert "wrong-password-123" not in str(raised.value)
    assert not raised.value.retryable
    assert_nothing_written(config)


def test_unreachable_server(make_config, database) -> None:
    config = make_config([f"{database}.t"], source__port=free_port())
    with pytest.raises(SourceConnectionError, match="cannot reach"):
        Pipeline(config).validate()
    with pytest.raises(SourceConnectionError, match="cannot reach") as raised:
        Pipeline(config).sync()
    assert raised.value.retryable
    assert_nothing_written(config)


def test_binlog_off(binlog_off_server, make_config) -> None:
    sql(binlog_off_server, "CREATE DATABASE IF NOT EXISTS x", "CREATE TABLE IF NOT EXISTS x.t (id INT PRIMARY KEY)")
    config = make_config(["x.t"], source__port=binlog_off_server.port)
    with pytest.raises(ServerSettingsError, match="log_bin is 'OFF'") as raised:
        Pipeline(config).snapshot()
    assert "my.cnf" in raised.value.remedy
    assert_nothing_written(config)


@pytest.mark.parametrize(
    ("setting", "bad_value"),
    [("binlog_format", "STATEMENT"), ("binlog_format", "MIXED"), ("binlog_row_image", "MINIMAL"),
     ("binlog_row_metadata", "NO_LOG")],
)
def test_wrong_binlog_settings(mariadb, make_config, database, setting: str, bad_value: str) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    config = make_config([f"{database}.t"])
    original = sql(mariadb, f"SELECT @@GLOBAL.{setting}")[0][0]
    sql(mariadb, f"SET GLOBAL {setting} = '{bad_value}'")
    try:
        with pytest.raises(ServerSettingsError, match=f"{setting} is '{bad_value}'"):
            Pipeline(config).validate()
        with pytest.raises(ServerSettingsError):
            Pipeline(config).sync()
        with pytest.raises(ServerSettingsError):
            Pipeline(config).snapshot()
    finally:
        sql(mariadb, f"SET GLOBAL {setting} = '{original}'")
    assert_nothing_written(config)


def test_table_without_primary_key_and_missing_table(mariadb, make_config, database) -> None:
    sql(mariadb, f"CREATE TABLE {database}.nopk (a INT, b INT)")
    no_key = make_config([f"{database}.nopk"])
    with pytest.raises(TableError, match="no primary key") as raised:
        Pipeline(no_key).snapshot()
    assert "ADD PRIMARY KEY" in raised.value.remedy
    assert_nothing_written(no_key)
    missing = make_config([f"{database}.missing"])
    with pytest.raises(TableError, match="does not exist"):
        Pipeline(missing).validate()
    with pytest.raises(TableError, match="does not exist"):
        Pipeline(missing).snapshot()
    assert_nothing_written(missing)


def test_missing_grants(mariadb, make_config, database) -> None:
    sql(
        mariadb,
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY)",
        "CREATE USER IF NOT EXISTS 'weak'@'127.0.0.1' IDENTIFIED BY 'weak-pw'",
        f"GRANT SELECT ON {database}.* TO 'weak'@'127.0.0.1'",
    )
    config = make_config([f"{database}.t"], source__user="weak", source__password="weak-pw")
    with pytest.raises(MissingGrantError, match="REPLICATION"):
        Pipeline(config).validate()
    for command in (Pipeline(config).snapshot, Pipeline(config).sync):
        with pytest.raises(MissingGrantError, match="REPLICATION"):
            command()
    assert_nothing_written(config)


def test_purged_binlog_position(mariadb, make_config, database) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {database}.t VALUES (1, 1)")
    config = make_config([f"{database}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    purge_all_but_newest(mariadb)
    with pytest.raises(BinlogPurgedError, match="re-snapshot"):
        pipeline.validate()
    delta_before = footprint(config).delta_files
    result = pipeline.sync()[0]
    assert footprint(config).delta_files == delta_before, "the stopped table's Delta copy is untouched"
    assert "is gone" in result.skipped_tables[f"{database}.t"]
    assert pipeline.status()[0].error is not None
    pipeline.snapshot([f"{database}.t"])
    assert pipeline.read_state().tables[f"{database}.t"].error is None


def test_cli_prints_one_line_and_hides_the_password(make_config, database, tmp_path) -> None:
    config = make_config([f"{database}.t"])
    path = write_config_file(config, tmp_path / "binlake.yaml")
    result = run_cli(path, "validate", env={"BINLAKE_TEST_PASSWORD": "not-the-password-xyz"})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("binlake: error:") and "remedy:" in lines[0]
    assert "not-the-password-xyz" not in result.stderr + result.stdout
    missing = run_cli(tmp_path / "absent.yaml", "status")
    assert missing.returncode != 0 and "does not exist" in missing.stderr


# -- grants ---------------------------------------------------------------------------------------


@pytest.fixture
def grant_user(mariadb: LocalMariaDB, database: str) -> Iterator[Any]:
    """Creates users with exactly the given grants; drops them afterwards."""
    created: list[str] = []

    def create(name: str, *grants: str) -> str:
        user = f"{name}_{database[-6:]}"
        for host in ("127.0.0.1", "localhost"):
            sql(mariadb, f"CREATE USER '{user}'@'{host}' IDENTIFIED BY 'grant-pw'",
                *(f"GRANT {grant} TO '{user}'@'{host}'" for grant in grants))
            created.append(f"'{user}'@'{host}'")
        return user

    yield create
    for account in created:
        sql(mariadb, f"DROP USER IF EXISTS {account}")


def test_least_privilege_grants_are_enough(mariadb, database, make_config, grant_user) -> None:
    user = grant_user("least", f"SELECT ON {database}.*", "REPLICATION SLAVE, BINLOG MONITOR ON *.*")
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {database}.t VALUES (1, 'a'), (2, 'b')")
    config = make_config([f"{database}.t"], source__user=user, source__password="grant-pw")
    pipeline = Pipeline(config)
    pipeline.validate()
    pipeline.snapshot()
    sql(mariadb, f"UPDATE {database}.t SET v = 'c' WHERE id = 1", f"DELETE FROM {database}.t WHERE id = 2")
    pipeline.sync(until_caught_up=True)
    status = pipeline.status()[0]
    assert status.consistent and status.lag_events == 0 and status.error is None
    assert all(result.matches for result in reconcile(pipeline))
    assert delta_rows(config, f"{database}.t") == source_rows(mariadb, f"{database}.t")


@pytest.mark.parametrize(
    ("missing", "error", "message"),
    [
        ("SELECT", TableError, "or the binlake user may not SELECT it"),
        ("REPLICATION SLAVE", MissingGrantError, "lacks the REPLICATION SLAVE privilege"),
        ("BINLOG MONITOR", MissingGrantError, r"may not read the binlog position \(SHOW BINLOG STATUS\)"),
    ],
)
def test_each_missing_grant_is_named(mariadb, database, make_config, grant_user, missing: str,
                                     error: type[BinlakeError], message: str) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    grants = [f"SELECT ON {database}.*"] if missing != "SELECT" else []
    global_grants = [grant for grant in ("REPLICATION SLAVE", "BINLOG MONITOR") if grant != missing]
    user = grant_user(f"no{missing.split()[-1].lower()}", *grants, f"{', '.join(global_grants)} ON *.*")
    config = make_config([f"{database}.t"], source__user=user, source__password="grant-pw")
    with pytest.raises(error, match=message) as raised:
        Pipeline(config).validate()
    assert "GRANT" in raised.value.remedy
    # Without SELECT the table is invisible; sync has nothing to do before a snapshot anyway.
    commands = [Pipeline(config).snapshot] + ([Pipeline(config).sync] if missing != "SELECT" else [])
    for command in commands:
        with pytest.raises(error, match=message):
            command()
    assert_nothing_written(config)


# -- two readers with one server_id -------------------------------------------------------------


def test_duplicate_server_id_stops_the_older_reader_clearly(mariadb, database, make_config) -> None:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import XidEvent

    from cdc_lib.source.server import connection_settings

    table = make_items(mariadb, database, rows=2000)
    config = make_config([table])
    Pipeline(config).snapshot()
    # Enough backlog that the read is still streaming when the second reader arrives (~2 s at 30k rows/s).
    backlog(mariadb, database, transactions=30, rows=2000)
    before = footprint(config)

    run = Background(lambda: Pipeline(config).sync())
    run.start()
    wait_for(lambda: dump_threads(mariadb, sending=True) or not run.is_alive(), timeout=60, what="the binlog read")
    assert run.is_alive(), "the sync finished before the second reader came"
    # A second reader with the same server_id: a replica, or a pipeline whose config was copied.
    # MariaDB keeps the newest dump per server_id and disconnects the older one.
    newest = sql(mariadb, "SHOW MASTER STATUS")[0]
    intruder = BinLogStreamReader(
        connection_settings=connection_settings(config.source), server_id=config.source.server_id,
        resume_stream=True, log_file=newest[0], log_pos=int(newest[1]), blocking=False, is_mariadb=False,
        only_events=[XidEvent],
    )
    try:
        for _ in intruder:
            break
    finally:
        intruder.close()
    with pytest.raises(SourceConnectionError, match="server_id") as raised:
        run.outcome()
    assert footprint(config) == before, "the reader that was pushed off committed nothing"

    Pipeline(config).sync(until_caught_up=True)  # alone again, it converges
    assert delta_rows(config, table) == source_rows(mariadb, table)

    # What binlake should say: retrying cannot help while the other reader stays connected (it
    # would push that one off in turn), and the remedy is a distinct server_id.
    assert not raised.value.retryable, f"a duplicate server_id is not transient: {raised.value}"
    assert "source.server_id" in raised.value.remedy, raised.value


# -- object stores --------------------------------------------------------------------------------


def _store_case(case: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                s3_endpoint: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Offsets config for one broken store, and S3 client options that can still list it."""
    if case == "local-unwritable":
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the offset folder should go")
        return {"uri": str(blocker / "offsets")}, {}
    if case == "s3-unreachable":
        return {"uri": "s3://binlake-offsets/p", "endpoint_url": f"http://127.0.0.1:{free_port()}"}, {}
    if case == "s3-no-bucket":
        return {"uri": "s3://no-such-bucket-binlake/p", "endpoint_url": s3_endpoint}, {}
    import boto3

    readonly: ReadOnlyS3 = request.getfixturevalue("readonly_s3")
    keys = (readonly.access_key, readonly.secret_key) if case == "s3-read-only" else ("AKIAWRONG", "wrong")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1])
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # boto3 caches the credentials it found first
    listing = {"aws_access_key_id": readonly.access_key, "aws_secret_access_key": readonly.secret_key}
    return {"uri": f"s3://{readonly.bucket}/p", "endpoint_url": readonly.endpoint}, listing


@pytest.mark.parametrize(
    ("case", "message", "retryable"),
    [
        ("local-unwritable", r"cannot read .*/not-a-folder/offsets/\w+/\S+\.json \(Not a directory\)", False),
        ("s3-unreachable", r"cannot read s3://binlake-offsets/p \(EndpointConnectionError: Could not connect to the "
                           r"endpoint URL", True),
        ("s3-no-bucket", r"bucket 'no-such-bucket-binlake' of s3://no-such-bucket-binlake/p does not exist", False),
        ("s3-bad-credentials", r"cannot read s3://binlake-ro-\w+/p \(InvalidAccessKeyId\)", False),
        ("s3-read-only", r"cannot write s3://binlake-ro-\w+/p \(AccessDenied\)", False),
    ],
)
def test_unreachable_or_unwritable_offset_store(
    mariadb, database, make_config, tmp_path, monkeypatch, request, s3_endpoint,
    case: str, message: str, retryable: bool,
) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)", f"INSERT INTO {database}.t VALUES (1)")
    offsets, listing = _store_case(case, request, tmp_path, monkeypatch, s3_endpoint)
    config = make_config([f"{database}.t"], offsets=offsets)

    def pipeline() -> Pipeline:
        # Refused connections are retried with back-off; fewer attempts keep this case short.
        return Pipeline(config, store=quickly_failing_store(config) if case == "s3-unreachable" else None)

    for command in (pipeline().validate, pipeline().snapshot, pipeline().sync):
        with pytest.raises(OffsetStoreError, match=message) as raised:
            command()
        assert raised.value.retryable is retryable, raised.value
        assert "offsets." in raised.value.remedy
    assert_nothing_written(config, **listing)


def test_unwritable_sink_fails_in_one_line_and_keeps_no_table(mariadb, database, make_config, tmp_path,
                                                              monkeypatch, capsys) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)", f"INSERT INTO {database}.t VALUES (1)")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the lake should go")
    config = make_config([f"{database}.t"], sink={"path": str(blocker / "lake")},
                         offsets={"uri": str(tmp_path / "offsets")})
    code, out, err = cli_in_process(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot",
                                    monkeypatch=monkeypatch, capsys=capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("binlake: error: sink.path ") and "is not writable" in lines[0], lines[0]
    assert "remedy:" in lines[0]
    assert str(blocker) in lines[0], "the error names the path that could not be written"
    state = Pipeline(config).read_state()
    assert state.tables == {} and state.lease is None, "no table was recorded and the lease was released"
