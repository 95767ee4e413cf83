"""The 1-minute load average around each measurement, so every row of a report says what the machine was doing.

On a shared machine a figure means little without it: `around` records the load before and after a measurement
under a key, and `load_text` prints it for a report's row, marked "noisy" when it exceeded the cores (issue 30).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def around(results: dict[str, Any], key: str, measure: Callable[[], T]) -> T:
    """`measure()`, with the load average before and after it kept in `results["load"][key]`."""
    before = os.getloadavg()[0]
    try:
        return measure()
    finally:
        results.setdefault("load", {})[key] = [before, os.getloadavg()[0]]


def load_text(results: dict[str, Any], *keys: str) -> str:
    """The load from before the first of `keys` to after the last measured one ("1.2→1.5", "noisy" above the
    cores), or "—" when none was measured."""
    loads = [results.get("load", {}).get(key) for key in keys]
    measured = [load for load in loads if load]
    if not measured:
        return "—"
    text = f"{measured[0][0]:.1f}→{measured[-1][1]:.1f}"
    cores = os.cpu_count() or 1
    return text + " noisy" if any(value > cores for load in measured for value in load) else text
