"""`binlake snapshot` shows its progress: not on a terminal, as plain log lines after each table's plan and wave."""

from __future__ import annotations

import re

from tests.conftest import delta_rows, run_cli, source_rows, sql, write_config_file

PROGRESS = re.compile(r"INFO binlake: snapshot progress: (?P<table>\S+): chunks (?P<done>\d+)/(?P<total>\d+) "
                      r"\(\d+%\), (?P<rows>[\d,]+) rows(?P<estimate> of ~[\d,]+)?, [\d,]+ rows/s, "
                      r"(?P<eta>ETA \S+|done in \S+)$")


def test_a_snapshot_not_on_a_terminal_prints_plain_progress_lines(mariadb, database, make_config, tmp_path) -> None:
    tables = [f"{database}.orders", f"{database}.users"]
    sql(mariadb, f"CREATE TABLE {tables[0]} (id INT PRIMARY KEY, total DECIMAL(9,2))",
        f"INSERT INTO {tables[0]} SELECT seq, seq * 1.25 FROM {database}.seq_1_to_1234",
        f"CREATE TABLE {tables[1]} (id INT PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO {tables[1]} VALUES (1, 'ada'), (2, 'grace'), (3, 'edsger')")
    config = make_config(tables)
    path = write_config_file(config, tmp_path / "binlake.yaml")
    run = run_cli(path, "snapshot")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "\r" not in run.stderr
    lines = [match.groupdict() for line in run.stderr.splitlines() if (match := PROGRESS.search(line))]
    assert lines == [
        # After the plan (rows estimated by the server's statistics) and after the one wave of each table.
        {"table": tables[0], "done": "0", "total": "1", "rows": "0", "estimate": lines[0]["estimate"], "eta": "ETA ?"},
        {"table": tables[0], "done": "1", "total": "1", "rows": "1,234", "estimate": lines[1]["estimate"],
         "eta": lines[1]["eta"]},
        {"table": tables[1], "done": "0", "total": "1", "rows": "0", "estimate": lines[2]["estimate"], "eta": "ETA ?"},
        {"table": tables[1], "done": "1", "total": "1", "rows": "3", "estimate": lines[3]["estimate"],
         "eta": lines[3]["eta"]},
    ], run.stderr
    assert lines[1]["eta"].startswith("done in ") and lines[3]["eta"].startswith("done in ")
    assert delta_rows(config, tables[1]) == source_rows(mariadb, tables[1])
    quiet = run_cli(path, "-q", "snapshot", "--table", tables[1])
    assert quiet.returncode == 0 and "progress" not in quiet.stderr, quiet.stderr[-2000:]
