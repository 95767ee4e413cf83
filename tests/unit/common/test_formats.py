"""Format numbers of stored documents (cdc_lib/common/formats.py): what the previous binlake wrote reads as it did,
and a
document from a newer binlake is refused with the remedy before anything acts on it.

The documents are the fixtures main at ee8b113 wrote (tests/fixtures/state-v1; the integration test
tests/integration/test_upgrade.py continues a pipeline from them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cdc_lib.common.formats import COMMIT_FORMAT, SNAPSHOT_DOCUMENT_FORMAT, STATE_FORMAT, NewerFormatError, check_format
from cdc_lib.sink import delta_log
from cdc_lib.state.offset_store import LocalOffsetStore
from cdc_lib.state.snapshot_documents import read_document

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "state-v1"
PIPELINE = "upgrade"
ITEMS, PARTS = "upgrade_v1.items", "upgrade_v1.parts"
APPLICATION = f"binlake:{PIPELINE}:{ITEMS}"


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "lake", tmp_path / "lake"))


def test_the_formats_this_binlake_writes() -> None:
    assert (STATE_FORMAT, SNAPSHOT_DOCUMENT_FORMAT, COMMIT_FORMAT) == (1, 1, 1)


@pytest.mark.parametrize(("document", "read"), [({}, 1), ({"format": 1}, 1)])
def test_a_document_without_a_format_is_format_1(document: dict[str, int], read: int) -> None:
    assert check_format(document, "commit metadata", where="x") == read


@pytest.mark.parametrize("written", [2, "1", None, True])
def test_a_format_this_binlake_does_not_know_is_refused(written: object) -> None:
    with pytest.raises(NewerFormatError, match=f"commit metadata format {written};"):
        check_format({"format": written}, "commit metadata", where="x")


def test_the_previous_formats_documents_read_as_written(lake: Path) -> None:
    store = LocalOffsetStore(lake / "_offsets")
    state, _ = store.read(PIPELINE)
    assert state is not None and state.batch_seq == 2 and set(state.tables) == {ITEMS}
    items = state.tables[ITEMS]
    assert (items.applied_seq, items.delta_version, items.consistent, items.position.gtid) == (1, 4, True, "0-11-12")
    # The lease of the runner killed after its Delta commit: its identity as written.
    assert state.lease is not None and state.lease.pid == 9705 and state.lease.started_ticks == 54111

    document, token = read_document(store, PIPELINE, PARTS)
    assert document is not None and token is not None
    assert (document.status, document.chunks_done, len(document.plan), document.low.gtid) == ("running", 1, 3,
                                                                                               "0-11-16")
    assert document.lease is not None and document.lease.pid == 9746


def test_the_previous_formats_commits_read_as_written(lake: Path) -> None:
    # Its userMetadata has no `format`: format 1.
    tail = delta_log.read_log_tail(str(lake / "upgrade_v1" / "items"), application=APPLICATION)
    assert tail is not None and tail.last_binlake_commit is not None
    commit = tail.last_binlake_commit
    assert "format" not in commit.metadata
    assert (commit.delta_version, commit.txn_version, commit.kind, commit.metadata["end"]["gtid"]) == (
        5, 2, "merge", "0-11-16")


REMEDY = "remedy: upgrade binlake to the version that wrote it (or newer) on every runner of this pipeline"


def test_a_newer_state_document_is_refused_and_left_alone(lake: Path) -> None:
    path = lake / "_offsets" / PIPELINE / "state.json"
    written = json.dumps({**json.loads(path.read_text()), "format": STATE_FORMAT + 1})
    path.write_text(written)
    with pytest.raises(NewerFormatError) as raised:
        LocalOffsetStore(lake / "_offsets").read(PIPELINE)
    assert str(raised.value).startswith(
        f"the state document of pipeline 'upgrade' was written by a newer binlake (state document format "
        f"{STATE_FORMAT + 1}; this binlake reads formats 1 to {STATE_FORMAT}); nothing was changed — {REMEDY}")
    assert not raised.value.retryable and path.read_text() == written


def test_a_newer_snapshot_document_is_refused(lake: Path) -> None:
    path = lake / "_offsets" / PIPELINE / "snapshots" / f"{PARTS}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": SNAPSHOT_DOCUMENT_FORMAT + 1}))
    with pytest.raises(NewerFormatError, match=f"the snapshot document of table {PARTS} was written by a newer "
                                               r"binlake \(snapshot document format 2;") as raised:
        read_document(LocalOffsetStore(lake / "_offsets"), PIPELINE, PARTS)
    assert REMEDY in str(raised.value)


def test_a_newer_commit_is_refused_before_its_position_is_used(lake: Path) -> None:
    last = lake / "upgrade_v1" / "items" / "_delta_log" / f"{5:020d}.json"
    lines = []
    for line in last.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            metadata = json.loads(action["commitInfo"]["userMetadata"])
            action["commitInfo"]["userMetadata"] = json.dumps({**metadata, "format": COMMIT_FORMAT + 1})
        lines.append(json.dumps(action))
    last.write_text("\n".join(lines) + "\n")
    with pytest.raises(NewerFormatError, match=f"the commit metadata of Delta commit 5 \\({APPLICATION}\\) was "
                                               r"written by a newer binlake \(commit metadata format 2;") as raised:
        delta_log.read_log_tail(str(lake / "upgrade_v1" / "items"), application=APPLICATION)
    assert REMEDY in str(raised.value)
    # Another application's commits in the same table are not binlake's to judge.
    other = delta_log.read_log_tail(str(lake / "upgrade_v1" / "items"), application="binlake:other:t")
    assert other is not None and other.last_binlake_commit is None
