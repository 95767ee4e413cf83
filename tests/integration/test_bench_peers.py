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
