"""Column projection and masking (`sink.tables.<t>.columns` / `.mask`, docs/columns-and-masking.md) against the real
MariaDB, on the snapshot's road and the binlog's, through a crash with a spill left on disk.

Every clear value of a masked or excluded column carries the marker `CLEARTXT`; once binlake has run, no file it
wrote (Delta data and log, checkpoints, offsets, snapshot documents, spill files, its own log output, Spark's logs,
Spark's scratch space) holds the marker or the hash key, neither as raw bytes nor inside a Parquet file's decoded
values. The expected rows are computed here with the standard library's HMAC, not with binlake's masks, and Delta
is read with delta-rs.
"""

from __future__ import annotations

import hashlib
import hmac
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from deltalake import DeltaTable

from cdc_lib.errors import ColumnRulesError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import run_cli, sql, write_config_file

MARK = "CLEARTXT"
KEY_ENV = "BINLAKE_TEST_MASK_KEY"
KEY = f"mask-key-{uuid.uuid4().hex}"
ROTATED_KEY = f"rotated-key-{uuid.uuid4().hex}"
BOUND = 300  # batch.max_buffered_changes: the big transaction below spills
RULES = {
    "columns": {"exclude": ["note"]},
    "mask": {
        "email": {"hash": {"key_env": KEY_ENV}},
        "badge": {"hash": {"key_env": KEY_ENV}},
        "ssn": {"partial": {"keep_first": 2, "keep_last": 3, "fill": "#"}},
        "phone": {"redact": None},
        "city": {"truncate": 3},
    },
}


def _create(mariadb: Any, table: str, rows: int) -> None:
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, email VARCHAR(80), badge INT, ssn VARCHAR(40), "
                 "phone VARCHAR(40), city VARCHAR(40), note TEXT, qty INT NOT NULL)",
        f"INSERT INTO {table} {_generated(1, rows)}", database=table.partition(".")[0])


def _generated(first: int, last: int, *, tag: str = "s") -> str:
    """Rows `first`..`last`, every clear value of a masked or excluded column marked."""
    return (f"SELECT seq, CONCAT('{MARK}.{tag}', seq, '@example.com'), seq * 7, CONCAT('{MARK}-ssn-', seq), "
            f"CONCAT('{MARK}-tel-', seq), CONCAT('{MARK}-city-', seq), CONCAT('{MARK}-note-', seq, REPEAT('x', 50)), "
            f"seq % 10 FROM seq_{first}_to_{last}")


def _hash(value: Any) -> str | None:
    if value is None:
        return None
    return hmac.new(KEY.encode(), str(value).encode(), hashlib.sha256).hexdigest()


def _partial(value: str | None) -> str | None:
    return None if value is None else value[:2] + "#" * (len(value) - 5) + value[-3:]


def expected(mariadb: Any, table: str) -> list[dict[str, Any]]:
    """The source as the rules say it lands: computed from the server's own SELECT."""
    rows = sql(mariadb, f"SELECT id, email, badge, ssn, phone, city, qty FROM {table} ORDER BY id")
    return [
        {"id": id_, "email": _hash(email), "badge": _hash(badge), "ssn": _partial(ssn), "phone": None,
         "city": None if city is None else city[:3], "qty": qty}
        for id_, email, badge, ssn, phone, city, qty in rows
    ]


def delta(config: Any, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    dt = DeltaTable(Pipeline(config).table_path(table))
    rows = sorted(dt.to_pyarrow_table().to_pylist(), key=lambda row: row["id"])
    return [field.name for field in dt.schema().fields], rows


def _config_file(config: Any, path: Path, table: str, *, spill: Path, rules: dict[str, Any] = RULES) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["batch"].update(max_buffered_changes=BOUND, spill_path=str(spill))
    document["sink"]["tables"] = {table: rules}
    path.write_text(yaml.safe_dump(document))
    return path


def _files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        if root.exists():
            yield from (path for path in root.rglob("*") if path.is_file())


def leaks(*roots: Path) -> list[str]:
    """Files under `roots` holding the marker or the key: raw bytes, and a Parquet file's decoded values (a
    compressed page would hide a value from a byte search)."""
    found = []
    for path in _files(*roots):
        data = path.read_bytes()
        needles = (MARK.encode(), KEY.encode())
        if any(needle in data for needle in needles):
            found.append(str(path))
            continue
        if data[:4] == b"PAR1":
            text = str(pq.read_table(path).to_pylist())
            if MARK in text or KEY in text:
                found.append(f"{path} (decoded)")
    return found


@pytest.fixture
def mask_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def test_masked_and_excluded_values_never_land_in_clear_across_a_spill_and_a_crash(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path, spark_log_dir: Path, mask_key: None
) -> None:
    table = f"{database}.people"
    _create(mariadb, table, 200)
    spill, outputs = tmp_path / "spill", tmp_path / "outputs"
    outputs.mkdir()
    # Spark's own scratch space (block manager, shuffle and PySpark's files), here instead of the system's temp
    # folder so the scan reaches whatever a run leaves there (a JVM whose Python parent is killed still exits
    # through its shutdown hooks, which remove it: usually nothing is left).
    scratch = tmp_path / "spark-scratch"
    scratch.mkdir()
    config = make_config([table], batch__max_buffered_changes=BOUND, batch__spill_path=str(spill),
                         sink__tables={table: RULES})
    config_path = _config_file(config, tmp_path / "binlake.yaml", table, spill=spill)

    def cli(name: str, *arguments: str, **env: str) -> Any:
        # binlake's DEBUG lines too
        done = run_cli(config_path, "--verbose", *arguments, env={"SPARK_LOCAL_DIRS": str(scratch), **env})
        (outputs / f"{name}.out").write_text(done.stdout)
        (outputs / f"{name}.err").write_text(done.stderr)
        return done

    control = tmp_path / "control"  # the scan finds a value in a compressed Parquet page
    control.mkdir()
    pq.write_table(pa.table({"v": [f"{MARK}-{n}" * 3 for n in range(500)]}), control / "c.parquet",
                   compression="zstd")
    assert leaks(control) == [f"{control / 'c.parquet'} (decoded)"] or leaks(control) == [str(control / "c.parquet")]
    (control / "c.parquet").unlink()

    snapshot = cli("snapshot", "snapshot")
    assert snapshot.returncode == 0, snapshot.stderr[-3000:]
    columns, rows = delta(config, table)
    assert columns == ["id", "email", "badge", "ssn", "phone", "city", "qty"], "note is never read nor written"
    assert rows == expected(mariadb, table)

    # One transaction past the bound: inserts, updates of masked columns, deletes, a key move. The sync is killed
    # with every part staged from its spill, before the MERGE: the spill files stay on disk for the scan.
    sql(mariadb, "START TRANSACTION", f"INSERT INTO {table} {_generated(1000, 1700, tag='b')}",
        f"UPDATE {table} SET email = CONCAT('{MARK}.u', id, '@example.org'), ssn = NULL, qty = qty + 1 "
        "WHERE id % 3 = 0",
        f"UPDATE {table} SET phone = NULL, city = CONCAT('{MARK}-moved-', id) WHERE id % 4 = 1",
        f"DELETE FROM {table} WHERE id % 5 = 2", f"UPDATE {table} SET id = id + 5000 WHERE id BETWEEN 10 AND 20",
        "COMMIT", database=database)
    crashed = cli("sync-crashed", "sync", BINLAKE_FAILPOINT="spilled_apply")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    spilled = [path for path in _files(spill) if path.suffix == ".parquet"]
    assert spilled, "the killed sync left its spill"
    assert leaks(spill) == [], "the spill holds only shaped rows"

    sql(mariadb, f"UPDATE {table} SET email = 'after the crash {MARK}', badge = NULL WHERE id = 1")
    resumed = cli("sync", "sync", "--until-caught-up")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert delta(config, table)[1] == expected(mariadb, table), "the replay after the crash is exact"
    state = Pipeline(config).read_state()
    assert state.tables[table].error is None and state.tables[table].applied_seq == state.batch_seq
    # Reconciliation compares the source as it lands: `note` is not missing, the masked columns are left out.
    (report,) = reconcile(Pipeline(config), [table])
    assert report.matches and not report.schema_differences, report
    assert report.columns == 2 and "masked columns not compared: badge, city, email, phone, ssn" in report.notes

    assert any(_files(spark_log_dir)), "Spark wrote logs to scan"
    assert (outputs / "snapshot.err").stat().st_size > 0, "binlake logged to scan"
    assert leaks(tmp_path, spark_log_dir) == []


def test_a_schema_change_to_a_column_left_out_does_not_stop_the_table(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path, mask_key: None
) -> None:
    table = f"{database}.people"
    _create(mariadb, table, 50)
    rules = {"columns": {"include": ["id", "email", "qty"]}, "mask": {"email": {"hash": {"key_env": KEY_ENV}}}}
    config = make_config([table], sink__tables={table: rules})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    assert delta(config, table)[0] == ["id", "email", "qty"]

    # Dropped, retyped and added columns the include list does not name, and a masked column widened: Delta's
    # columns stay as they are, and no table stops (today each drop stops it as an incompatible change).
    sql(mariadb, f"ALTER TABLE {table} DROP COLUMN note", f"ALTER TABLE {table} MODIFY city VARCHAR(60)",
        f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT '{MARK}'",
        f"ALTER TABLE {table} MODIFY email VARCHAR(200)", f"ALTER TABLE {table} DROP COLUMN phone",
        f"INSERT INTO {table} (id, email, badge, ssn, city, qty, extra) VALUES (900, 'new@x', 1, 's', 'c', 9, 'e')",
        f"UPDATE {table} SET email = CONCAT('changed', id), qty = qty + 5 WHERE id <= 10")
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    assert state.tables[table].error is None
    columns, rows = delta(config, table)
    assert columns == ["id", "email", "qty"]
    source = sql(mariadb, f"SELECT id, email, qty FROM {table} ORDER BY id")
    assert rows == [{"id": id_, "email": _hash(email), "qty": qty} for id_, email, qty in source]


def test_an_excluded_column_dropped_by_a_ddl_and_one_added_under_an_exclude_list(
    mariadb: Any, database: str, make_config: Any, mask_key: None
) -> None:
    table = f"{database}.people"
    _create(mariadb, table, 30)
    rules = {"columns": {"exclude": ["note", "phone", "ssn", "city", "badge"]},
             "mask": {"email": {"hash": {"key_env": KEY_ENV}}}}
    config = make_config([table], sink__tables={table: rules})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    # The excluded columns go (today: an incompatible change that stops the table), a column no rule names comes
    # and is landed and back-filled like any added column; the batch after it still finds its rules.
    sql(mariadb, f"ALTER TABLE {table} DROP COLUMN note, DROP COLUMN phone",
        f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'plain'",
        f"UPDATE {table} SET email = CONCAT('again', id), extra = CONCAT('e', id) WHERE id % 2 = 0")
    pipeline.sync(until_caught_up=True)
    sql(mariadb, f"INSERT INTO {table} (id, email, qty) VALUES (500, 'later@x', 5)")
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    columns, rows = delta(config, table)
    assert columns == ["id", "email", "qty", "extra"]
    source = sql(mariadb, f"SELECT id, email, qty, extra FROM {table} ORDER BY id")
    assert rows == [{"id": i, "email": _hash(e), "qty": q, "extra": x} for i, e, q, x in source]


def test_an_excluded_column_renamed_to_a_landed_name_stops_the_table_instead_of_landing_nulls(
    mariadb: Any, database: str, make_config: Any, mask_key: None
) -> None:
    """Found by the fuzzer (seed 291, round 0): under an exclude list, `RENAME COLUMN note TO memo` made `memo` an
    added column of NULLs in Delta while the source's rows kept their values. It stops the table with a remedy."""
    table = f"{database}.people"
    _create(mariadb, table, 20)
    rules = {"columns": {"exclude": ["note", "phone", "ssn", "city", "badge", "email"]}}
    config = make_config([table], sink__tables={table: rules})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"ALTER TABLE {table} RENAME COLUMN note TO memo",
        f"INSERT INTO {table} (id, memo, qty) VALUES (600, 'kept', 6)")
    pipeline.sync(until_caught_up=True)
    error = pipeline.read_state().tables[table].error
    assert error is not None and "became landed columns ['memo'] by a rename" in error, error
    assert f"binlake snapshot --table {table}" in error
    columns, rows = delta(config, table)
    assert columns == ["id", "qty"] and len(rows) == 20, "Delta stays as it was before the rename"
    # The remedy: the old name out of the rules (a snapshot checks them), then a re-snapshot lands the renamed
    # column with its values.
    assert "take the old names ['note'] out of" in error
    rules["columns"]["exclude"].remove("note")
    config = make_config([table], pipeline=config.pipeline, server_id=config.source.server_id,
                         sink__tables={table: rules})
    pipeline = Pipeline(config)
    pipeline.snapshot([table])
    columns, rows = delta(config, table)
    assert columns == ["id", "memo", "qty"]
    source = sql(mariadb, f"SELECT id, memo, qty FROM {table} ORDER BY id")
    assert rows == [{"id": i, "memo": m, "qty": q} for i, m, q in source]


@pytest.mark.parametrize(("rules", "named"), [
    ({"columns": {"exclude": ["nope"]}}, "'nope'"),
    ({"columns": {"include": ["email"]}}, "primary key column 'id' is left out"),
    ({"mask": {"id": {"hash": {"key_env": KEY_ENV}}}}, "primary key column 'id' is masked"),
    ({"mask": {"qty": {"truncate": 2}}}, "truncate takes text columns only"),
    ({"mask": {"email": {"hash": {"key_env": "BINLAKE_TEST_UNSET_KEY"}}}}, "BINLAKE_TEST_UNSET_KEY"),
])
def test_rules_that_do_not_fit_the_table_refuse_the_snapshot(
    rules: dict[str, Any], named: str, mariadb: Any, database: str, make_config: Any, mask_key: None
) -> None:
    table = f"{database}.people"
    _create(mariadb, table, 5)
    config = make_config([table], sink__tables={table: rules})
    with pytest.raises(ColumnRulesError, match=named.replace("'", ".")):
        Pipeline(config).validate()  # `binlake validate` finds it first
    with pytest.raises(ColumnRulesError, match="remedy") as refused:
        Pipeline(config).snapshot()
    assert named in str(refused.value)
    assert KEY not in str(refused.value)
    assert not Path(Pipeline(config).table_path(table)).exists(), "nothing was written"


def test_a_hash_key_missing_at_a_batch_stops_the_table_on_record_until_it_is_set_and_resumed(
    mariadb: Any, database: str, make_config: Any, monkeypatch: pytest.MonkeyPatch, mask_key: None
) -> None:
    """A sync run where the key variable is not set must not hash with another key, nor leave the table behind
    without a word: the table stops at its offset, status shows why, and a resume after setting it catches up."""
    table = f"{database}.people"
    _create(mariadb, table, 20)
    rules = {"columns": {"include": ["id", "email", "qty"]}, "mask": {"email": {"hash": {"key_env": KEY_ENV}}}}
    config = make_config([table], sink__tables={table: rules})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    landed = delta(config, table)[1]

    monkeypatch.delenv(KEY_ENV)
    sql(mariadb, f"UPDATE {table} SET email = CONCAT('later', id), qty = qty + 1 WHERE id <= 5")
    pipeline.sync(until_caught_up=True)
    (status,) = [entry for entry in pipeline.status() if entry.table == table]
    error = pipeline.read_state().tables[table].error
    assert error is not None and KEY_ENV in error and "binlake resume --table" in error, error
    assert KEY not in error
    assert status.error == error
    assert delta(config, table)[1] == landed  # nothing written with a missing (or another) key

    monkeypatch.setenv(KEY_ENV, KEY)
    pipeline.resume(table)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    source = sql(mariadb, f"SELECT id, email, qty FROM {table} ORDER BY id")
    assert delta(config, table)[1] == [{"id": id_, "email": _hash(email), "qty": qty} for id_, email, qty in source]


def test_rules_changed_since_the_snapshot_stop_the_table_until_it_is_re_snapshotted_or_they_are_put_back(
    mariadb: Any, database: str, make_config: Any, mask_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mask added after the snapshot would land new values hashed beside old ones in clear: the table stops
    (the other flows) until the rules are put back and it resumes, or it is re-snapshotted under the new ones."""
    table, other = f"{database}.people", f"{database}.others"
    _create(mariadb, table, 20)
    _create(mariadb, other, 5)
    before = make_config([table, other])
    Pipeline(before).snapshot()
    masked = {table: {"mask": {"email": {"hash": {"key_env": KEY_ENV}}}}}
    after = make_config([table, other], sink__tables=masked, pipeline=before.pipeline,
                        server_id=before.source.server_id)
    pipeline = Pipeline(after)
    sql(mariadb, f"UPDATE {table} SET email = CONCAT('later', id) WHERE id <= 5",
        f"UPDATE {other} SET qty = qty + 7")
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    error = state.tables[table].error
    assert error is not None and "its mask changed since the table's snapshot" in error, error
    assert f"binlake snapshot --table {table}" in error and KEY not in error
    assert state.tables[other].error is None
    assert [row["qty"] for row in delta(after, other)[1]] == [row[0] for row in sql(
        mariadb, f"SELECT qty FROM {other} ORDER BY id")]
    assert not any(str(row["email"]).startswith("later") for row in delta(after, table)[1])  # nothing applied

    # Put back and resumed: the table catches up under the rules it was snapshotted with.
    Pipeline(before).resume(table)
    Pipeline(before).sync(until_caught_up=True)
    assert Pipeline(before).read_state().tables[table].error is None
    assert [(row["id"], row["email"]) for row in delta(before, table)[1]] == [
        tuple(row) for row in sql(mariadb, f"SELECT id, email FROM {table} ORDER BY id")]

    # Re-snapshotted under the new rules: they are its rules from then on.
    pipeline.snapshot(tables=[table])
    sql(mariadb, f"UPDATE {table} SET email = CONCAT('again', id) WHERE id <= 3")
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    source = sql(mariadb, f"SELECT id, email FROM {table} ORDER BY id")
    assert [(row["id"], row["email"]) for row in delta(after, table)[1]] == [
        (id_, _hash(email)) for id_, email in source]

    # A new key under the same variable: new hashes beside the old would break every join on the column. The
    # table stops, naming the column and neither key; with the key restored it resumes exact.
    monkeypatch.setenv(KEY_ENV, ROTATED_KEY)
    sql(mariadb, f"UPDATE {table} SET email = CONCAT('rekeyed', id) WHERE id <= 2")
    pipeline.sync(until_caught_up=True)
    error = pipeline.read_state().tables[table].error
    assert error is not None and "the hash key of column(s) email is not the key" in error, error
    assert KEY not in error and ROTATED_KEY not in error
    assert not any(str(row["email"]) == _hash("rekeyed1") for row in delta(after, table)[1])  # nothing applied
    monkeypatch.setenv(KEY_ENV, KEY)
    pipeline.resume(table)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    source = sql(mariadb, f"SELECT id, email FROM {table} ORDER BY id")
    assert [(row["id"], row["email"]) for row in delta(after, table)[1]] == [
        (id_, _hash(email)) for id_, email in source]
