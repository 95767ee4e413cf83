"""A private MariaDB for the demo and the tests: own datadir and port on 127.0.0.1, binlog ROW/FULL/FULL."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from cdc_lib.errors import BinlakeError

_SERVER_CANDIDATES = ("/usr/sbin/mariadbd", "/usr/sbin/mysqld", "/usr/bin/mariadbd")
_INSTALL_CANDIDATES = ("/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _find(candidates: tuple[str, ...], name: str) -> str:
    for candidate in candidates:
        if Path(candidate).exists():
            return candidate
    found = shutil.which(name)
    if found:
        return found
    raise BinlakeError(
        f"{name} is not installed",
        remedy="install MariaDB: apt-get install -y mariadb-server (or run .ci/run)",
    )


@dataclass
class LocalMariaDB:
    """Starts and stops one private mariadbd by PID.

    The server binds 127.0.0.1 only; `root` connects without a password over the
    private unix socket, every other user over TCP.
    """

    base_dir: Path
    port: int = 0
    server_id: int = 1
    extra_options: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_path(self) -> Path:
        return self.base_dir / "mysqld.sock"

    @property
    def pid_path(self) -> Path:
        return self.base_dir / "mysqld.pid"

    @property
    def error_log(self) -> Path:
        return self.base_dir / "error.log"

    def options(self) -> dict[str, str]:
        options = {
            "datadir": str(self.datadir),
            "socket": str(self.socket_path),
            "pid-file": str(self.pid_path),
            "port": str(self.port),
            "bind-address": "127.0.0.1",
            "log-error": str(self.error_log),
            "server-id": str(self.server_id),
            "log-bin": "mariadb-bin",
            "binlog-format": "ROW",
            "binlog-row-image": "FULL",
            "binlog-row-metadata": "FULL",
            "innodb-buffer-pool-size": "256M",
            "innodb-log-file-size": "128M",
            "innodb-flush-log-at-trx-commit": "2",
            "sync-binlog": "0",
            "skip-name-resolve": "ON",
            "character-set-server": "utf8mb4",
            "collation-server": "utf8mb4_unicode_ci",
            "max-connections": "300",
            "default-time-zone": "+00:00",
        }
        options.update(self.extra_options)
        return options

    def start(self, *, timeout: float = 60.0) -> LocalMariaDB:
        if self.port == 0:
            self.port = free_port()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if not (self.datadir / "mysql").exists():
            self._install()
        arguments = [_find(_SERVER_CANDIDATES, "mariadbd"), "--no-defaults"]
        arguments += [f"--{key}={value}" for key, value in self.options().items() if value != ""]
        if os.geteuid() == 0:
            arguments.append("--user=root")
        self.process = subprocess.Popen(
            arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BinlakeError(
                    f"mariadbd exited with code {self.process.returncode} while starting",
                    remedy=f"read {self.error_log}",
                )
            try:
                self.admin_connection().close()
                return self
            except pymysql.MySQLError:
                time.sleep(0.2)
        self.stop()
        raise BinlakeError(
            f"mariadbd did not accept connections within {timeout:.0f}s", remedy=f"read {self.error_log}"
        )

    def _install(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        arguments = [
            _find(_INSTALL_CANDIDATES, "mariadb-install-db"),
            "--no-defaults",
            f"--datadir={self.datadir}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
        if os.geteuid() == 0:
            arguments.append("--user=root")
        result = subprocess.run(arguments, capture_output=True, text=True)
        if result.returncode != 0:
            raise BinlakeError(
                f"mariadb-install-db failed: {result.stderr.strip()[-400:]}",
                remedy="check that mariadb-server is installed and the folder is writable",
            )

    def admin_connection(self, database: str | None = None) -> pymysql.connections.Connection:
        return pymysql.connect(
            unix_socket=str(self.socket_path), user="root", database=database, autocommit=True, charset="utf8mb4"
        )

    def execute(self, *statements: str) -> None:
        connection = self.admin_connection()
        try:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
        finally:
            connection.close()

    def create_cdc_user(self, user: str, password: str) -> None:
        """Create a user with the least privileges binlake needs."""
        grants = "SELECT, REPLICATION CLIENT, REPLICATION SLAVE, BINLOG MONITOR"
        for host in ("127.0.0.1", "localhost"):
            self.execute(
                f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{password}'",
                f"GRANT {grants} ON *.* TO '{user}'@'{host}'",
            )

    def stop(self, *, timeout: float = 60.0) -> None:
        pid = self._pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                break
            if self.process is None and not _alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        self.process = None

    def kill(self, *, timeout: float = 30.0) -> None:
        """SIGKILL the server this object started, as a crash would stop it, and wait until it is gone.

        `start()` afterwards restarts it on the same port and datadir (InnoDB and binlog recovery run).
        """
        if self.process is None:
            raise BinlakeError("this LocalMariaDB did not start a server", remedy="call start() first")
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=timeout)
        self.process = None

    @property
    def pid(self) -> int | None:
        """The process id of the server this object started, while it runs."""
        return None if self.process is None else self.process.pid

    def _pid(self) -> int | None:
        if self.process is not None:
            return self.process.pid
        if self.pid_path.exists():
            return int(self.pid_path.read_text().strip())
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
