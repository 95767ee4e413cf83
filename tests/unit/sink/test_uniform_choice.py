"""A Delta UniForm table is never written by delta-rs, which writes no Iceberg metadata (docs/iceberg.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from cdc_lib.sink.choice import spark_only_reasons, uniform_formats
from cdc_lib.sink.delta_log import TableDetail
from cdc_lib.sink.spark.uniform import _formats_now
from cdc_lib.sink.storage import LocalSinkStorage


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


def test_the_uniform_check_reads_only_the_commits_since_its_last_one(tmp_path: Path) -> None:
    """Each Spark commit asks whether the table is UniForm: after the first, only the new commits are read, and a
    property set by another writer in one of them is seen at once."""
    path = str(tmp_path / "t")
    for number in range(40):
        write_deltalake(path, pa.table({"id": [number]}), mode="append")
    storage = LocalSinkStorage()
    assert _formats_now(path, storage) == frozenset()
    write_deltalake(path, pa.table({"id": [99]}), mode="append")
    before = storage.counters.files_read
    assert _formats_now(path, storage) == frozenset()
    assert storage.counters.files_read - before <= 2, "the hint and the one new commit, not the 41 before"
    # Another writer's metaData commit turns UniForm on.
    log = Path(path) / "_delta_log"
    metadata: dict[str, Any] = {}
    for version in range(41):
        for line in (log / f"{version:020d}.json").read_text().splitlines():
            metadata = json.loads(line).get("metaData", metadata)
    metadata["configuration"] = {**metadata["configuration"], "delta.universalFormat.enabledFormats": "iceberg"}
    (log / f"{41:020d}.json").write_text(json.dumps({"metaData": metadata}) + "\n")
    assert _formats_now(path, storage) == frozenset({"iceberg"})
    # A table made anew at a lower version is read whole again.
    shutil.rmtree(path)
    write_deltalake(path, pa.table({"id": [1]}))
    assert _formats_now(path, storage) == frozenset()
