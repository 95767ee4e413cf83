"""Pure logic of the keep-up benchmark: lag from commit and sync timelines, the steadiness verdict, the rate
search and the catch-up arithmetic. No server, no Spark: `tests/unit/bench/test_keepup.py` covers it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: A binlog point as (file name, offset): file names sort in order on one server (`mariadb-bin.000042`).
Point = tuple[str, int]


@dataclass(frozen=True)
class SourceCommit:
    """One transaction of the load writer: wall time just after COMMIT, its rows, the binlog end after it."""

    at: float
    rows: int
    end: Point


@dataclass(frozen=True)
class FollowSample:
    """The follower after one micro-batch: wall time it finished, the table's offset then."""

    at: float
    applied: Point


@dataclass(frozen=True)
class LagPoint:
    at: float
    lag_s: float
    backlog_rows: int


def lag_series(commits: Sequence[SourceCommit], samples: Sequence[FollowSample]) -> list[LagPoint]:
    """Lag after each micro-batch: the age of the oldest source commit not yet applied (0 when none is).

    Lag only grows between two batches, so its value just as a batch ends is the most the follower lags.
    Commits are in commit order, so their end points ascend and the applied ones form a prefix.
    """
    ends = [commit.end for commit in commits]
    times = [commit.at for commit in commits]
    rows_after = [0] * (len(commits) + 1)
    for index in range(len(commits) - 1, -1, -1):
        rows_after[index] = rows_after[index + 1] + commits[index].rows
    series = []
    for sample in samples:
        applied = bisect.bisect_right(ends, sample.applied)
        # Commits the source made after the sample's time are not behind yet.
        written = bisect.bisect_right(times, sample.at)
        if applied >= written:
            series.append(LagPoint(sample.at, 0.0, 0))
        else:
            oldest = commits[applied]
            series.append(LagPoint(sample.at, sample.at - oldest.at, rows_after[applied] - rows_after[written]))
    return series


def applied_all(samples: Sequence[FollowSample], last: SourceCommit) -> bool:
    """Whether the follower's latest sample shows the writer's last commit applied."""
    return bool(samples) and samples[-1].applied >= last.end


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x; 0 for fewer than two distinct x."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


@dataclass(frozen=True)
class Verdict:
    steady: bool
    max_lag_s: float
    #: Seconds of lag gained per second over the second half of the window (≈ 1 − capacity / rate when behind).
    late_slope: float
    reason: str


def judge(series: Sequence[LagPoint], *, window_start: float, window_end: float, limit_s: float = 60.0,
          max_slope: float = 0.05) -> Verdict:
    """Whether the follower kept up during [window_start, window_end] (the writer's first and last commit): lag
    under `limit_s` all along, not growing over the window's second half (a lag that grows at `max_slope` s/s or
    more would pass `limit_s` later), and the window's last commit applied within `limit_s` of it.

    The series runs on past the window until the follower applied the last commit (`bench.keepup.keepup.follow_trial`
    stops it then): a follower stops between batches only, so a series cut at the window's end may end just
    before it whatever the follower's health. The points after the window count for the lag, not for the slope
    (with no new commits, the oldest one not applied can only age until it is applied).
    """
    inside = [point for point in series if window_start <= point.at <= window_end + limit_s]
    if not inside:
        return Verdict(False, math.inf, math.inf, "no micro-batch finished in the window")
    max_lag = max(point.lag_s for point in inside)
    middle = (window_start + window_end) / 2
    late = [(point.at, point.lag_s) for point in inside if middle <= point.at <= window_end]
    late_slope = slope(late)
    if max_lag >= limit_s:
        return Verdict(False, max_lag, late_slope, f"lag reached {max_lag:.1f} s ≥ {limit_s:.0f} s")
    if late_slope >= max_slope:
        return Verdict(False, max_lag, late_slope, f"lag grows {late_slope:.3f} s/s over the second half")
    last = inside[-1]
    if last.at < window_end or last.backlog_rows or last.lag_s:
        return Verdict(False, max_lag, late_slope, f"the follower stopped with the window's last commit not applied "
                       f"(last micro-batch {last.at - window_end:+.1f} s from the window's end)")
    return Verdict(True, max_lag, late_slope, "steady")


@dataclass
class RateSearch:
    """Bisection in log space for the highest rate that passes, within `steps` trials.

    `low` is a guess (not yet proven) below the answer, `high` one above it; until a trial passes, each failure
    also moves `low` down to a quarter of the failed rate, so a bad first guess costs trials, not the answer.
    """

    low: float
    high: float
    steps: int
    tried: list[tuple[float, bool]] = field(default_factory=list)

    def done(self) -> bool:
        return len(self.tried) >= self.steps

    def propose(self) -> float:
        return math.sqrt(self.low * self.high)

    def record(self, rate: float, passed: bool) -> None:
        proven = self.best is not None
        self.tried.append((rate, passed))
        if passed:
            self.low = max(self.low, rate)
            if rate >= self.high:
                self.high = rate * 2
        else:
            self.high = min(self.high, rate)
            if not proven:
                self.low = min(self.low, rate / 4)

    @property
    def best(self) -> float | None:
        passing = [rate for rate, passed in self.tried if passed]
        return max(passing) if passing else None


def catch_up_seconds(backlog_rows: float, drain_rows_per_s: float, ongoing_rows_per_s: float) -> float:
    """Seconds to apply a backlog while the source keeps writing; infinite when the follower cannot gain."""
    gain = drain_rows_per_s - ongoing_rows_per_s
    return backlog_rows / gain if gain > 0 else math.inf
