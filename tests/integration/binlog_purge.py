"""Purging a server's binlogs down to the newest file, for tests of a position the server no longer has."""

from __future__ import annotations

import time

import pytest

from cdc_lib.dev.local_mariadb import LocalMariaDB
from tests.conftest import sql


def purge_all_but_newest(server: LocalMariaDB) -> None:
    """PURGE skips files a connected reader still uses; end leftover dumps until the purge takes."""
    sql(server, "FLUSH BINARY LOGS")
    newest = sql(server, "SHOW MASTER STATUS")[0][0]
    for _ in range(20):
        sql(server, f"PURGE BINARY LOGS TO '{newest}'")
        if [row[0] for row in sql(server, "SHOW BINARY LOGS")] == [newest]:
            return
        for row in sql(server, "SHOW PROCESSLIST"):
            if str(row[4]).startswith("Binlog Dump"):
                sql(server, f"KILL CONNECTION {row[0]}")
        time.sleep(0.5)
    pytest.fail("the server kept old binlogs")
