"""An upgrade in the middle of things: state written by the previous binlake (tests/fixtures/state-v1, format 1,
made by main at ee8b113) is taken over by this one, which continues exactly.

The fixtures hold a pipeline whose last sync was killed between its Delta commit and its offset write (the Delta
log is one batch ahead of the offsets, and the dead runner's lease is on record) and a snapshot killed after its
first wave (a snapshot document in flight, with its table lease). The test replays the fixture's source workload
on its own server, maps the fixture's binlog positions to its own (a position means something only on the server
that wrote it), makes more changes, and runs the current binlake: every table ends equal to its source, read back
with `deltalake`, and the batch the old binlake committed is not applied again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.common.formats import COMMIT_FORMAT
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.source.binlog_status import current_position
from tests.conftest import ConfigFactory, source_rows, sql, write_config_file
from tests.integration.conftest import assert_each_change_applied_once, binlake_commits, cli_in_process

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "state-v1"
WORKLOAD = json.loads((FIXTURES / "workload.json").read_text())
DATABASE = WORKLOAD["database"]
PIPELINE = "upgrade"
ITEMS, PARTS = f"{DATABASE}.items", f"{DATABASE}.parts"


def run_step(server: LocalMariaDB, number: int) -> dict[str, Any]:
    """Run one step of the fixture's workload; the binlog position at its end, as binlake stores positions."""
    for statement in WORKLOAD["steps"][number]["statements"]:
        sql(server, statement)
    connection = server.admin_connection(None)
    try:
        return current_position(connection).to_json()
    finally:
        connection.close()


def rebind(value: Any, positions: dict[str, dict[str, Any]]) -> Any:
    """`value` with every stored position replaced by this server's position of the same step end."""
    if isinstance(value, dict):
        found = positions.get(json.dumps(value, sort_keys=True))
        if found is not None:
            return found
        assert not {"file", "pos"} <= set(value), f"the fixture holds a position that is no step end: {value}"
        return {key: rebind(item, positions) for key, item in value.items()}
    if isinstance(value, list):
        return [rebind(item, positions) for item in value]
    return value


def install_fixture(lake: Path, positions: dict[str, dict[str, Any]]) -> None:
    """The fixture's lake at `lake`, its positions those of this server (nothing else is changed)."""
    shutil.copytree(FIXTURES / "lake", lake)
    for document in (lake / "_offsets").rglob("*.json"):
        document.write_text(json.dumps(rebind(json.loads(document.read_text()), positions), indent=1))
    for commit in lake.glob("*/*/_delta_log/*.json"):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            info = action.get("commitInfo", {})
            if "userMetadata" in info:
                info["userMetadata"] = json.dumps(rebind(json.loads(info["userMetadata"]), positions), sort_keys=True)
                line = json.dumps(action)
            lines.append(line)
        commit.write_text("\n".join(lines) + "\n")


def lake_rows(path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in DeltaTable(path).to_pyarrow_table().to_pylist())


@pytest.fixture
def upgrade_source(mariadb: LocalMariaDB) -> Any:
    # The fixtures name their tables; one test uses this database, and leaves nothing behind.
    sql(mariadb, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}")
    yield DATABASE
    sql(mariadb, f"DROP DATABASE IF EXISTS {DATABASE}")


def test_state_of_the_previous_format_is_continued_exactly(
    mariadb: LocalMariaDB, upgrade_source: str, make_config: ConfigFactory, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    recorded = json.loads((FIXTURES / "positions.json").read_text())["step_ends"]
    ours = [run_step(mariadb, number) for number in range(len(recorded))]
    install_fixture(tmp_path / "lake", {json.dumps(old, sort_keys=True): new for old, new in zip(recorded, ours,
                                                                                                strict=True)})
    config = make_config([ITEMS, PARTS], pipeline=PIPELINE, snapshot__rows_per_chunk=10, snapshot__chunks_per_wave=1)
    pipeline = Pipeline(config)
    items_path, parts_path = pipeline.table_path(ITEMS), pipeline.table_path(PARTS)
    before = binlake_commits(config, ITEMS)
    # As the old binlake left it: the offsets at step 2, the Delta log at step 3 (its batch 2 committed).
    state = pipeline.read_state()
    assert state.tables[ITEMS].position.to_json() == ours[1] and state.lease is not None
    assert [commit.txn_version for commit in before if commit.kind == "merge"] == [1, 2]
    assert before[-1].end.to_json() == ours[2]

    run_step(mariadb, 3)
    pipeline.sync(until_caught_up=True)
    # The snapshot in flight resumes after its first wave (not from scratch), under the current binlake.
    [resumed] = pipeline.snapshot([PARTS])
    assert (resumed.chunks, resumed.chunks_resumed, resumed.chunks_read) == (3, 1, 3), resumed
    pipeline.sync(until_caught_up=True)

    assert lake_rows(items_path) == source_rows(mariadb, ITEMS)
    assert lake_rows(parts_path) == source_rows(mariadb, PARTS)
    after = binlake_commits(config, ITEMS)
    new = after[len(before):]
    # One batch since the upgrade, from where the old binlake's last commit ended: step 3 was not applied again.
    assert [(commit.kind, commit.start.to_json() if commit.start else None) for commit in new] == [("merge", ours[2])]
    assert_each_change_applied_once(config, ITEMS)
    tail = delta_log.read_log_tail(items_path, application=pipeline.application(ITEMS))
    assert tail is not None and tail.last_binlake_commit is not None
    assert tail.last_binlake_commit.metadata["format"] == COMMIT_FORMAT
    state = pipeline.read_state()
    assert state.tables[ITEMS].consistent and state.tables[PARTS].consistent
    assert state.tables[ITEMS].position.to_json() == state.tables[PARTS].position.to_json()

    # Idle after that: nothing is committed again.
    version = DeltaTable(items_path).version()
    pipeline.sync()
    assert DeltaTable(items_path).version() == version
    assert lake_rows(items_path) == source_rows(mariadb, ITEMS)

    # A state document from a newer binlake: refused by the CLI with the remedy, and left as it was.
    document = Path(config.offsets.uri) / PIPELINE / "state.json"
    newer = json.dumps({**json.loads(document.read_text()), "format": 2})
    document.write_text(newer)
    code, out, err = cli_in_process(write_config_file(config, tmp_path / "binlake.yaml"), "sync",
                                    monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    assert "written by a newer binlake (state document format 2; this binlake reads formats 1 to 1)" in err
    assert "remedy: upgrade binlake" in err
    assert document.read_text() == newer
