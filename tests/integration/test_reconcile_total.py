"""Reconciliation is total and exact over every value a column can hold (issue 25 case 4, issue 24's reconcile parts).

Rows of extreme values are generated (hypothesis) and written on the real MariaDB, copied by a snapshot and then by
a sync, and reconciled: each time a MATCH, checked against the Delta table read by delta-rs (not binlake's reader).
Then one value is changed in Delta behind binlake's back, by the smallest step its type allows: a DRIFT naming
that key. A key held by two Delta rows is named, with its count, in the text, the JSON and `binlake status`.
"""

from __future__ import annotations

import decimal
import itertools
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile_table
from tests.conftest import Shop, scan_rows, sql

COLUMNS = (
    "d DOUBLE, f FLOAT, dec65 DECIMAL(65,30), ubig BIGINT UNSIGNED, big BIGINT, small TINYINT, "
    "blob_value LONGBLOB, text_value LONGTEXT, label VARCHAR(40)"
)
NAMES = ("d", "f", "dec65", "ubig", "big", "small", "blob_value", "text_value", "label")
MAX_DOUBLE = 1.7976931348623157e308
MAX_FLOAT = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
DEC65_MAX = Decimal("99999999999999999999999999999999999.999999999999999999999999999999")
DEC65_TINY = Decimal("0.000000000000000000000000000001")
# Decimal arithmetic in the default context rounds to 28 digits (-DEC65_MAX would be -1E+35): 65 need more.
EXACT = decimal.Context(prec=100)


def float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


doubles = st.one_of(
    st.sampled_from([MAX_DOUBLE, -MAX_DOUBLE, 5e-324, -5e-324, 2.2250738585072014e-308, 0.0, -0.0, 1e300, 1.0]),
    st.floats(allow_nan=False, allow_infinity=False),
)
floats32 = st.one_of(
    st.sampled_from([MAX_FLOAT, -MAX_FLOAT, float32(1.401298464324817e-45), float32(1.1754943508222875e-38), -0.0]),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
)
decimals65 = st.one_of(
    st.sampled_from([DEC65_MAX, DEC65_MAX.copy_negate(), DEC65_TINY, DEC65_TINY.copy_negate(), Decimal(0)]),
    st.decimals(min_value=DEC65_MAX.copy_negate(), max_value=DEC65_MAX, places=30, allow_nan=False,
                allow_infinity=False)
    .filter(lambda value: value.copy_abs() <= DEC65_MAX),  # rounding to 30 places may step past the bounds
)
characters = st.characters(codec="utf-8")  # no lone surrogate: MySQL's utf8mb4 cannot hold one
texts = st.text(characters, max_size=60)


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


rows = st.tuples(
    nullable(doubles), nullable(floats32), nullable(decimals65),
    nullable(st.one_of(st.sampled_from([0, 2**64 - 1]), st.integers(0, 2**64 - 1))),
    nullable(st.one_of(st.sampled_from([-(2**63), 2**63 - 1]), st.integers(-(2**63), 2**63 - 1))),
    nullable(st.integers(-128, 127)), nullable(st.binary(max_size=40)), nullable(texts),
    nullable(st.text(characters, max_size=40)),
)

_tables = itertools.count()


@dataclass(frozen=True)
class Case:
    """One generated table: its rows before the snapshot, the changes the sync carries, and the value to tamper."""

    first: list[tuple[Any, ...]]
    later: list[tuple[Any, ...]]
    updates: list[tuple[int, tuple[Any, ...]]]
    tamper_column: str


@st.composite
def cases(draw: st.DrawFn) -> Case:
    first = draw(st.lists(rows, min_size=2, max_size=12))
    later = draw(st.lists(rows, max_size=8))
    updates = draw(st.lists(st.tuples(st.integers(1, len(first)), rows), max_size=4))
    return Case(first=first, later=later, updates=updates, tamper_column=draw(st.sampled_from(NAMES)))


def _exact(value: Any) -> Any:
    """A DECIMAL as plain text: str() of a tiny Decimal is "1E-29", which MySQL would read as a DOUBLE."""
    return format(value, "f") if isinstance(value, Decimal) else value


def _insert(server: LocalMariaDB, database: str, table: str, start: int, values: list[tuple[Any, ...]]) -> None:
    connection = server.admin_connection(database)
    try:
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {table} VALUES (%s, {', '.join(['%s'] * len(NAMES))})",
                [(start + index, *map(_exact, row)) for index, row in enumerate(values)],
            )
        connection.commit()
    finally:
        connection.close()


def _update(server: LocalMariaDB, database: str, table: str, updates: list[tuple[int, tuple[Any, ...]]]) -> None:
    connection = server.admin_connection(database)
    try:
        with connection.cursor() as cursor:
            for key, row in updates:
                assignments = ", ".join(f"{name} = %s" for name in NAMES)
                cursor.execute(f"UPDATE {table} SET {assignments} WHERE id = %s", (*map(_exact, row), key))
        connection.commit()
    finally:
        connection.close()


def _source(server: LocalMariaDB, database: str, table: str) -> dict[int, tuple[Any, ...]]:
    """The source rows with exact values: a FLOAT widened to DOUBLE (its text has 6 digits only)."""
    selected = ", ".join("CAST(f AS DOUBLE)" if name == "f" else name for name in NAMES)
    found = sql(server, f"SELECT id, {selected} FROM {table}", database=database)
    return {row[0]: tuple(row[1:]) for row in found}


def _same(source: Any, delta: Any) -> bool:
    if source is None or delta is None:
        return source is None and delta is None
    if isinstance(source, Decimal):
        return source == Decimal(str(delta))
    if isinstance(source, (bytes, bytearray)):
        return bytes(source) == bytes(delta)
    return bool(source == delta)


def _assert_delta_equals_source(server: LocalMariaDB, database: str, pipeline: Pipeline, table: str) -> None:
    """The independent check of a MATCH: delta-rs's reader against the server, value by value, exactly."""
    delta = {row[0]: row[1:] for row in scan_rows(pipeline.table_path(f"{database}.{table}"), ["id", *NAMES])}
    source = _source(server, database, table)
    assert delta.keys() == source.keys()
    for key, values in source.items():
        for name, mine, theirs in zip(NAMES, values, delta[key], strict=True):
            assert _same(mine, theirs), (key, name, mine, theirs)


def _nudged(name: str, value: Any) -> Any:
    """The smallest change of `value` its column's type can hold (NULL becomes a value)."""
    if name == "d":
        return 0.0 if value is None else math.nextafter(value, 0.0 if abs(value) == MAX_DOUBLE else math.inf)
    if name == "f":
        if value is None:
            return 0.0
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return float(struct.unpack("<f", struct.pack("<I", bits ^ 1))[0])  # the last mantissa bit flipped
    if name == "dec65":
        step = DEC65_TINY if Decimal(value or 0) < 0 else DEC65_TINY.copy_negate()
        return "1" if value is None else format(EXACT.add(Decimal(value), step), "f")
    if name in ("ubig", "big", "small"):
        return 1 if value is None else int(value) + (1 if int(value) <= 0 else -1)
    if name == "blob_value":
        return bytearray(b"x") if value is None else bytearray(bytes(value) + b"\0")
    return "x" if value is None else value + " "


def _tamper(pipeline: Pipeline, table: str, key: int, name: str) -> None:
    """Change one value of one row in Delta with Spark, as another writer would, by the smallest step."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = pipeline.table_path(table)
    spark = pipeline.spark()
    value = spark.read.format("delta").load(path).where(f"id = {key}").select(name).collect()[0][0]
    new = _nudged(name, value)
    kind = dict(spark.read.format("delta").load(path).dtypes)[name]
    DeltaTable.forPath(spark, path).update(f"id = {key}", {name: F.lit(new).cast(kind)})


@pytest.mark.slow
# No shrinking: each example costs a snapshot, a sync and three reconciles; a failure prints its whole case.
@settings(max_examples=5, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_extreme_values_match_after_snapshot_and_sync_and_a_tampered_value_is_drift(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig], case: Case
) -> None:
    table = f"extreme_{next(_tables)}"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, {COLUMNS})", database=database)
    _insert(mariadb, database, table, 1, case.first)
    # Values made on the server: a BLOB longer than half of max_allowed_packet (16 MiB), whose HEX() is NULL there,
    # and a 6 MB TEXT of 2- and 4-byte characters.
    sql(mariadb, f"INSERT INTO {table} (id, blob_value, text_value, label) VALUES "
        "(1000, REPEAT(x'ab00', 4250000), REPEAT('é😀', 1000000), 'long')", database=database)
    name = f"{database}.{table}"
    pipeline = Pipeline(make_config([name]))
    pipeline.snapshot()
    report = reconcile_table(pipeline, name, chunk_rows=4)
    assert report.matches and report.source_rows == len(case.first) + 1, report
    _assert_delta_equals_source(mariadb, database, pipeline, table)

    _insert(mariadb, database, table, 100, case.later)
    _update(mariadb, database, table, case.updates)
    sql(mariadb, f"DELETE FROM {table} WHERE id = 1", database=database)
    pipeline.sync(until_caught_up=True)
    report = reconcile_table(pipeline, name, chunk_rows=4)
    assert report.matches, report
    _assert_delta_equals_source(mariadb, database, pipeline, table)

    key = 100 if case.later else 2
    _tamper(pipeline, name, key, case.tamper_column)
    report = reconcile_table(pipeline, name, chunk_rows=4)
    assert not report.matches and report.confirmed, report
    assert report.drift is not None and report.drift.differing_keys == ((str(key),),), report.drift
    assert report.drift.rows == 1


def test_a_change_of_one_beside_1e300_is_drift(shop: Shop) -> None:
    """The float sums of old compared within 1e-12 of the chunk's magnitude: +1.0 beside 1e300 passed unseen."""
    shop.sql(
        "CREATE TABLE big_floats (id INT PRIMARY KEY, v DOUBLE)",
        "INSERT INTO big_floats VALUES (1, 1e300), (2, 5.0), (3, 1.7976931348623157e308), "
        "(4, -1.7976931348623157e308)",
    )
    name = f"{shop.database}.big_floats"
    pipeline = Pipeline(replace(shop.config, source=replace(shop.config.source, tables=(name,))))
    pipeline.snapshot()
    assert reconcile_table(pipeline, name).matches  # no DOUBLE out of range: the sums are gone

    from delta.tables import DeltaTable

    DeltaTable.forPath(pipeline.spark(), pipeline.table_path(name)).update("id = 2", {"v": "v + 1.0"})
    report = reconcile_table(pipeline, name)
    assert not report.matches and report.confirmed
    assert report.drift is not None and report.drift.differing_keys == (("2",),)


def test_a_duplicated_key_is_named_with_its_count_and_status_shows_the_verdict(
    shop: Shop, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Delta rows with one key (what a blind append beside a re-snapshot produces) are drift, named."""
    from cdc_lib import cli

    monkeypatch.setattr(cli, "configure_logging", lambda *_, **__: None)  # keep pytest's log capture
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    orders = f"{shop.database}.orders"
    arguments = ["--config", str(shop.config_path), "reconcile", "--table", orders, "--chunk-rows", "7"]
    assert cli.main(arguments) == 0
    capsys.readouterr()
    assert cli.main(["--config", str(shop.config_path), "status"]) == 0
    status_lines = capsys.readouterr().out.splitlines()
    assert "past snapshot" in status_lines[0] and "last reconcile" in status_lines[0]
    assert [line for line in status_lines if line.startswith(orders)][0].split()[1:3] == ["yes", "match"]

    frame = pipeline.spark().read.format("delta").load(pipeline.table_path(orders))
    copies = frame.where("id IN (5, 12)").unionAll(frame.where("id = 12"))
    copies.write.format("delta").mode("append").save(pipeline.table_path(orders))  # one commit: 5 twice, 12 thrice
    # A change not yet applied: a mismatch alone would be "not confirmed"; a duplicated key is drift regardless.
    shop.sql("UPDATE orders SET note = 'in flight' WHERE id = 40")

    assert cli.main(arguments) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"DRIFT {orders}: source 60 rows, Delta 63 rows, missing 0, extra 0, differing 1, duplicated 2"
    assert "  duplicated in Delta (one key, several rows): 5 (2 rows), 12 (3 rows)" in lines
    assert not any("not confirmed" in line for line in lines)

    assert cli.main([*arguments, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)[0]
    assert report["verdict"] == "drift" and report["confirmed"]
    assert report["drift"]["duplicated"] == 2
    assert report["drift"]["duplicated_keys"] == [{"key": ["5"], "rows": 2}, {"key": ["12"], "rows": 3}]

    assert cli.main(["--config", str(shop.config_path), "status", "--json"]) == 0
    verdict = next(status for status in json.loads(capsys.readouterr().out) if status["table"] == orders)
    assert verdict["last_reconcile"]["verdict"] == "drift"
    assert verdict["last_reconcile"]["duplicated_keys"] == 2 and verdict["last_reconcile"]["drifting_rows"] == 3
    assert cli.main(["--config", str(shop.config_path), "status"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith(orders)][0]
    assert "DRIFT (3 rows, 2 duplicated keys)" in row
