"""binlake's own leftovers: scratch logs under a table's `binlake-files/`, abandoned snapshot documents.

- A batch's scratch table (`sink/delta_rs/key_rewrite.py`) lives for the seconds between its write and its
  commit: its log is removed right after, so one older than `SCRATCH_AGE_HOURS` belongs to a batch that died
  (the next batch would remove it too). A maintenance run writes under `binlake-files/maintain-<run id>/`, never
  the batches' scratch table, and its log is left only by a run that died: also removed past that age. The data
  files in either are VACUUM's (`operations.UNTRACKED_FLOOR_HOURS`), never removed here: a commit may name them.
- A snapshot document marked `abandoned` (`state/snapshot_documents.py`: its runner died before its first commit,
  and the sync let the table go on) stays in `snapshots/` for nobody; it is removed after a second read finds it
  unchanged (a new snapshot of the table writes its own document over it).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from cdc_lib.sink.delta_rs.key_rewrite import SCRATCH_FOLDER
from cdc_lib.state.offset_store import OffsetStore
from cdc_lib.state.snapshot_documents import SNAPSHOTS_FOLDER, delete_document, read_document, table_of

#: A scratch log this old is no running batch's or maintenance run's.
SCRATCH_AGE_HOURS = 1.0


def stale_scratch_logs(handler: Any, *, now: dt.datetime) -> list[str]:
    """The scratch logs (folders relative to the table) no running batch or maintenance run uses."""
    from pyarrow.fs import FileSelector, FileType

    folders = [SCRATCH_FOLDER]
    top = handler.get_file_info_selector(FileSelector(SCRATCH_FOLDER, recursive=False, allow_not_found=True))
    folders += [info.path for info in top
                if info.type == FileType.Directory and info.path.rsplit("/", 1)[-1].startswith("maintain-")]
    stale = []
    for folder in folders:
        log = f"{folder}/_delta_log"
        files = handler.get_file_info_selector(FileSelector(log, recursive=True, allow_not_found=True))
        stamps = [info.mtime for info in files if info.type == FileType.File and info.mtime is not None]
        if stamps and now - max(stamps) > dt.timedelta(hours=SCRATCH_AGE_HOURS):
            stale.append(log)
    return stale


def remove_scratch_logs(handler: Any, folders: list[str]) -> None:
    for folder in folders:
        handler.delete_dir(folder)


def abandoned_snapshot_documents(store: OffsetStore, pipeline: str) -> dict[str, str]:
    """Each table whose snapshot document is abandoned, with its snapshot id."""
    found = {}
    for name in store.list_documents(pipeline, SNAPSHOTS_FOLDER):
        document, _ = read_document(store, pipeline, table_of(name))
        if document is not None and document.status == "abandoned":
            found[document.table] = document.snapshot_id
    return found


def remove_abandoned(store: OffsetStore, pipeline: str, abandoned: dict[str, str]) -> list[str]:
    """Remove the documents still abandoned with the same snapshot id; the tables whose document went."""
    removed = []
    for table, snapshot_id in abandoned.items():
        document, _ = read_document(store, pipeline, table)
        if document is not None and document.status == "abandoned" and document.snapshot_id == snapshot_id:
            delete_document(store, pipeline, table)
            removed.append(table)
    return removed


__all__ = [
    "SCRATCH_AGE_HOURS", "abandoned_snapshot_documents", "remove_abandoned", "remove_scratch_logs",
    "stale_scratch_logs",
]
