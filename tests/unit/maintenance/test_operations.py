"""Which files compaction merges: runs of small files next to each other in key order."""

from __future__ import annotations

from cdc_lib.maintenance.operations import small_runs
from cdc_lib.sink.key_bounds import FileKeys


def file(name: str, size: int, low: int | None, high: int | None) -> FileKeys:
    return FileKeys(name, size, low, high, 0, 10)


def test_runs_are_small_neighbours_in_key_order_cut_at_a_large_file_and_the_target() -> None:
    files = [file("a", 10, 1, 9), file("big", 900, 10, 99), file("b", 10, 100, 109), file("c", 10, 110, 119),
             file("d", 10, 120, 129), file("e", 10, 130, 139), file("f", 10, 200, 209)]
    runs = small_runs(files, target_bytes=1000)
    # "a" is alone before the large file; b..f in one run (the large one is not merged across).
    assert [[entry.path for entry in run] for run in runs] == [["b", "c", "d", "e", "f"]]
    # A run never exceeds the target: b..c, d..e, then f alone (left).
    assert [[entry.path for entry in run] for run in small_runs(files, target_bytes=25)] == [["b", "c"], ["d", "e"]]


def test_a_file_without_key_statistics_stops_compaction_by_key() -> None:
    assert small_runs([file("a", 10, 1, 2), file("b", 10, None, None)], target_bytes=1000) == []
