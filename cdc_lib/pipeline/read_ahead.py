"""The read-ahead of a catch-up: the next micro-batch is read on a worker thread while the current one is written.

Kept apart from the batch (`cdc_lib.pipeline.sync`) because it owns a thread and a clock of its own (the cycle
floor) and knows nothing of Delta or offsets: it reads the binlog, the batch decides whether the read is used.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from cdc_lib.binlog.batch import BatchRead, TableCursor
from cdc_lib.binlog.stream import read_batch
from cdc_lib.config.model import PipelineConfig
from cdc_lib.model.positions import BinlogPosition


class ReadAhead:
    """Reads the next batch on a worker thread while the current one is written.

    Only one binlog connection is open at a time: the next read starts after the current
    read finished. A prefetched batch is used only if the table cursors it assumed are
    exactly the ones the pipeline arrives at; otherwise it is dropped and read again.
    Open-ended (follow mode), it reads on after every batch that carried transactions, past
    `target` too, so a busy source's next batch is read while this one is written.

    The cycle floor (`min_interval`, follow mode's poll): a read that follows one which reached the
    binlog end begins `min_interval` after that one began at the earliest. A busy source's batches then
    hold what a poll interval brings, not what one write's time lets through (every Delta commit has a
    fixed cost, and so does each batch's offsets save), and a change waits no longer than when idle.
    A read that stopped short of the end (`batch.max_events`) is followed at once: the follower is behind.
    """

    def __init__(self, config: PipelineConfig, target: BinlogPosition, *, open_ended: bool = False,
                 min_interval: float = 0.0, progress: Callable[[], None] | None = None) -> None:
        self.config = config
        #: Told as the worker's reads go on (the lease's heartbeat: cdc_lib.state.heartbeat).
        self.progress = progress
        self.target = target
        #: Read the next batch after any batch that carried transactions, past `target` too (follow mode).
        self.open_ended = open_ended
        self.min_interval = min_interval
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="binlake-read-ahead")
        self.pending: tuple[list[TableCursor], Future[BatchRead]] | None = None
        #: When the latest prefetched read began reading (monotonic clock), for the cycle floor.
        self.began: float | None = None
        #: The end of the latest read dropped by `found_nothing`: the binlog up to it holds nothing to write.
        self.dropped_end: BinlogPosition | None = None
        self.closing = threading.Event()

    def start(self, cursors: list[TableCursor], *, not_before: float | None = None) -> None:
        """Read from `cursors` on the worker, beginning no earlier than `not_before` (monotonic clock)."""
        self.began = None
        future = self.executor.submit(self._read, cursors, not_before)
        self.pending = (cursors, future)

    def _read(self, cursors: list[TableCursor], not_before: float | None) -> BatchRead:
        wait = 0.0 if not_before is None else not_before - time.monotonic()
        while wait > 0:
            if self.closing.wait(min(wait, 1.0)):
                raise _Abandoned()
            if self.progress is not None:
                self.progress()  # waiting out the cycle floor is no stall
            wait = not_before - time.monotonic() if not_before is not None else 0.0
        self.began = time.monotonic()
        return read_batch(self.config.source, cursors, self.config.batch, server=self.target.server,
                          progress=self.progress)

    @property
    def reading(self) -> bool:
        """Whether a read of the next batch is under way (or done and not yet taken)."""
        return self.pending is not None

    def found_nothing(self) -> bool:
        """Whether the pending read, once done, holds nothing a batch would write or move offsets past: no
        transaction, no stopped or paused table. Such a read is dropped (a follower is then caught up)."""
        if self.pending is None:
            return False
        try:
            read = self.pending[1].result()
        except Exception:  # noqa: BLE001 - `take` raises it again, in the batch that uses the read
            return False
        if read.transactions or read.table_errors or read.schema_changes or read.held:
            return False
        self.pending = None
        self.dropped_end = read.end
        return True

    def take(self, cursors: list[TableCursor]) -> BatchRead | None:
        if self.pending is None:
            return None
        assumed, future = self.pending
        self.pending = None
        read = future.result()
        return read if assumed == cursors else None

    def close(self) -> None:
        self.closing.set()  # a read still waiting out the cycle floor gives up at once
        if self.pending is not None:
            self.pending[1].cancel()
            try:
                self.pending[1].result()
            except BaseException:  # noqa: BLE001 - an abandoned prefetch has nothing left to report
                pass
        self.executor.shutdown(wait=True)


class _Abandoned(Exception):  # noqa: N818 - a prefetch dropped by `ReadAhead.close`, never seen outside it
    pass


__all__ = ["ReadAhead"]
