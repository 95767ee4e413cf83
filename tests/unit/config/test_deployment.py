"""Cluster and multi-pipeline configuration: spark.staging_path, local-only defaults, deployment lists."""

from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.load import load_configs, resolve_config_path
from cdc_lib.config.model import PipelineConfig, SparkConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from cdc_lib.sink.spark.session import is_local_master, mode_defaults

VALID: dict[str, Any] = {
    "pipeline": "shop",
    "source": {"host": "127.0.0.1", "port": 3306, "user": "cdc", "password": "pw", "server_id": 5701,
               "tables": ["shop.orders"]},
    "sink": {"path": "/lake"},
}


def test_staging_path_is_a_folder_resolved_next_to_the_config(tmp_path: Path) -> None:
    config = parse_config({**VALID, "spark": {"master": "spark://h:7077", "staging_path": "staging"}},
                          base_dir=tmp_path)
    assert config.spark.staging_path == str(tmp_path / "staging")
    assert parse_config(VALID).spark.staging_path is None
    with pytest.raises(ConfigError, match=r"spark\.staging_path.*URI.*remedy: mount a shared folder"):
        parse_config({**VALID, "spark": {"staging_path": "s3a://bucket/staging"}})


@pytest.mark.parametrize(
    ("master", "local"),
    [("local", True), ("local[*]", True), ("local[2]", True), ("local-cluster[2,1,1024]", True),
     ("spark://127.0.0.1:7077", False), ("yarn", False), ("k8s://https://api:6443", False), ("localhost", False)],
)
def test_driver_memory_default_only_for_local_mode(master: str, local: bool) -> None:
    assert is_local_master(master) is local
    assert ("spark.driver.memory" in mode_defaults(SparkConfig(master=master))) is local


def test_the_cli_refuses_a_deployment_list(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("pipeline: a\n")
    second.write_text("pipeline: b\n")
    with pytest.raises(ConfigError, match=r"names several pipelines.*remedy: pass --config PATH"):
        resolve_config_path(None, {"BINLAKE_CONFIG": f"{first}:{second}"})
    with pytest.raises(ConfigError, match=r"names several pipelines"):
        resolve_config_path(None, {"BINLAKE_CONFIG": str(tmp_path)})
    assert resolve_config_path(None, {"BINLAKE_CONFIG": str(first)}) == first


def test_a_folder_loads_every_yaml_in_name_order(tmp_path: Path) -> None:
    for name, server_id in (("west.yml", 2), ("east.yaml", 1)):
        (tmp_path / name).write_text(
            f"pipeline: {name.split('.')[0]}\nsource: {{host: h, user: u, server_id: {server_id}, tables: [d.t]}}\n"
            "sink: {path: /lake}\n"
        )
    (tmp_path / "notes.txt").write_text("not a config")
    assert [config.pipeline for config in load_configs(str(tmp_path), environ={})] == ["east", "west"]
    with pytest.raises(ConfigError, match="BINLAKE_CONFIG"):
        load_configs("", environ={})


def test_one_bucket_name_behind_two_s3_stores_is_refused() -> None:
    from cdc_lib.config.deployment import check_disjoint

    def pipeline(name: str, server_id: int, endpoint: str) -> PipelineConfig:
        return parse_config({**VALID, "pipeline": name,
                             "source": {**VALID["source"], "server_id": server_id},
                             "sink": {"path": f"s3a://lake/{name}", "endpoint_url": endpoint}})

    east, west = pipeline("east", 1, "http://127.0.0.1:9000"), pipeline("west", 2, "http://127.0.0.1:9100")
    tables = {"east": ["shop.orders"], "west": ["shop.orders"]}
    with pytest.raises(ConfigError, match=r"'east' and 'west' use bucket 'lake' with different S3 settings"):
        check_disjoint([east, west], tables)
    check_disjoint([east, pipeline("west", 2, "http://127.0.0.1:9000")], tables)  # same store: fine
