"""`cdc_lib.reconcile.rows` without a server: the row comparison of the drifting chunks."""

from __future__ import annotations

from cdc_lib.reconcile.rows import compare_rows


def test_a_key_delta_holds_twice_is_named_with_its_count_and_not_also_called_differing() -> None:
    source: dict[tuple[str, ...], int] = {("1",): 10, ("2",): 20, ("3",): 30, ("4",): 40}
    delta: dict[tuple[str, ...], list[int]] = {
        ("1",): [10], ("2",): [20, 20], ("3",): [31, 30, 30], ("5",): [50], ("6",): [60, 61]
    }
    drift = compare_rows([0], source, delta)
    assert (drift.missing, drift.extra, drift.differing, drift.duplicated) == (1, 1, 0, 3)
    assert drift.missing_keys == (("4",),) and drift.extra_keys == (("5",),)
    assert drift.duplicated_keys == ((("2",), 2), (("3",), 3), (("6",), 2))
    assert drift.rows == 5
    assert drift.to_json()["duplicated_keys"][1] == {"key": ["3"], "rows": 3}


def test_one_changed_digest_is_a_differing_key() -> None:
    drift = compare_rows([3, 1], {("7", "a"): 1, ("7", "b"): 2}, {("7", "a"): [1], ("7", "b"): [3]})
    assert drift.chunks == (1, 3) and drift.differing_keys == (("7", "b"),) and drift.rows == 1
