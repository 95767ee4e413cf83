"""A deployment: several pipelines served together, and the rules that keep them apart.

`cdc_lib.config.load.load_configs` loads the pipelines of a deployment (one per config file); `check_disjoint`
refuses a set whose pipelines would overwrite each other's names, Delta tables or replication slot, before
anything (a Dagster code location, say) is built from them.
"""

from __future__ import annotations

import re

from cdc_lib.common.s3 import split_s3_uri
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import ConfigError
from cdc_lib.model.tables import TableRef

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def name_slug(text: str) -> str:
    """`text` with every character outside [A-Za-z0-9_] replaced by '_': how names derived from a pipeline or
    database name are spelt (the Dagster jobs, groups, pools and resources of `assets.naming`)."""
    return _NOT_NAME.sub("_", text)


def check_disjoint(configs: list[PipelineConfig], tables: dict[str, list[str]]) -> None:
    """Refuse pipelines that would overwrite each other's Dagster names, Delta tables or replication slot."""
    by_slug: dict[str, str] = {}
    by_table_path: dict[str, tuple[str, str]] = {}
    by_replica: dict[tuple[str, int, int], str] = {}
    by_bucket: dict[str, tuple[str, object]] = {}
    for config in configs:
        where = config.config_path or config.pipeline
        slug = name_slug(config.pipeline).lower()
        if slug in by_slug:
            raise ConfigError(
                "pipeline", f"'{config.pipeline}' ({where}) and '{by_slug[slug]}' give the same Dagster names "
                f"(binlake_{slug}_…)", remedy="rename one pipeline; names differing only in case, '-' or '_' collide",
            )
        by_slug[slug] = config.pipeline
        replica = (config.source.host, config.source.port, config.source.server_id)
        if replica in by_replica:
            raise ConfigError(
                "source.server_id", f"pipelines '{by_replica[replica]}' and '{config.pipeline}' both read "
                f"{config.source.host}:{config.source.port} as replica {config.source.server_id}; the server drops "
                "one of two replicas with the same id", remedy=f"give pipeline '{config.pipeline}' its own server_id",
            )
        by_replica[replica] = config.pipeline
        if config.sink.on_s3:
            # Hadoop caches one S3A filesystem per bucket name for the whole process: two stores behind one
            # bucket name would both be reached through whichever pipeline opened it first.
            bucket, _ = split_s3_uri(config.sink.path)
            if bucket in by_bucket and by_bucket[bucket][1] != config.sink.s3:
                raise ConfigError(
                    "sink.path", f"pipelines '{by_bucket[bucket][0]}' and '{config.pipeline}' use bucket '{bucket}' "
                    "with different S3 settings (endpoint, region or credentials); one Spark process reaches a "
                    "bucket name through one S3 client", remedy="use one bucket name per S3 store, or give both "
                    "pipelines the same sink S3 settings, or serve them from separate code locations",
                )
            by_bucket[bucket] = (config.pipeline, config.sink.s3)
        for table in tables[config.pipeline]:
            ref = TableRef.parse(table)
            path = config.sink.table_path(ref.database, ref.table)
            # Several tables of one pipeline may share a Delta table: its routes (sink.routes).
            if path in by_table_path and by_table_path[path][0] != config.pipeline:
                other, other_table = by_table_path[path]
                raise ConfigError(
                    "sink.path", f"pipelines '{other}' ({other_table}) and '{config.pipeline}' ({table}) both "
                    f"write the Delta table {path}", remedy=f"give pipeline '{config.pipeline}' its own sink.path",
                )
            by_table_path[path] = (config.pipeline, table)
