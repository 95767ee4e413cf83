"""Huge transactions with bounded memory: a transaction larger than `batch.max_buffered_changes` is spilled to
Parquet (cdc_lib.changes.spill) and applied exactly, by a mirror and a history table, across a SIGKILL mid-apply, with
the Python process's peak memory held down where the in-memory path's grows with the transaction.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.paths.huge_transaction import measure_in_subprocess
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, scan_rows, source_rows, sql, write_config_file

BOUND = 1_000
DATA = ["id", "grp", "amount", "label"]


def _create(mariadb: Any, table: str, rows: int) -> None:
    sql(
        mariadb,
        f"CREATE TABLE {table} (id INT PRIMARY KEY, grp INT NOT NULL, amount DECIMAL(12,3), label VARCHAR(40))",
        f"INSERT INTO {table} SELECT seq, seq % 13, seq * 12.25 - 7.125, CONCAT('row ', seq) FROM seq_1_to_{rows}",
        database=table.partition(".")[0],
    )


def _huge_transaction(mariadb: Any, items: str, hist: str | None = None) -> None:
    """One transaction of ~20k row changes on `items` (updates, deletes, key changes, inserts, a savepoint
    rolled back) and, given `hist`, every row of it updated, some deleted or moved to a new key."""
    statements = [
        "START TRANSACTION",
        f"UPDATE {items} SET amount = amount * 2 + 12.25, label = 'doubled' WHERE id % 3 = 0",
        f"DELETE FROM {items} WHERE id % 5 = 1",
        f"UPDATE {items} SET id = id + 100000, amount = -7.125 WHERE id % 7 = 2",
        f"INSERT INTO {items} SELECT 200000 + seq, seq % 4, seq / 8, 'new' FROM seq_1_to_3000",
        f"DELETE FROM {items} WHERE id BETWEEN 200001 AND 200400",
        "SAVEPOINT s1",
        f"UPDATE {items} SET label = 'rolled back', amount = NULL WHERE id < 6000",
        f"DELETE FROM {items} WHERE id > 100000",
        "ROLLBACK TO SAVEPOINT s1",
        f"UPDATE {items} SET label = 'after the savepoint' WHERE id % 11 = 0",
        f"UPDATE {items} SET id = id + 300000 WHERE id BETWEEN 100001 AND 100500",
    ]
    if hist is not None:
        statements += [
            f"UPDATE {hist} SET amount = amount - 7.125, label = 'changed'",
            f"DELETE FROM {hist} WHERE id % 4 = 1",
            f"UPDATE {hist} SET id = id + 50000 WHERE id % 9 = 0",
        ]
    sql(mariadb, *statements, "COMMIT", database=items.partition(".")[0])


def _config_file(config: Any, path: Path, *, bound: int, spill: Path, modes: dict[str, str] | None = None) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["batch"].update(max_buffered_changes=bound, spill_path=str(spill))
    if modes:
        document["sink"]["tables"] = {table: {"mode": mode} for table, mode in modes.items()}
    path.write_text(yaml.safe_dump(document))
    return path


def _cli(config_path: Path, *arguments: str, env: dict[str, str]) -> subprocess.Popen[str]:
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **env}
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
    )


def _spill_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet")) if root.exists() else []


def _current(config: Any, table: str) -> list[tuple[Any, ...]]:
    rows = scan_rows(Pipeline(config).table_path(table), [*DATA, "_binlake_is_current"])
    return sorted(row[:-1] for row in rows if row[-1])


def test_a_transaction_past_the_bound_is_spilled_and_applied_exactly(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    items, hist = f"{database}.items", f"{database}.hist"
    _create(mariadb, items, 12_000)
    _create(mariadb, hist, 2_500)
    modes = {hist: "history"}
    spill = tmp_path / "spill"
    config = make_config([items, hist], batch__max_buffered_changes=BOUND, batch__spill_path=str(spill),
                         sink__tables={hist: {"mode": "history"}})
    Pipeline(config).snapshot()
    snapshot_of_hist = {row[0]: row for row in source_rows(mariadb, hist)}
    _huge_transaction(mariadb, items, hist)
    changes = sql(mariadb, f"SELECT COUNT(*) FROM {items}")[0][0]
    assert changes > 10 * BOUND

    # The sync pauses once every part of a spilled table is staged, before its MERGE (one pause per table).
    pause = tmp_path / "paused"
    process = _cli(_config_file(config, tmp_path / "binlake.yaml", bound=BOUND, spill=spill, modes=modes), "sync",
                   env={"BINLAKE_FAILPOINT_PAUSE": "spilled_apply", "BINLAKE_FAILPOINT_PAUSE_FILE": str(pause)})
    seen_during: list[int] = []
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if pause.exists():
            seen_during.append(len(_spill_files(spill)))
            pause.unlink()
        time.sleep(0.05)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-3000:]
    assert len(seen_during) == 2 and all(count > 0 for count in seen_during), seen_during
    assert _spill_files(spill) == [], "the spill is removed once its table is applied"

    # delta-rs reads what the server's own SELECT says.
    assert sorted(scan_rows(Pipeline(config).table_path(items), DATA)) == source_rows(mariadb, items)
    assert _current(config, hist) == source_rows(mariadb, hist)
    versions = scan_rows(Pipeline(config).table_path(hist), [*DATA, "_binlake_is_current"])
    closed = sorted(row[:4] for row in versions if not row[-1])
    # Every snapshot row's version was closed once (each was updated, deleted or moved), with its old values.
    assert closed == sorted(snapshot_of_hist.values())
    state = Pipeline(config).read_state()
    assert all(table.error is None for table in state.tables.values())


def test_sigkill_in_a_spilled_apply_then_rerun_is_exact(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    items = f"{database}.items"
    _create(mariadb, items, 6_000)
    spill = tmp_path / "spill"
    config = make_config([items], batch__max_buffered_changes=BOUND, batch__spill_path=str(spill))
    Pipeline(config).snapshot()
    _huge_transaction(mariadb, items)

    process = _cli(_config_file(config, tmp_path / "binlake.yaml", bound=BOUND, spill=spill), "sync",
                   env={"BINLAKE_FAILPOINT": "spilled_apply"})
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    left = _spill_files(spill)
    assert left and all(f"proc-{process.pid}" in str(path) for path in left), "the killed run left its spill"

    sql(mariadb, f"UPDATE {items} SET amount = 12.25 WHERE id = 4")  # one more change after the crash
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    assert not (spill / f"proc-{process.pid}").exists(), "what the killed run spilled is removed, never read"
    assert _spill_files(spill) == []
    assert sorted(scan_rows(pipeline.table_path(items), DATA)) == source_rows(mariadb, items)
    state = pipeline.read_state()
    assert state.tables[items].consistent and state.tables[items].applied_seq == state.batch_seq


def test_the_spilled_path_bounds_python_memory_where_todays_grows(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    """Both pipelines sync the same UPDATE of every row of a 80,000-row table, in one fresh process; the
    in-memory path (a bound above the transaction: today's path) must grow well past what the spilled one
    does, or this test proves nothing about the bound."""
    table = f"{database}.wide"
    sql(
        mariadb,
        f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(12,3), pad VARCHAR(255))",
        f"INSERT INTO {table} SELECT seq, seq * 12.25, REPEAT(CHAR(97 + seq % 26), 200) FROM seq_1_to_80000",
        database=database,
    )
    paths = []
    for name, bound in (("spilled", BOUND), ("in_memory", 1_000_000_000)):
        config = make_config([table], pipeline=f"{name}_{database[-6:]}")
        Pipeline(config).snapshot()
        paths.append(_config_file(config, tmp_path / f"{name}.yaml", bound=bound, spill=tmp_path / "spill"))
    sql(mariadb, f"UPDATE {table} SET amount = amount - 7.125, pad = CONCAT('u', pad)")
    spilled, in_memory = measure_in_subprocess(paths, env={"BINLAKE_TEST_PASSWORD": CDC_PASSWORD}, timeout=600)
    assert spilled["row_changes"] == in_memory["row_changes"] == 80_000
    mb = 1024 * 1024
    print(f"peak RSS growth: spilled {spilled['growth_bytes'] / mb:.1f} MB, "
          f"in memory {in_memory['growth_bytes'] / mb:.1f} MB")
    # The spilled run's growth is fixed costs (Arrow's buffers, the first MERGE's py4j objects), ~20 MB here
    # whatever the size of the transaction (bench/paths/huge_transaction.py prints the slope); today's grows ~1.6 KB
    # a row of this table.
    assert spilled["growth_bytes"] < 40 * mb, spilled
    assert in_memory["growth_bytes"] > 2 * 40 * mb, in_memory
