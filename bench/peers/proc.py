"""CPU seconds and load from /proc, so a figure taken on a shared machine says what it cost and how busy it was.

A wall-clock ratio on 2 shared cores mixes everyone's CPU (binlake, its JVM, MariaDB, the load writer, other
benchmarks); CPU seconds of one process tree do not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name is in parentheses and may hold spaces or parentheses itself: split after the last one.
    return text[text.rindex(")") + 2:].split()


def process_cpu_seconds(pid: int, *, waited_children: bool = False) -> float:
    """utime + stime of `pid` (all its threads), plus its waited-for children's when asked."""
    fields = _fields(pid)
    # After the name: state ppid ... utime is the 12th, stime the 13th, cutime and cstime the 14th and 15th.
    ticks = int(fields[11]) + int(fields[12])
    if waited_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICKS


def descendants(pid: int) -> list[int]:
    """Live processes below `pid` (Spark's JVM below binlake's Python, for one)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_fields(int(entry.name))[1])
        except (OSError, ValueError, IndexError):
            continue  # gone since the listing
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_seconds(pid: int, *, exclude: tuple[int, ...] = ()) -> float:
    """CPU seconds of `pid`, the children it has waited for, and its live descendants but those in `exclude` and
    theirs (the bench's MariaDB is a child of the bench's Python, and its time is not binlake's)."""
    excluded = set(exclude)
    for pid_excluded in exclude:
        excluded.update(descendants(pid_excluded))
    total = process_cpu_seconds(pid, waited_children=True)
    for child in descendants(pid):
        if child in excluded:
            continue
        try:
            total += process_cpu_seconds(child)
        except OSError:
            continue  # ended between the listing and the read (its time is in its parent's cutime once waited)
    return total


@dataclass(frozen=True)
class Load:
    """The 1-minute load average before and after a measurement, against the machine's cores."""

    before: float
    after: float

    @property
    def noisy(self) -> bool:
        return max(self.before, self.after) > (os.cpu_count() or 1)

    def describe(self) -> str:
        return f"{self.before:.1f}→{self.after:.1f}" + (" noisy" if self.noisy else "")


def load_now() -> float:
    return os.getloadavg()[0]
