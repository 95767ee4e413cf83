"""The shop loaded as the CLI (`binlake demo`) loads it, before Dagster first sees it; the Delta versions left."""

from __future__ import annotations

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_log import read_log_tail
from tests.dagster.conftest import Shop


def load_with_the_cli_path(shop: Shop) -> Pipeline:
    pipeline = Pipeline(shop.config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    return pipeline


def delta_versions(shop: Shop, pipeline: Pipeline) -> dict[str, int]:
    versions = {}
    for table in shop.tables:
        tail = read_log_tail(pipeline.table_path(table), application=pipeline.application(table))
        assert tail is not None
        versions[table] = tail.latest_version
    return versions
