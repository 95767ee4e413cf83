"""The MERGE's key ranges (`file_layout.key_ranges`, `ranges_predicate`): every key covered, cut at the gaps."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cdc_lib.sink.delta_rs.file_layout import (
    TARGET_FILE_BYTES,
    TARGET_FILE_SIZE_PROPERTY,
    FileSizeError,
    key_ranges,
    parse_byte_size,
    ranges_predicate,
    target_file_bytes,
)


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


@pytest.mark.parametrize(("text", "size"), [
    ("1048576", 1_048_576), ("64mb", 64 << 20), ("64MB", 64 << 20), ("3 k", 3 << 10), ("2g", 2 << 30),
    ("1tb", 1 << 40), ("77b", 77), ("", None), ("0", None), ("lots", None), ("12.5mb", None), ("-4mb", None),
    ("7 parsecs", None),
])
def test_byte_sizes_read_as_spark_and_delta_write_them(text: str, size: int | None) -> None:
    assert parse_byte_size(text) == size


def test_the_file_size_is_the_tables_own_else_binlakes_and_a_bad_one_is_refused_by_name() -> None:
    assert target_file_bytes({}) == TARGET_FILE_BYTES
    assert target_file_bytes({TARGET_FILE_SIZE_PROPERTY: None}) == TARGET_FILE_BYTES
    assert target_file_bytes({TARGET_FILE_SIZE_PROPERTY: "48kb"}) == 48 * 1024
    with pytest.raises(FileSizeError) as refused:
        target_file_bytes({TARGET_FILE_SIZE_PROPERTY: "big"}, table="shop.orders")
    assert refused.value.table == "shop.orders" and "'big'" in refused.value.cause
    assert "64mb" in refused.value.remedy


def test_a_wave_already_in_key_order_is_not_sorted_again_and_any_other_is() -> None:
    import pyarrow as pa

    from cdc_lib.sink.delta_rs.snapshot_wave import _ascending

    def rows(*keys: int) -> pa.Table:
        return pa.table({"id": pa.chunked_array([list(keys[:2]), list(keys[2:])], type=pa.int64()),
                         "v": [str(key) for key in keys]})

    assert _ascending(rows(-7, 3, 4, 90), ["id"])
    assert not _ascending(rows(-7, 4, 3, 90), ["id"]), "out of order across two chunks"
    assert not _ascending(rows(1, 5, 5, 9), ["id"]), "a key twice is no key order"
    assert _ascending(rows(12), ["id"]) and _ascending(rows(), ["id"])
    assert not _ascending(rows(1, 2, 3), ["id", "v"]), "a composite key is always sorted"
