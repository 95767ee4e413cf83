"""delta-rs `DeltaTable`s kept between the batches of one process (`LOADED_TABLES`), for the delta-rs writer.

A small write's second cost after its MERGE is loading the table's state; a kept table is moved forward with
`update_incremental` instead, and used only when binlake's own read of the log agrees with it
(docs/performance.md "A writer without Spark", "Kept tables").
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable


@dataclass(frozen=True)
class KnownLog:
    """What binlake's own read of the table's log (`delta_log.read_log_tail`) found just before the write."""

    latest_version: int
    checkpoint_version: int | None


class LoadedTables:
    """`DeltaTable`s kept between batches of this process and moved forward with `update_incremental`.

    A load lists the log and reads the newest checkpoint and every commit since (3-5 ms a table, the second cost
    of a small write after the MERGE itself); `update_incremental` reads only the commits after the kept version
    (~1 ms). The Delta log is append-only, so a kept table brought forward to the newest commit has the state a
    fresh load has. A kept table is used only when binlake's own read of the log, just before, agrees:

    - the kept version is at or past the newest checkpoint that read found: the commits after it are then newer
      than every checkpoint, so no log cleanup (which removes only commits older than the newest checkpoint, and
      older than the log retention) can have removed one it has not read yet;
    - after `update_incremental` its version is the newest the read found: a commit that landed in between (a
      writer outside binlake's lease) or a log that does not continue the kept one makes a fresh load.

    Anything else, or any failure, loads afresh as before. Entries unused for `MAX_IDLE_SECONDS` are dropped and
    at most `MAX_TABLES` are kept (the least recently used go), bounding memory: a table's state holds its file
    list.

    A kept table is also loaded afresh once the log holds a checkpoint `RELOAD_AFTER_COMMITS` or more commits past
    the version it was loaded at: delta-rs keeps every commit read since the load in the table's state, and each
    write costs more with each of them (an append ~50 µs more per commit: 9 ms after 250 commits, 50 ms after
    1,000, 87 ms after 2,000 — a follower's insert-only batch cost that grew over a long run, docs/performance.md
    "Keeping up with a busy primary"). A load starts from the newest checkpoint, so the state starts short again.
    """

    MAX_TABLES = 512
    MAX_IDLE_SECONDS = 600.0
    RELOAD_AFTER_COMMITS = 100

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: OrderedDict[tuple[str, str], tuple[DeltaTable, float]] = OrderedDict()
        #: The version each kept table was loaded at (its state holds every commit read since).
        self._loaded_at: dict[tuple[str, str], int] = {}

    def take(self, uri: str, options: dict[str, str] | None, known: KnownLog | None) -> DeltaTable:
        """The table at the version `known` names, kept or loaded; the caller owns it until `keep`."""
        from deltalake import DeltaTable

        key = (uri, json.dumps(options, sort_keys=True))
        kept: DeltaTable | None
        with self._lock:
            kept, used = self._tables.pop(key, (None, 0.0))
            loaded_at = self._loaded_at.pop(key, None)
        if (kept is not None and known is not None and time.monotonic() - used < self.MAX_IDLE_SECONDS
                and loaded_at is not None and not self._long(loaded_at, known)):
            version = kept.version()
            if version <= known.latest_version and (known.checkpoint_version is None
                                                    or version >= known.checkpoint_version):
                try:
                    # Already at the newest version binlake's read just found (the last write moved it there):
                    # nothing to read. A commit landing after that read is met as it is after an update: by the
                    # commit's own conflict check. ~1 ms a table (bench/NOTES.md "Many tables in one batch").
                    if version < known.latest_version:
                        kept.update_incremental()
                except Exception:  # noqa: BLE001 - whatever it was, a fresh load below reads the log anew
                    kept = None
                if kept is not None and kept.version() == known.latest_version:
                    with self._lock:
                        self._loaded_at[key] = loaded_at
                    return kept
        table = DeltaTable(uri, storage_options=options)
        with self._lock:
            self._loaded_at[key] = table.version()
        return table

    def _long(self, loaded_at: int, known: KnownLog) -> bool:
        """Whether a checkpoint far enough past the kept table's load makes a fresh load the shorter state."""
        checkpoint = known.checkpoint_version
        return checkpoint is not None and checkpoint - loaded_at >= self.RELOAD_AFTER_COMMITS

    def keep(self, uri: str, options: dict[str, str] | None, table: DeltaTable) -> None:
        key = (uri, json.dumps(options, sort_keys=True))
        with self._lock:
            self._tables[key] = (table, time.monotonic())
            self._tables.move_to_end(key)
            while len(self._tables) > self.MAX_TABLES:
                dropped, _ = self._tables.popitem(last=False)
                self._loaded_at.pop(dropped, None)

    def held(self, uri: str, options: dict[str, str] | None = None) -> DeltaTable | None:
        """The `DeltaTable` kept for `uri` (None: none is): for tests and benches that check it is reused."""
        with self._lock:
            entry = self._tables.get((uri, json.dumps(options, sort_keys=True)))
        return entry[0] if entry is not None else None

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()
            self._loaded_at.clear()


#: This process's kept tables (delta-rs tables are thread-safe to hand from one thread to another; each is used
#: by one write at a time: `take` removes it until `keep` puts it back).
LOADED_TABLES = LoadedTables()


__all__ = ["LOADED_TABLES", "KnownLog", "LoadedTables"]
