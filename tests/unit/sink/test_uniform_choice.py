"""A Delta UniForm table is never written by delta-rs, which writes no Iceberg metadata (docs/iceberg.md)."""

from __future__ import annotations

import pytest

from cdc_lib.sink.choice import spark_only_reasons, uniform_formats
from cdc_lib.sink.delta_log import TableDetail


@pytest.mark.parametrize(("listed", "formats"), [
    ("iceberg", ["iceberg"]), ("ICEBERG, hudi", ["iceberg", "hudi"]), ("", []), (None, []),
])
def test_uniform_formats_reads_the_property(listed: str | None, formats: list[str]) -> None:
    properties = {} if listed is None else {"delta.universalFormat.enabledFormats": listed}
    assert uniform_formats(properties) == formats


def test_a_uniform_table_stays_on_spark_even_with_features_delta_rs_writes() -> None:
    # Only the property differs from a table delta-rs writes: the reason must come from UniForm itself.
    plain = TableDetail(properties={}, features=frozenset(), reader_version=1, writer_version=2)
    assert spark_only_reasons(plain) == []
    uniform = TableDetail(properties={"delta.universalFormat.enabledFormats": "iceberg"}, features=frozenset(),
                          reader_version=1, writer_version=2)
    reasons = spark_only_reasons(uniform)
    assert len(reasons) == 1 and "UniForm" in reasons[0] and "delta-rs does not write" in reasons[0]
