"""The snapshot progress display: the live line on a terminal, rate-limited plain lines elsewhere, the ETA text."""

from __future__ import annotations

import io

import pytest

from cdc_lib.display.progress import (
    LiveProgressLine,
    ProgressLines,
    format_duration,
    format_progress,
    terminal_or_lines,
)
from cdc_lib.snapshot.progress import SnapshotProgress


def progress(done: int, *, total: int = 8, rows: int = 0, elapsed: float = 0.0, table: str = "shop.orders",
             resumed: int = 0, rows_resumed: int = 0, estimated: int = 0) -> SnapshotProgress:
    return SnapshotProgress(
        table=table, chunks_done=done, chunks_total=total, rows_done=rows, rows_estimated=estimated,
        elapsed_seconds=elapsed, chunks_resumed=resumed, rows_resumed=rows_resumed,
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4, "0s"), (44.6, "45s"), (187.0, "3m07s"), (3599.4, "59m59s"), (7512.0, "2h05m"), (-3.0, "0s")],
)
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_the_line_gives_chunks_rows_rate_and_eta() -> None:
    assert format_progress(progress(3, rows=1_234_567, elapsed=27.25)) == (
        "shop.orders: chunks 3/8 (38%), 1,234,567 rows, 45,305 rows/s, ETA 45s"
    )
    assert format_progress(progress(0, elapsed=1.5)).endswith("0 rows/s, ETA ?")
    finished = format_progress(progress(8, rows=77_001, elapsed=187.0))
    assert finished == "shop.orders: chunks 8/8 (100%), 77,001 rows, 412 rows/s, done in 3m07s"
    # A resumed run counts only what it read itself in its pace, and says what it kept.
    resumed = format_progress(progress(6, rows=60_000, elapsed=10.0, resumed=4, rows_resumed=40_000,
                                       estimated=81_000))
    assert resumed == ("shop.orders: chunks 6/8 (75%), 60,000 rows of ~81,000, 2,000 rows/s, ETA 10s, "
                       "4 chunks kept from an earlier run")


def test_plain_lines_are_rate_limited_per_table_but_start_and_end_always_show() -> None:
    clock, lines = FakeClock(), list[str]()
    listener = ProgressLines(lines.append, interval_seconds=12.5, clock=clock)
    listener(progress(0))
    clock.now += 5
    listener(progress(1, rows=10, elapsed=5))  # too soon
    listener(progress(0, table="shop.users"))  # another table: its own clock
    clock.now += 7.5
    listener(progress(2, rows=20, elapsed=12.5))  # 12.5 s after the last line
    clock.now += 1
    listener(progress(3, rows=30, elapsed=13.5))  # too soon
    listener(progress(8, rows=80, elapsed=13.5))  # the end always shows
    assert [line.split(":")[0] + " " + line.split()[2] for line in lines] == [
        "shop.orders 0/8", "shop.users 0/8", "shop.orders 2/8", "shop.orders 8/8",
    ]
    assert listener.latest["shop.orders"].chunks_done == 8 and listener.latest["shop.users"].chunks_done == 0


def test_on_a_terminal_the_line_is_redrawn_in_place() -> None:
    screen = Terminal()
    listener = terminal_or_lines(screen)
    assert isinstance(listener, LiveProgressLine)
    listener(progress(1, rows=123_456, elapsed=2.5))
    listener(progress(2, rows=200_000, elapsed=5.0))
    listener(progress(8, rows=800_000, elapsed=20.0))
    listener(progress(1, total=2, rows=7, elapsed=1.0, table="shop.users"))
    drawn = screen.getvalue()
    assert drawn.count("\r") == 4
    assert drawn.count("\n") == 1, "a newline only when a table is done"
    first, second = drawn.split("\r")[1:3]
    assert "chunks 1/8" in first and "chunks 2/8" in second
    # The redrawn line covers the previous one: padded to at least its width.
    assert len(second) >= len(first)
    assert drawn.split("\n")[0].endswith("done in 20s")


def test_not_a_terminal_writes_plain_lines() -> None:
    out = io.StringIO()
    listener = terminal_or_lines(out, interval_seconds=30)
    assert isinstance(listener, ProgressLines)
    listener(progress(0))
    listener(progress(4, rows=40, elapsed=1.0))
    listener(progress(8, rows=80, elapsed=2.0))
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        "shop.orders: chunks 0/8 (0%), 0 rows, 0 rows/s, ETA ?",
        "shop.orders: chunks 8/8 (100%), 80 rows, 40 rows/s, done in 2s",
    ]
