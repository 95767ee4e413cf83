"""The keep-up benchmark's load writer: a separate process (so it does not share the follower's GIL) that
writes one workload to MariaDB at a fixed rate, or as fast as it can, in transactions of `--txn-rows` rows.

    python -m bench.keepup.keepup_load --socket S --table keepup.mixed --workload mixed --rate 2000 --seconds 60 \
        --first-id 100001 --base-rows 100000 --out commits.jsonl

Workloads (rows generated server-side from MariaDB's sequence engine, so the client costs little):
  mixed   per transaction: ½ inserts of new keys, ⅓ updates of existing rows, ⅙ deletes of this writer's
          oldest inserted rows — the mix of the main bench's change set
  insert  append-only: every row a new key

With `--out`, each commit is a JSON line `[wall time after COMMIT, rows, binlog file, binlog offset]` (the
offset read right after the commit, with nothing else writing, is that transaction's end). The last line
of stdout is a summary `{"rows": …, "seconds": …, "transactions": …, "next_id": …}`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pymysql


class Workload:
    """Statements of one transaction of the workload; keeps the key counters between transactions."""

    def __init__(self, table: str, kind: str, *, txn_rows: int, first_id: int, base_rows: int) -> None:
        self.table, self.kind, self.txn_rows = table, kind, txn_rows
        self.next_id, self.base_rows = first_id, base_rows
        self.oldest_own = first_id  # this writer's oldest inserted key still present
        self.update_cursor = 0

    def statements(self) -> list[str]:
        if self.kind == "insert":
            return [self._insert(self.txn_rows)]
        inserts = max(1, self.txn_rows // 2)
        updates = max(1, self.txn_rows // 3)
        deletes = max(0, self.txn_rows - inserts - updates)
        low = 1 + self.update_cursor % max(1, self.base_rows - updates)
        self.update_cursor += updates * 7  # stride over the table, so consecutive transactions touch other rows
        statements = [
            self._insert(inserts),
            f"UPDATE {self.table} SET amount = amount + 1, status = 'paid', updated = NOW(6) "
            f"WHERE id BETWEEN {low} AND {low + updates - 1}",
        ]
        if deletes and self.oldest_own + deletes <= self.next_id - inserts:
            statements.append(f"DELETE FROM {self.table} WHERE id BETWEEN {self.oldest_own} AND "
                              f"{self.oldest_own + deletes - 1}")
            self.oldest_own += deletes
        return statements

    def _insert(self, rows: int) -> str:
        low = self.next_id
        self.next_id += rows
        return (f"INSERT INTO {self.table} SELECT seq, seq % 5000, 12.25, 'new', 'fresh', NOW(6), NOW(6) "
                f"FROM seq_{low}_to_{low + rows - 1}")


def write(connection: pymysql.connections.Connection, workload: Workload, *, rate: float, seconds: float,
          out: Path | None) -> dict[str, Any]:
    """Write for `seconds` at `rate` rows/s (0: as fast as possible); return the summary."""
    rows = transactions = 0
    started = time.time()
    deadline = started + seconds
    sink = out.open("w") if out is not None else None
    try:
        with connection.cursor() as cursor:
            while True:
                now = time.time()
                if now >= deadline:
                    break
                if rate > 0:
                    due = started + rows / rate  # the schedule, not the last commit: a late writer catches up
                    if due > now:
                        time.sleep(min(due - now, deadline - now))
                        continue
                cursor.execute("BEGIN")
                changed = 0
                for statement in workload.statements():
                    changed += cursor.execute(statement)
                cursor.execute("COMMIT")
                committed = time.time()
                rows += changed
                transactions += 1
                if sink is not None:
                    cursor.execute("SHOW MASTER STATUS")
                    status = cursor.fetchone()
                    sink.write(json.dumps([committed, changed, status[0], int(status[1])]) + "\n")
    finally:
        if sink is not None:
            sink.close()
    return {"rows": rows, "seconds": time.time() - started, "transactions": transactions,
            "next_id": workload.next_id, "oldest_own": workload.oldest_own}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--table", required=True, help="database.table")
    parser.add_argument("--workload", choices=("mixed", "insert"), required=True)
    parser.add_argument("--rate", type=float, default=0.0, help="rows/s; 0 = as fast as possible")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--first-id", type=int, required=True)
    parser.add_argument("--oldest-own", type=int, help="mixed: this writer's oldest key still present")
    parser.add_argument("--base-rows", type=int, default=0, help="mixed: keys 1..base-rows exist to update")
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    database, table = arguments.table.split(".")
    connection = pymysql.connect(unix_socket=arguments.socket, user="root", database=database, autocommit=True)
    workload = Workload(table, arguments.workload, txn_rows=arguments.txn_rows, first_id=arguments.first_id,
                        base_rows=arguments.base_rows)
    if arguments.oldest_own is not None:
        workload.oldest_own = arguments.oldest_own
    try:
        summary = write(connection, workload, rate=arguments.rate, seconds=arguments.seconds, out=arguments.out)
    finally:
        connection.close()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
