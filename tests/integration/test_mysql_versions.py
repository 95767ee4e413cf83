"""MySQL 8.0, 8.4 and 9.x as binlake meets them: the statements and variables each version has, its logins
(`mysql_native_password` going away, `caching_sha2_password` over TLS) — issue 27, items 5 and 6.

No MySQL server runs here. The protocol stub (tests/mysql_stub.py) answers as the MySQL version it is given:
`mysql_variables(version)` and `MySQLStub.answer` hold what each version has and rejects, from MySQL's option and
variable change lists and release notes (docs/servers.md says which facts are documentation only). `stub.refused`
lists every statement the stub answered with an error: binlake must send none that its version rejects. The TLS
tests make a CA and a server certificate with `cryptography` in the test's temporary folder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from cdc_lib.binlog.batch import TableCursor
from cdc_lib.binlog.stream import read_batch
from cdc_lib.config.model import BatchConfig, PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ServerSettingsError, SourceConnectionError
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.status import runway
from tests.mysql_stub import SHOP_ORDERS, BinlogFile, MySQLStub, StubColumn, StubTable

#: One release per line binlake meets: 8.0 before the `replica` names (8.0.26), the last 8.0, the LTS, an
#: innovation release.
VERSIONS = ["8.0.23", "8.0.40", "8.4.3", "9.1.0"]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "mysql-binlogs"
#: rust_mysql_common's strings (PROVENANCE.md, mysql-enum-string-set): S is 100 characters, L 298.
S = "0123456789" * 10
L = ("0123456789" * 12 + "012345678") * 2 + "0123456789" * 4


def config_for(server: MySQLStub, tmp_path: Path, **source: Any) -> PipelineConfig:
    return parse_config({
        "pipeline": "shop",
        "source": {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password,
                   "server_id": 4242, "tables": ["shop.orders"], "connect_timeout": 5, **source},
        "sink": {"path": str(tmp_path / "lake")},
        "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
    })


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[MySQLStub]:
    server = MySQLStub(version=request.param, extra=dict(SHOP_ORDERS)).start()
    yield server
    server.stop()


@pytest.mark.parametrize("stub", VERSIONS, indirect=True)
def test_each_version_passes_the_checks_with_only_the_statements_it_has(stub: MySQLStub, tmp_path: Path) -> None:
    """`binlake check` (validate), the position, the binlog list, the runway's expiry and a binlog dump's opening,
    on each version: nothing binlake sends is rejected, and the binlog status is read by the version's name."""
    config = config_for(stub, tmp_path)
    checked = Pipeline(config).validate()
    with mysql.source_connection(config.source) as connection:
        position = binlog_status.current_position(connection)
        expiry = runway.ExpirySettings.read(connection)
        logs = binlog_status.binary_logs(connection)
    assert runway._file_created_at(config.source, logs[0][0]) is None  # opens a dump; the stub has no events
    assert stub.refused == []
    assert any("performance_schema.log_status readable" in line for line in checked)
    new_status = tuple(int(part) for part in stub.version.split(".")) >= (8, 2, 0)
    assert ("SHOW BINARY LOG STATUS" in stub.queries) == new_status
    assert ("SHOW MASTER STATUS" in stub.queries) == (not new_status)
    assert position.gtid == stub.variables["gtid_executed"] and position.server == ServerIdentity(
        server_id=1, server_uuid=stub.variables["server_uuid"])
    assert expiry.expire_seconds == 2_592_000  # binlog_expire_logs_seconds; expire_logs_days is 0 or gone
    # Never the statements 8.4 removed, nor MariaDB's variables (the stub would refuse those anyway).
    removed = ("SHOW MASTER LOGS", "SHOW SLAVE", "gtid_binlog_pos", "@@expire_logs_days")
    assert not [sql for sql in stub.queries if any(name.lower() in sql.lower() for name in removed)]
    assert "<COM_BINLOG_DUMP binlog.000002:4>" in stub.queries


@pytest.mark.parametrize("stub", ["8.0.40", "8.4.3", "9.1.0"], indirect=True)
def test_binlog_expire_logs_auto_purge_off_means_no_runway_ends(stub: MySQLStub, tmp_path: Path) -> None:
    # MySQL 8.0.29+: with auto purge OFF nothing is purged by age; main reported 30 days of runway.
    stub.variables["binlog_expire_logs_auto_purge"] = "OFF"
    with mysql.source_connection(config_for(stub, tmp_path).source) as connection:
        expiry = runway.ExpirySettings.read(connection)
    assert expiry.expire_seconds is None and expiry.size_limit_bytes is None
    assert runway.runway_seconds(expiry=expiry, rotated_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                                 now=dt.datetime(2026, 6, 1, tzinfo=dt.UTC)) is None
    assert stub.refused == []


@pytest.mark.parametrize("stub", ["8.0.23"], indirect=True)
def test_expire_logs_days_still_counts_on_a_mysql_80_that_has_it(stub: MySQLStub, tmp_path: Path) -> None:
    stub.variables.update(binlog_expire_logs_seconds="0", expire_logs_days="7")
    with mysql.source_connection(config_for(stub, tmp_path).source) as connection:
        assert runway.ExpirySettings.read(connection).expire_seconds == 7 * 86_400


@pytest.mark.parametrize(
    ("version", "settings", "logs_in"),
    [("8.0.40", {}, True), ("8.4.3", {}, False), ("8.4.3", {"mysql_native_password": "ON"}, True),
     ("9.1.0", {}, False)],
)
def test_a_mysql_native_password_account_on_each_version(tmp_path: Path, version: str, settings: dict[str, str],
                                                         logs_in: bool) -> None:
    """8.4 loads mysql_native_password only with mysql_native_password=ON and 9.0 removed it: such an account
    cannot log in, which no retry changes (main called it retryable and said "check the source settings")."""
    with MySQLStub(version=version, auth_plugin="mysql_native_password", variables=settings) as server:
        source = config_for(server, tmp_path).source
        if logs_in:
            mysql.connect(source).close()
            assert server.logins == ["native"]
            return
        with pytest.raises(SourceConnectionError, match="plugin the server does not load") as raised:
            mysql.connect(source)
    assert not raised.value.retryable
    assert "IDENTIFIED WITH caching_sha2_password" in raised.value.remedy
    assert "on MySQL 8.4 only, starting the server with mysql_native_password=ON" in raised.value.remedy
    assert server.logins == []


@pytest.mark.parametrize(("version", "name"), [("8.0.23", "slave_exec_mode"), ("8.4.3", "replica_exec_mode"),
                                               ("9.1.0", "replica_exec_mode")])
def test_an_idempotent_replica_is_refused_by_the_name_its_version_uses(tmp_path: Path, version: str,
                                                                        name: str) -> None:
    # On 8.0.26+ both names show the same variable; main named the deprecated one first.
    with MySQLStub(version=version, extra=dict(SHOP_ORDERS)) as server:
        server.variables[name] = "IDEMPOTENT"
        with pytest.raises(ServerSettingsError, match=f"{name} is 'IDEMPOTENT'") as raised:
            Pipeline(config_for(server, tmp_path)).validate()
    assert f"SET GLOBAL {name}='STRICT'" in raised.value.remedy


@pytest.mark.parametrize("stub", ["8.4.3"], indirect=True)
def test_check_refuses_a_mysql_user_that_cannot_read_log_status(stub: MySQLStub, tmp_path: Path) -> None:
    """A snapshot on MySQL reads its low watermark from performance_schema.log_status: `binlake check` says what
    is missing before any snapshot (main let it pass; the first snapshot refused)."""
    stub.grants = [grant for grant in stub.grants if "BACKUP_ADMIN" not in grant]
    with pytest.raises(Exception, match="may not read performance_schema.log_status") as raised:
        Pipeline(config_for(stub, tmp_path)).validate()
    assert "GRANT BACKUP_ADMIN ON *.*" in getattr(raised.value, "remedy", "")
    assert not (tmp_path / "lake").exists()


# -- TLS -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Certificates:
    ca: Path
    other_ca: Path
    context: ssl.SSLContext


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _certificate(subject: str, key: rsa.RSAPrivateKey, issuer: tuple[str, rsa.RSAPrivateKey] | None,
                 *, ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:  # the name the client checks: source.host is 127.0.0.1
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA, a server certificate it signed for 127.0.0.1, and an unrelated CA."""
    folder = tmp_path_factory.mktemp("tls")
    ca_key, server_key = _key(), _key()
    ca = _certificate("binlake test CA", ca_key, None, ca=True)
    (folder / "ca.pem").write_bytes(_pem(ca))
    (folder / "other-ca.pem").write_bytes(_pem(_certificate("another CA", _key(), None, ca=True)))
    (folder / "server.pem").write_bytes(_pem(_certificate("127.0.0.1", server_key, ("binlake test CA", ca_key),
                                                          ca=False)))
    (folder / "server.key").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return Certificates(folder / "ca.pem", folder / "other-ca.pem", context)


@pytest.mark.parametrize("version", ["8.0.40", "8.4.3", "9.1.0"])
def test_caching_sha2_full_authentication_over_verified_tls(certificates: Certificates, tmp_path: Path,
                                                             version: str) -> None:
    """With source.ssl_ca every login goes inside TLS: full authentication sends the password there, no RSA
    key is asked for; `binlake check` then runs through on the server that requires TLS."""
    settings = {"require_secure_transport": "ON"}
    with MySQLStub(version=version, tls=certificates.context, variables=settings, extra=dict(SHOP_ORDERS)) as server:
        config = config_for(server, tmp_path, ssl_ca=str(certificates.ca))
        for _ in range(2):
            mysql.connect(config.source).close()
        assert server.logins == ["sha2-full-tls", "sha2-fast"]
        assert server._rsa_key is None  # no key exchange happened
        Pipeline(config).validate()
        assert server.secure_logins and all(server.secure_logins)
        assert server.refused == []


def test_a_server_that_requires_tls_refuses_a_source_without_ssl_ca(certificates: Certificates,
                                                                     tmp_path: Path) -> None:
    with MySQLStub(tls=certificates.context, variables={"require_secure_transport": "ON"}) as server:
        with pytest.raises(SourceConnectionError, match="requires TLS and source.ssl_ca is not set") as raised:
            mysql.connect(config_for(server, tmp_path).source)
        assert server.logins == []
    assert not raised.value.retryable and "set source.ssl_ca" in raised.value.remedy


@pytest.mark.parametrize(("case", "message"), [
    ("unrelated CA", r"the server certificate does not check out against source.ssl_ca .*other-ca.pem"),
    ("no TLS offered", "source.ssl_ca is set but the server at 127.0.0.1:\\d+ does not offer TLS"),
])
def test_tls_that_does_not_check_out_is_refused(certificates: Certificates, tmp_path: Path, case: str,
                                                message: str) -> None:
    context = None if case == "no TLS offered" else certificates.context
    ca = certificates.other_ca if case == "unrelated CA" else certificates.ca
    with MySQLStub(tls=context) as server:
        with pytest.raises(SourceConnectionError, match=message) as raised:
            mysql.connect(config_for(server, tmp_path, ssl_ca=str(ca)).source)
        assert server.logins == []
    assert not raised.value.retryable


def test_the_binlog_reader_reads_real_mysql_bytes_over_tls(certificates: Certificates, tmp_path: Path) -> None:
    """python-mysql-replication's connections (the dump and its own control connection) go over verified TLS to a
    server that requires it, and decode the real MySQL 8.0.28 bytes of mysql-enum-string-set as without TLS:
    the first row transaction's row, as its origin's test asserts (PROVENANCE.md)."""
    file = BinlogFile.read(FIXTURES / "rust_mysql_common/mysql-enum-string-set.000001")
    table = StubTable("mysql", "t", (
        StubColumn("f1", "char(128)"), StubColumn("f2", "varchar(300)"),
        StubColumn("f3", "enum('var1','variant2','foo')"), StubColumn("f4", "set('one','two','three','four')"),
        StubColumn("f5", "text"),
    ), primary_key=("f1",))  # no key in the origin; f1 differs in every row
    events = file.events
    first_rows = next(index for index, event in enumerate(events) if event.type_code == 19)  # TABLE_MAP
    start = max(event.pos for event in events[:first_rows] if event.type_code == 33)  # its GTID event
    stub = MySQLStub.serving([file], [table], tls=certificates.context)
    stub.variables["require_secure_transport"] = "ON"
    columns = tuple(
        ColumnInfo(name=name, data_type=data_type, column_type=column_type, nullable=nullable == "YES",
                   character_set=charset)
        for name, data_type, column_type, nullable, _, _, _, _, charset, _
        in (column.information_schema() for column in table.columns)
    )
    cursor = TableCursor("mysql.t", BinlogPosition(file.name, start),
                         TableSchema(TableRef("mysql", "t"), columns, table.primary_key))
    with stub:
        source = dataclasses.replace(config_for(stub, tmp_path).source, ssl_ca=str(certificates.ca))
        read = read_batch(source, [cursor], BatchConfig(max_events=1))
    assert not read.table_errors and read.transactions == 1
    assert read.changes["mysql.t"].rows == {
        (S,): ("upsert", (S, L, "var1", "one,three", "0123456789")),
    }
    assert any(sql.startswith("<COM_BINLOG_DUMP") for sql in stub.queries)
    assert len(stub.secure_logins) >= 2 and all(stub.secure_logins)
    assert "sha2-full-rsa" not in stub.logins and stub.refused == []
