"""`cdc_lib.reconciliation` without a server: float columns compare within their type's precision."""

from __future__ import annotations

import pytest

from cdc_lib.reconciliation import FloatTally


@pytest.mark.parametrize(
    ("mine", "theirs", "precision", "same"),
    [
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-7, 1.0, 10.0), 1e-6, True),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-5, 1.0, 10.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(3, 1.0, 1.0, 10.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0, 1.0, 11.0), 1e-6, False),
        (FloatTally(2, 1.0, 1.0, 10.0), FloatTally(2, 1.0 + 1e-7, 1.0, 10.0), 1e-12, False),
    ],
)
def test_float_tallies_compare_within_the_types_precision(
    mine: FloatTally, theirs: FloatTally, precision: float, same: bool
) -> None:
    assert mine.same_as(theirs, precision) is same
