"""Security: the password never leaves the process, and TLS to the source is verified end to end."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ConfigError, SourceConnectionError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.source.server import source_connection
from tests.conftest import CDC_PASSWORD, CDC_USER, delta_rows, run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import Background, assert_nothing_written

# -- the password ---------------------------------------------------------------------------------


@pytest.mark.slow  # six real CLI runs, four of them start their own JVM
def test_password_never_reaches_output_offsets_or_delta_log(mariadb, database, make_config, tmp_path) -> None:
    table = f"{database}.secrets"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    config = make_config([table])
    path = write_config_file(config, tmp_path / "binlake.yaml")
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}

    def cli(name: str, *arguments: str, config_path: Path = path) -> subprocess.CompletedProcess[str]:
        outputs[name] = result = run_cli(config_path, "-v", *arguments)
        return result

    # A failure deep in Spark, with -v so its traceback is logged; it runs beside the others.
    broken = make_config([table], sink={"path": str(tmp_path / "lake2")}, offsets={"uri": str(tmp_path / "o2")},
                         spark={"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "not-a-number"}})
    crashing = Background(lambda: cli("broken spark conf", "snapshot",
                                      config_path=write_config_file(broken, tmp_path / "broken.yaml")))
    crashing.start()

    assert cli("validate", "validate").returncode == 0
    assert cli("snapshot", "snapshot").returncode == 0
    sql(mariadb, f"UPDATE {table} SET v = 'c' WHERE id = 1", f"INSERT INTO {table} VALUES (3, 'd')")
    assert cli("sync", "sync", "--until-caught-up").returncode == 0
    assert json.loads(cli("status", "status", "--json").stdout)[0]["consistent"]
    assert json.loads(cli("reconcile", "reconcile", "--json").stdout)[0]["matches"]
    failing = cli("missing table", "snapshot", "--table", f"{database}.nope")
    assert failing.returncode == 2 and "binlake: error:" in failing.stderr
    crashed = crashing.outcome()
    assert crashed.returncode == 2 and "Traceback" in crashed.stderr, crashed.stderr[-2000:]
    assert "INFO binlake:" in outputs["snapshot"].stderr, "-v really logged"

    for name, result in outputs.items():
        assert CDC_PASSWORD not in result.stdout + result.stderr, f"password in the output of {name}"
    state_files = list(Path(config.offsets.uri).rglob("*.json"))
    commit_files = list(Path(config.sink.path).rglob("_delta_log/*.json"))
    assert state_files and len(commit_files) >= 2
    for file in state_files + commit_files:
        assert CDC_PASSWORD not in file.read_text(), f"password in {file}"
    for file in commit_files:
        for line in file.read_text().splitlines():
            metadata = json.loads(line).get("commitInfo", {}).get("userMetadata")
            if metadata:
                assert json.loads(metadata)["app_id"].startswith("binlake:")
                assert CDC_PASSWORD not in metadata


# -- TLS -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsServer:
    server: LocalMariaDB
    ca: Path
    other_ca: Path


def _openssl(*arguments: str | Path) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True)


def make_certificates(folder: Path) -> tuple[Path, Path, Path, Path]:
    """A CA, a server certificate for IP 127.0.0.1 signed by it, and an unrelated CA."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=binlake test {name}",
                 "-keyout", folder / f"{name}.key", "-out", folder / f"{name}.pem")
    extensions = folder / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", folder / "server.key", "-out", folder / "server.csr")
    _openssl("x509", "-req", "-in", folder / "server.csr", "-CA", folder / "ca.pem", "-CAkey", folder / "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", folder / "server.pem")
    return folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "other-ca.pem"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    """A private MariaDB that accepts TCP clients only over TLS (require_secure_transport=ON)."""
    base = tmp_path_factory.mktemp("tls")
    ca, certificate, key, other_ca = make_certificates(base / "certs")
    server = LocalMariaDB(base / "mariadb", server_id=41, extra_options={
        "ssl-ca": str(ca), "ssl-cert": str(certificate), "ssl-key": str(key), "require-secure-transport": "ON",
    }).start()
    server.create_cdc_user(CDC_USER, CDC_PASSWORD)
    yield TlsServer(server, ca, other_ca)
    server.stop()


@pytest.fixture
def tls_table(tls_server: TlsServer) -> str:
    database = f"t_{uuid.uuid4().hex[:10]}"
    sql(tls_server.server, f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20), at DATETIME(3))",
        f"INSERT INTO {database}.t SELECT seq, CONCAT('row ', seq), '2026-01-02 03:04:05.678' FROM "
        f"{database}.seq_1_to_500")
    return f"{database}.t"


def tls_config(make_config: Any, tls: TlsServer, table: str, **overrides: Any) -> Any:
    return make_config([table], source__port=tls.server.port, **overrides)


def test_snapshot_and_sync_over_verified_tls(tls_server, tls_table, make_config) -> None:
    config = tls_config(make_config, tls_server, tls_table, source__ssl_ca=str(tls_server.ca))
    with source_connection(config.source) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert str(cursor.fetchone()[1]).startswith("TLS"), "pymysql talks TLS"
    pipeline = Pipeline(config)
    pipeline.validate()
    pipeline.snapshot()  # Spark's JDBC reads: the server refuses them unless they use TLS
    sql(tls_server.server, f"UPDATE {tls_table} SET v = 'changed' WHERE id <= 10",
        f"DELETE FROM {tls_table} WHERE id > 490", f"INSERT INTO {tls_table} VALUES (1000, 'new', NULL)")
    results = pipeline.sync(until_caught_up=True)  # the binlog dump: TLS too
    assert sum(result.row_changes for result in results) == 21
    assert delta_rows(config, tls_table) == source_rows(tls_server.server, tls_table)
    assert pipeline.status()[0].consistent


def test_without_ssl_ca_the_server_refuses_and_says_why(tls_server, tls_table, make_config) -> None:
    config = tls_config(make_config, tls_server, tls_table)
    for command in (Pipeline(config).validate, Pipeline(config).snapshot, Pipeline(config).sync):
        with pytest.raises(SourceConnectionError, match="the server offers TLS and source.ssl_ca is not set") as raised:
            command()
        assert not raised.value.retryable
        assert "set source.ssl_ca" in raised.value.remedy
    assert_nothing_written(config)


@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("unrelated CA", SourceConnectionError,
         r"TLS to 127.0.0.1:\d+ failed: the server certificate does not check out against source.ssl_ca .*other-ca.pem"
         r" \(self-signed certificate in certificate chain"),
        ("name not in certificate", SourceConnectionError,
         r"TLS to localhost:\d+ failed: .*Hostname mismatch, certificate is not valid for 'localhost'"),
        ("CA file missing", ConfigError, r"config key 'source.ssl_ca': cannot load the CA certificate .*absent.pem"),
    ],
)
def test_tls_that_does_not_check_out_is_refused(tls_server, tls_table, make_config, tmp_path, case: str,
                                                 error: type[Exception], message: str) -> None:
    overrides = {
        "unrelated CA": {"source__ssl_ca": str(tls_server.other_ca)},
        "name not in certificate": {"source__ssl_ca": str(tls_server.ca), "source__host": "localhost"},
        "CA file missing": {"source__ssl_ca": str(tmp_path / "absent.pem")},
    }[case]
    config = tls_config(make_config, tls_server, tls_table, **overrides)
    with pytest.raises(error, match=message) as raised:
        Pipeline(config).validate()
    assert getattr(raised.value, "retryable", False) is False
    with pytest.raises(error, match=message):
        Pipeline(config).snapshot()
    assert_nothing_written(config)
