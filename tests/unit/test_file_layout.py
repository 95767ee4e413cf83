"""The MERGE's key ranges (`file_layout.key_ranges`, `ranges_predicate`): every key covered, cut at the gaps."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cdc_lib.file_layout import key_ranges, ranges_predicate


def test_the_ranges_cover_every_key_and_cut_at_the_largest_gaps() -> None:
    keys = [7, 3, 4, 5, 1_000, 1_003, 50_000, 4, -12]
    ranges = key_ranges(keys, limit=3)
    assert ranges == [(-12, 7), (1_000, 1_003), (50_000, 50_000)]
    assert all(any(low <= key <= high for low, high in ranges) for key in keys)


def test_one_range_is_the_old_between_and_no_keys_no_range() -> None:
    assert key_ranges([9, 2, 31], limit=1) == [(2, 31)]
    assert key_ranges([], limit=8) == []
    assert key_ranges([17], limit=8) == [(17, 17)]


def test_fewer_distinct_keys_than_ranges_gives_one_range_per_key() -> None:
    assert key_ranges([5, 5, 9, 9, 9], limit=8) == [(5, 5), (9, 9)]


def test_decimal_keys_past_two_to_the_63_keep_their_exact_values() -> None:
    top = Decimal(2**64 - 1)
    keys = [Decimal(2**63 + 5), top, Decimal(12), Decimal(2**63 + 6)]
    ranges = key_ranges(keys, limit=2)
    assert ranges == [(Decimal(12), Decimal(12)), (Decimal(2**63 + 5), top)]
    predicate = ranges_predicate('t."id"', "decimal(20,0)", ranges)
    assert predicate == (
        "(t.\"id\" BETWEEN CAST('12' AS DECIMAL(20, 0)) AND CAST('12' AS DECIMAL(20, 0)) OR "
        "t.\"id\" BETWEEN CAST('9223372036854775813' AS DECIMAL(20, 0)) AND "
        "CAST('18446744073709551615' AS DECIMAL(20, 0)))"
    )


def test_an_integer_predicate_is_a_plain_between_or_a_disjunction() -> None:
    assert ranges_predicate('t."k"', "bigint", [(-3, 8)]) == 't."k" BETWEEN -3 AND 8'
    assert ranges_predicate('t."k"', "int", [(1, 2), (40, 41)]) == '(t."k" BETWEEN 1 AND 2 OR t."k" BETWEEN 40 AND 41)'
    with pytest.raises(ValueError):
        ranges_predicate('t."k"', "int", [])
