"""The bench's Debezium peer (bench/peers/): built with Maven, it counts exactly the rows and changes written.

A build failure fails this test: the peer's figures are only worth printing if the peer runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.__main__ import make_changes
from bench.common import load_rows
from bench.peers import debezium, proc
from cdc_lib.dev.local_mariadb import LocalMariaDB
from tests.conftest import CDC_PASSWORD, CDC_USER


def test_debezium_peer_counts_every_snapshot_row_and_binlog_change(own_mariadb: LocalMariaDB, tmp_path: Path) -> None:
    load_rows(own_mariadb, 400)
    source = debezium.Source(own_mariadb.port, CDC_USER, CDC_PASSWORD, server_id=7731)
    debezium.prepare(own_mariadb.execute, source)

    snapshot = debezium.snapshot(own_mariadb.execute, source, tmp_path / "dbz", 400, timeout=150)
    assert snapshot.records == 400
    assert 0 < snapshot.seconds_from_first <= snapshot.seconds
    assert snapshot.cpu_seconds > 0

    # Inserts, multi-row updates and deletes: the stream phase resumes from the snapshot's offsets (the Java side
    # fails if it snapshots again) and must see each row change once.
    changed = make_changes(own_mariadb, 3000, 401)
    stream = debezium.stream(source, tmp_path / "dbz", changed, timeout=150)
    assert stream.records == changed == 3000


def test_cpu_seconds_from_proc_cover_the_process_tree_and_the_server(own_mariadb: LocalMariaDB) -> None:
    pid = own_mariadb.pid
    assert pid is not None
    assert pid in proc.descendants(os.getpid())
    server_before = proc.process_cpu_seconds(pid)
    tree_before = proc.tree_cpu_seconds(os.getpid())
    load_rows(own_mariadb, 20_000)
    # The server's own time grows with the rows it applies, and the tree (which holds the server) by as much.
    server_spent = proc.process_cpu_seconds(pid) - server_before
    assert server_spent > 0
    assert proc.tree_cpu_seconds(os.getpid()) - tree_before >= server_spent
    # Excluding the server (as binlake's figure does) leaves this process's time only.
    assert proc.tree_cpu_seconds(os.getpid(), exclude=(pid,)) < proc.tree_cpu_seconds(os.getpid())


def test_the_olake_shaped_table_has_their_columns_and_lands_every_row(own_mariadb: LocalMariaDB,
                                                                     tmp_path: Path) -> None:
    """OLake's published MySQL `trips` table, column for column; binlake's snapshot and its sync of inserted rows
    land every row in Delta, read back with delta-rs, not binlake."""
    from deltalake import DeltaTable

    from bench.common import PASSWORD, USER
    from bench.peers import olake

    own_mariadb.create_cdc_user(USER, PASSWORD)
    own_mariadb.execute("CREATE DATABASE bench")
    snapshot, sync = olake.run(own_mariadb, tmp_path, 700, 300)
    assert (snapshot.rows, sync.rows) == (700, 300)
    assert snapshot.cpu_seconds > 0 and sync.cpu_seconds > 0

    connection = own_mariadb.admin_connection()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bench' "
                           "AND TABLE_NAME = 'trips' ORDER BY ORDINAL_POSITION")
            types = [str(row[0]).split(" ")[0] for row in cursor.fetchall()]
    finally:
        connection.close()
    # Their table: a BIGINT key, 10 INT, 2 DATETIME, 1 TINYINT(1), 15 DECIMAL(10,2).
    assert len(types) == olake.COLUMNS == 29
    assert sorted(set(types)) == ["bigint(20)", "datetime", "decimal(10,2)", "int(11)", "tinyint(1)"]
    assert [types.count(kind) for kind in ("bigint(20)", "int(11)", "datetime", "tinyint(1)", "decimal(10,2)")] \
        == [1, 10, 2, 1, 15]

    landed = DeltaTable(str(tmp_path / "lake-olake" / "bench" / "trips")).to_pyarrow_table()
    assert landed.num_rows == 1000
    assert sorted(landed.column("id").to_pylist()) == list(range(1, 1001))
    assert len([name for name in landed.column_names if not name.startswith("_")]) == 29
