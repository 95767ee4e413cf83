"""Showing a snapshot's progress to people: one live line per table on a terminal, plain lines elsewhere.

The engine reports `SnapshotProgress` after each table's plan and chunk wave (`cdc_lib.snapshot.progress`); these
listeners
turn that into text. On a TTY the table's line is redrawn in place (`\\r`) and ends with a newline when the table
is done; anywhere else (a log file, CI, a pipe) a line is written at most every `interval_seconds` per table,
plus one at each table's start and end, so a long snapshot neither floods a log nor stays silent. Dagster's
snapshot asset uses `ProgressLines` with its run log as the sink.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from cdc_lib.snapshot.progress import SnapshotProgress

#: Plain lines: at most one per table this often (the start and the end of a table are always written).
DEFAULT_INTERVAL_SECONDS = 10.0


def format_duration(seconds: float) -> str:
    """`45s`, `3m07s`, `2h05m`: short, and precise enough for an estimate."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def format_eta(progress: SnapshotProgress) -> str:
    if progress.finished:
        return f"done in {format_duration(progress.elapsed_seconds)}"
    eta = progress.eta_seconds
    return "ETA ?" if eta is None else f"ETA {format_duration(eta)}"


def format_progress(progress: SnapshotProgress) -> str:
    """One line: `shop.orders: chunks 3/10 (30%), 1,234,567 rows, 45,678 rows/s, ETA 1m05s`."""
    percent = progress.fraction * 100
    parts = [
        f"chunks {progress.chunks_done}/{progress.chunks_total} ({percent:.0f}%)",
        f"{progress.rows_done:,} rows" + (f" of ~{progress.rows_estimated:,}" if progress.rows_estimated else ""),
        f"{progress.rows_per_second:,.0f} rows/s",
        format_eta(progress),
    ]
    if progress.chunks_resumed:
        parts.append(f"{progress.chunks_resumed} chunks kept from an earlier run")
    return f"{progress.table}: " + ", ".join(parts)


class ProgressLines:
    """Plain lines, rate-limited per table: a listener for logs and non-terminal output."""

    def __init__(
        self,
        emit: Callable[[str], None],
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit = emit
        self.interval_seconds = interval_seconds
        self.clock = clock
        self._last_written: dict[str, float] = {}
        #: The newest report of each table, written or not (what a caller records when the snapshot ends).
        self.latest: dict[str, SnapshotProgress] = {}

    def __call__(self, progress: SnapshotProgress) -> None:
        self.latest[progress.table] = progress
        now = self.clock()
        last = self._last_written.get(progress.table)
        if last is not None and not progress.finished and now - last < self.interval_seconds:
            return
        self._last_written[progress.table] = now
        self.emit(format_progress(progress))


class LiveProgressLine:
    """One line per table, redrawn in place on a terminal; a newline when the table is done."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._drawn_width = 0
        self._drawn_table: str | None = None

    def __call__(self, progress: SnapshotProgress) -> None:
        if self._drawn_table is not None and self._drawn_table != progress.table:
            self.stream.write("\n")  # another table's line stays as it was last drawn
            self._drawn_width = 0
        line = format_progress(progress)
        # Pad over the previous, longer drawing: `\r` moves back but does not erase.
        self.stream.write("\r" + line + " " * max(0, self._drawn_width - len(line)))
        self._drawn_width = len(line)
        self._drawn_table = progress.table
        if progress.finished:
            self.stream.write("\n")
            self._drawn_table, self._drawn_width = None, 0
        self.stream.flush()


def terminal_or_lines(
    stream: TextIO,
    *,
    emit: Callable[[str], None] | None = None,
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
) -> LiveProgressLine | ProgressLines:
    """The live line when `stream` is a terminal; else rate-limited plain lines, given to `emit` (a logger's, so
    they take the log's format) or written to `stream`."""
    if stream.isatty():
        return LiveProgressLine(stream)

    def write(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    return ProgressLines(emit or write, interval_seconds=interval_seconds)


__all__ = [
    "DEFAULT_INTERVAL_SECONDS",
    "LiveProgressLine",
    "ProgressLines",
    "format_duration",
    "format_eta",
    "format_progress",
    "terminal_or_lines",
]
