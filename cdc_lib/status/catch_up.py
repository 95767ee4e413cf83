"""Time to catch up: today's lag divided by how much faster binlake applies the binlog than the source writes it.

    catch-up seconds = lag bytes / (apply rate − source rate)        when the difference is positive

Both rates are in binlog bytes per second, the unit of the lag, and both come from the batches the
offset store remembers (`PipelineState.recent_batches`, written once per batch with the offsets):

- **apply rate**: binlog bytes a batch advanced over, divided by the batch's wall time (read, MERGE,
  offset write). Only a batch that stopped at its size or time limit measures what binlake *can* do;
  one that reached the end of the binlog only shows what there was to do. So the rate comes from the
  limited batches when there are any, and is otherwise flagged as a lower bound (then a non-positive
  margin is "unknown", never "not catching up"). It is the rate while sync runs back to back
  (`binlake sync --until-caught-up`); a schedule of one batch per run adds its pauses on top.
- **source rate**: the growth of the server's binlog between the server end a past batch saw and the
  end now, from the server's own file sizes (`SHOW BINARY LOGS`), over the elapsed wall time. It is
  measured over the last hour of batches (the oldest sample in it), or since the last batch when none
  is that recent: an honest average, not a forecast of bursts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cdc_lib.model.positions import BinlogPosition
from cdc_lib.source import binlog_status
from cdc_lib.state.offsets import BatchRecord

Verdict = Literal["caught_up", "catching_up", "not_catching_up", "unknown"]

#: Source-rate samples older than this are passed over for a more recent one, when there is one.
SOURCE_RATE_WINDOW_SECONDS = 3600.0
#: Below this many seconds between two samples the binlog growth says nothing.
MIN_SAMPLE_SECONDS = 1.0


@dataclass(frozen=True)
class CatchUp:
    lag_bytes: int
    apply_bytes_per_second: float | None
    apply_rate_is_lower_bound: bool
    source_bytes_per_second: float | None
    #: Seconds to apply today's lag while the source keeps writing; None unless catching up (0 when caught up).
    seconds: float | None
    verdict: Verdict

    @property
    def warning(self) -> bool:
        return self.verdict == "not_catching_up"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def catch_up(
    lag_bytes: int, *, apply_rate: float | None, source_rate: float | None, apply_rate_is_lower_bound: bool = False
) -> CatchUp:
    """The catch-up figure for `lag_bytes` (see the module docstring). An unknown source rate counts as 0."""
    margin = None if apply_rate is None else apply_rate - (source_rate or 0.0)
    seconds: float | None = None
    verdict: Verdict
    if lag_bytes <= 0:
        verdict, seconds = "caught_up", 0.0
    elif margin is None:
        verdict = "unknown"
    elif margin > 0:
        verdict, seconds = "catching_up", lag_bytes / margin
    else:
        verdict = "unknown" if apply_rate_is_lower_bound else "not_catching_up"
    return CatchUp(
        lag_bytes=lag_bytes, apply_bytes_per_second=apply_rate, apply_rate_is_lower_bound=apply_rate_is_lower_bound,
        source_bytes_per_second=source_rate, seconds=seconds, verdict=verdict,
    )


def apply_rate(records: Sequence[BatchRecord]) -> tuple[float | None, bool]:
    """Binlog bytes per second binlake applied, and whether it is only a lower bound (no batch hit a limit)."""
    limited = [record for record in records if record.limited and record.seconds > 0]
    chosen = limited or [record for record in records if record.binlog_bytes > 0 and record.seconds > 0]
    seconds = sum(record.seconds for record in chosen)
    if not chosen or seconds <= 0:
        return None, False
    return sum(record.binlog_bytes for record in chosen) / seconds, not limited


def source_rate(
    records: Sequence[BatchRecord], logs: list[tuple[str, int]], *, now: dt.datetime
) -> float | None:
    """Binlog bytes per second the server wrote, from a past batch's view of the server end to the end now."""
    names = {name for name, _ in logs}
    samples = [
        (dt.datetime.fromisoformat(record.started_at), record.server_end) for record in records
        if record.server_end is not None and record.server_end.file in names
    ]
    if not samples:
        return None
    recent = [sample for sample in samples if (now - sample[0]).total_seconds() <= SOURCE_RATE_WINDOW_SECONDS]
    at, position = min(recent, key=lambda sample: sample[0]) if recent else max(samples, key=lambda sample: sample[0])
    elapsed = (now - at).total_seconds()
    if elapsed < MIN_SAMPLE_SECONDS:
        return None
    return binlog_status.bytes_behind(position, logs) / elapsed


def bytes_between(start: BinlogPosition, end: BinlogPosition, logs: list[tuple[str, int]]) -> int | None:
    """Binlog bytes from `start` to `end` on one server; None when a file between them is not in `logs`."""
    names = [name for name, _ in logs]
    if start.file == end.file:
        return max(end.pos - start.pos, 0)
    if start.file not in names or end.file not in names:
        return None
    first, last = names.index(start.file), names.index(end.file)
    if first > last:
        return 0
    sizes = dict(logs)
    middle = sum(sizes[name] for name in names[first + 1:last])
    return max(sizes[start.file] - start.pos, 0) + middle + end.pos




def record_of_batch(
    connection: Any,
    *,
    start: BinlogPosition,
    end: BinlogPosition,
    reached_end: bool,
    started_at: dt.datetime,
    seconds: float,
    server_end: BinlogPosition,
    logs: list[tuple[str, int]],
) -> BatchRecord:
    """A batch's `BatchRecord`; asks the server for its files again only when the batch read past the ones
    it listed at the start."""
    moved = bytes_between(start, end, logs)
    if moved is None:  # the batch read into a file created after the listing (closed files' sizes are final)
        moved = bytes_between(start, end, binlog_status.binary_logs(connection))
    return BatchRecord(
        started_at=started_at.isoformat(), seconds=round(seconds, 3), binlog_bytes=moved or 0,
        limited=not reached_end, server_end=server_end,
    )


__all__ = ["CatchUp", "apply_rate", "bytes_between", "catch_up", "record_of_batch", "source_rate"]
