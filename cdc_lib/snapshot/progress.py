"""How far a snapshot has come: what the engine reports and what the CLI and Dagster show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SnapshotProgress:
    """One table's snapshot after its plan and after each finished chunk wave."""

    table: str
    chunks_done: int
    chunks_total: int
    rows_done: int
    #: The row count the plan was made for (an estimate for InnoDB); 0 when unknown.
    rows_estimated: int
    #: Seconds since this run started the table (a resumed snapshot counts from the resume).
    elapsed_seconds: float
    #: Chunks an earlier, interrupted run finished: kept, not read again.
    chunks_resumed: int = 0
    rows_resumed: int = 0

    @property
    def finished(self) -> bool:
        return self.chunks_total > 0 and self.chunks_done >= self.chunks_total

    @property
    def rows_per_second(self) -> float:
        read_now = self.rows_done - self.rows_resumed
        return read_now / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def fraction(self) -> float:
        if self.chunks_total <= 0:
            return 0.0
        return min(1.0, self.chunks_done / self.chunks_total)

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at this run's pace; None before the first chunk of this run."""
        done_now = self.chunks_done - self.chunks_resumed
        if self.finished:
            return 0.0
        if done_now <= 0 or self.elapsed_seconds <= 0:
            return None
        return (self.chunks_total - self.chunks_done) * self.elapsed_seconds / done_now


#: Called by the snapshot engine after the plan and after each chunk wave; must return quickly.
ProgressListener = Callable[[SnapshotProgress], None]


__all__ = ["ProgressListener", "SnapshotProgress"]
