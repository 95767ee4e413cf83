"""Tables t0..tN of the apply-path tests, the rounds of mixed changes they take, a config file with batch settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import sql, write_config_file


def make_tables(mariadb: Any, db: str, count: int, rows: int = 120) -> list[str]:
    tables = []
    for index in range(count):
        name = f"{db}.t{index}"
        sql(
            mariadb,
            f"CREATE TABLE {name} (id INT PRIMARY KEY, qty INT NOT NULL, price DECIMAL(9,3), label VARCHAR(20))",
            f"INSERT INTO {name} SELECT seq, seq * 3, seq / 8, 'start' FROM {db}.seq_1_to_{rows}",
        )
        tables.append(name)
    return tables


def mixed(mariadb: Any, table: str, round_number: int) -> None:
    db = table.split(".")[0]
    base = 10_000 * (round_number + 1)
    sql(
        mariadb,
        "START TRANSACTION",
        f"INSERT INTO {table} SELECT {base} + seq, seq, 7.375, 'r{round_number}' FROM {db}.seq_1_to_30",
        f"UPDATE {table} SET qty = qty + 1 WHERE id % 7 = {round_number % 7}",
        f"DELETE FROM {table} WHERE id % 13 = {round_number % 13} AND id < 1000",
        f"INSERT INTO {table} VALUES ({base + 500}, 1, 1.5, 'brief')",
        f"DELETE FROM {table} WHERE id = {base + 500}",
        "COMMIT",
    )


def config_file_with(config: Any, path: Path, **batch: Any) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["batch"].update({"writer": config.batch.writer, **batch})
    path.write_text(yaml.safe_dump(document))
    return path
