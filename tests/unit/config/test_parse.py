import os
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.load import load_config
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID


def with_change(path: str, value: object) -> dict[str, Any]:
    document: dict[str, Any] = {**VALID, "source": dict(VALID["source"]), "sink": dict(VALID["sink"])}
    section, _, key = path.partition(".")
    if key:
        if value is None:
            document[section].pop(key)
        else:
            document[section][key] = value
    elif value is None:
        document.pop(section)
    else:
        document[section] = value
    return document


def test_valid_config_has_defaults() -> None:
    config = parse_config(VALID)
    assert config.offsets.uri == "/lake/_offsets"
    assert config.batch.max_events == 100_000
    assert config.sink.table_path("shop", "orders") == "/lake/shop/orders"
    assert "pw" not in repr(config.source)
    assert config.source.zero_dates == "null"


def test_apply_threads_default_to_the_cores_and_never_exceed_the_changed_tables() -> None:
    batch = parse_config(VALID).batch
    assert batch.apply_threads is None and batch.append_inserts
    assert batch.threads_for(500) == (os.cpu_count() or 1)
    assert batch.threads_for(500, delta_rs=True) == 2 * (os.cpu_count() or 1)  # delta-rs waits on I/O too
    assert batch.threads_for(1) == batch.threads_for(1, delta_rs=True) == 1
    configured = parse_config(with_key("batch.apply_threads", 7)).batch
    assert (configured.threads_for(3), configured.threads_for(50)) == (3, 7)
    assert configured.threads_for(50, delta_rs=True) == 7
    assert not parse_config(with_key("batch.append_inserts", False)).batch.append_inserts


def test_batch_writer_defaults_to_auto_and_names_an_engine() -> None:
    assert parse_config(VALID).batch.writer == "auto"
    assert parse_config(with_key("batch.writer", "delta-rs")).batch.writer == "delta-rs"
    assert parse_config(with_key("batch.writer", "spark")).batch.writer == "spark"


def test_spill_bound_and_folder(tmp_path: Path) -> None:
    batch = parse_config(VALID).batch
    assert (batch.max_buffered_changes, batch.spill_path) == (200_000, None)
    path = tmp_path / "binlake.yaml"
    path.write_text("pipeline: shop\nsource: {host: h, user: u, password: p, server_id: 5, tables: [a.b]}\n"
                    "sink: {path: /lake}\nbatch: {max_buffered_changes: 1250, spill_path: scratch/spill}\n")
    loaded = load_config(path).batch
    assert (loaded.max_buffered_changes, loaded.spill_path) == (1250, str(tmp_path / "scratch" / "spill"))


def test_deletion_vectors_are_off_unless_the_pipeline_or_a_table_turns_them_on() -> None:
    assert not parse_config(VALID).sink.deletion_vectors_for("shop.orders")
    overrides = {"shop.orders": {"deletion_vectors": True}, "inventory.items": {"deletion_vectors": None}}
    sink = parse_config(with_key("sink.tables", overrides)).sink
    assert sink.deletion_vectors_for("shop.orders")
    assert not sink.deletion_vectors_for("inventory.items")
    assert not sink.deletion_vectors_for("inventory.stock")
    document = with_key("sink.tables", {"inventory.items": {"deletion_vectors": "false"}})
    document["sink"]["deletion_vectors"] = True
    sink = parse_config(document).sink
    assert sink.deletion_vectors_for("shop.orders") and sink.deletion_vectors_for("inventory.stock")
    assert not sink.deletion_vectors_for("inventory.items")
    s3 = parse_config(with_key("sink.deletion_vectors", True) | {"sink": {"path": "s3a://lake-bucket/x",
                                                                           "deletion_vectors": True}}).sink
    assert s3.on_s3 and s3.deletion_vectors_for("shop.orders")


def test_change_data_feed_is_off_unless_the_pipeline_or_a_table_turns_it_on() -> None:
    assert not parse_config(VALID).sink.change_data_feed_for("shop.orders")
    overrides = {"shop.orders": {"change_data_feed": True, "deletion_vectors": True}}
    sink = parse_config(with_key("sink.tables", overrides)).sink
    assert sink.change_data_feed_for("shop.orders") and not sink.change_data_feed_for("inventory.stock")
    assert sink.deletion_vectors_for("shop.orders")
    document = with_key("sink.tables", {"inventory.items": {"change_data_feed": "false"}})
    document["sink"]["change_data_feed"] = "true"
    sink = parse_config(document).sink
    assert sink.change_data_feed_for("shop.orders") and sink.change_data_feed_for("inventory.stock")
    assert not sink.change_data_feed_for("inventory.items") and not sink.deletion_vectors_for("inventory.items")
    s3 = parse_config({**VALID, "sink": {"path": "s3a://lake-bucket/x", "change_data_feed": True}}).sink
    assert s3.on_s3 and s3.change_data_feed_for("shop.orders")


def test_table_modes_default_to_mirror_and_are_set_per_pipeline_or_table() -> None:
    assert parse_config(VALID).sink.mode_for("shop.orders") == "mirror"
    overrides = {"shop.orders": {"mode": "history"}, "inventory.items": {"deletion_vectors": True}}
    document = with_key("sink.tables", overrides)
    document["sink"]["mode"] = "soft_delete"
    sink = parse_config(document).sink
    assert sink.mode_for("shop.orders") == "history"
    assert sink.mode_for("inventory.items") == "soft_delete"
    assert sink.mode_for("inventory.stock") == "soft_delete"


def test_zero_dates_policy_reads_yaml_null_and_error() -> None:
    import yaml

    for text, policy in (("null", "null"), ("'null'", "null"), ("error", "error")):
        source = {**VALID["source"], **yaml.safe_load(f"zero_dates: {text}")}
        assert parse_config({**VALID, "source": source}).source.zero_dates == policy


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        ("pipeline", "bad name!", "pipeline"),
        ("source.host", None, "source.host"),
        ("source.port", "abc", "source.port"),
        ("source.port", 70000, "source.port"),
        ("source.server_id", None, "source.server_id"),
        ("source.tables", [], "source.tables"),
        ("source.tables", ["orders"], "source.tables[0]"),
        ("source.colour", "blue", "source.colour"),
        ("source.zero_dates", "zero", "source.zero_dates"),
        ("sink", None, "sink"),
        ("batch", {"max_events": 0}, "batch.max_events"),
        ("batch", {"max_seconds": "soon"}, "batch.max_seconds"),
        ("spark", {"conf": ["x"]}, "spark.conf"),
    ],
)
def test_bad_key_is_named(path: str, value: object, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_change(path, value))
    assert raised.value.key == key
    assert f"'{key}'" in str(raised.value)
    assert "remedy" in str(raised.value)


def with_key(path: str, value: object) -> dict[str, Any]:
    """VALID with `section.key` set to `value` (sections created as needed)."""
    document = {key: dict(section) if isinstance(section, dict) else section for key, section in VALID.items()}
    section, _, key = path.partition(".")
    if not key:
        document[section] = value
        return document
    if not isinstance(document.get(section), dict):
        # A partial offsets section needs its uri (the default applies only without the section).
        document[section] = {"uri": "/lake/_offsets"} if section == "offsets" else {}
    document[section][key] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "key", "problem"),
    [
        ("surprise", 1, "surprise", "unknown key"),
        ("pipeline", "", "pipeline", "must not be empty"),
        ("pipeline", ["x"], "pipeline", "must be a string"),
        ("source", "db.example.com", "source", "must be a mapping"),
        ("source.host", "", "source.host", "must not be empty"),
        ("source.port", 0, "source.port", "between 1 and 65535"),
        ("source.port", True, "source.port", "got a boolean"),
        ("source.user", None, "source.user", "is required"),
        ("source.user", {"name": "cdc"}, "source.user", "must be a string"),
        ("source.password", ["pw"], "source.password", "must be a string"),
        ("source.server_id", 0, "source.server_id", "between 1 and 4294967295"),
        ("source.server_id", 2**32, "source.server_id", "between 1 and 4294967295"),
        ("source.server_id", "five", "source.server_id", "must be an integer"),
        ("source.tables", "shop.orders", "source.tables", "non-empty list"),
        ("source.tables", ["shop.orders", 7], "source.tables[1]", "is not 'database.table'"),
        ("source.tables", ["shop."], "source.tables[0]", "is not 'database.table'"),
        ("source.connect_timeout", 0, "source.connect_timeout", "between 1 and 600"),
        ("source.connect_timeout", "slow", "source.connect_timeout", "must be an integer"),
        ("source.network_timeout_seconds", 0, "source.network_timeout_seconds", "between 1 and 3600"),
        ("source.network_timeout_seconds", "forever", "source.network_timeout_seconds", "must be an integer"),
        ("source.ssl_ca", "", "source.ssl_ca", "must not be empty"),
        ("source.ssl_ca", ["ca.pem"], "source.ssl_ca", "must be a string"),
        ("sink", "s3://lake", "sink", "must be a mapping"),
        ("sink.path", "", "sink.path", "must not be empty"),
        ("sink.format", "parquet", "sink.format", "unknown key"),
        ("offsets", ["s3://b"], "offsets", "must be a mapping"),
        ("offsets.uri", "", "offsets.uri", "must not be empty"),
        ("offsets.endpoint_url", "", "offsets.endpoint_url", "must not be empty"),
        ("offsets.region", ["eu-west-1"], "offsets.region", "must be a string"),
        ("offsets.lease_seconds", 1, "offsets.lease_seconds", "between 5 and 86400"),
        ("offsets.lease_seconds", "long", "offsets.lease_seconds", "must be an integer"),
        ("offsets.bucket", "b", "offsets.bucket", "unknown key"),
        ("spark", "local", "spark", "must be a mapping"),
        ("spark.master", "", "spark.master", "must not be empty"),
        ("spark.cores", 2, "spark.cores", "unknown key"),
        ("batch.max_events", 100_000_001, "batch.max_events", "between 1 and 100000000"),
        ("batch.max_seconds", 0, "batch.max_seconds", "between 1 and 86400"),
        ("batch.size", 5, "batch.size", "unknown key"),
        ("batch.apply_threads", 0, "batch.apply_threads", "between 1 and 256"),
        ("batch.apply_threads", "all", "batch.apply_threads", "must be an integer"),
        ("batch.append_inserts", "maybe", "batch.append_inserts", "must be true or false"),
        ("batch.writer", "deltars", "batch.writer", "is not one of: auto, spark, delta-rs"),
        ("batch.writer", True, "batch.writer", "is not one of"),
        ("batch.max_buffered_changes", 99, "batch.max_buffered_changes", "between 100 and"),
        ("batch.spill_path", "s3://bucket/spill", "batch.spill_path", "is a URI"),
        ("snapshot", 5, "snapshot", "must be a mapping"),
        ("snapshot.rows_per_partition", 0, "snapshot.rows_per_partition", "between 1 and"),
        ("snapshot.rows_per_partition", "many", "snapshot.rows_per_partition", "must be an integer"),
        ("snapshot.max_partitions", 10_001, "snapshot.max_partitions", "between 1 and 10000"),
        ("snapshot.parallel", True, "snapshot.parallel", "unknown key"),
        ("sink.deletion_vectors", "sometimes", "sink.deletion_vectors", "must be true or false"),
        ("sink.tables", ["shop.orders"], "sink.tables", "must be a mapping"),
        ("sink.tables", {"shop.order": {"deletion_vectors": True}}, "sink.tables.shop.order",
         "is not among source.tables"),
        ("sink.tables", {"inventory.*": {"deletion_vectors": True}}, "sink.tables.inventory.*",
         "is not a 'database.table' name"),
        ("sink.tables", {"shop.orders": True}, "sink.tables.shop.orders", "must be a mapping"),
        ("sink.tables", {"shop.orders": {"deletion_vector": True}}, "sink.tables.shop.orders.deletion_vector",
         "unknown key"),
        ("sink.tables", {"shop.orders": {"deletion_vectors": 1}}, "sink.tables.shop.orders.deletion_vectors",
         "must be true or false"),
        ("sink.change_data_feed", "yes", "sink.change_data_feed", "must be true or false"),
        ("sink.tables", {"shop.orders": {"change_data_feed": 2}}, "sink.tables.shop.orders.change_data_feed",
         "must be true or false"),
    ],
)
def test_every_key_is_checked_and_named(path: str, value: object, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_key(path, value))
    assert raised.value.key == key
    message = str(raised.value)
    assert message.startswith(f"config key '{key}': ") and problem in message, message
    assert "— remedy: " in message


def test_missing_pipeline_and_source_are_named() -> None:
    for missing in ("pipeline", "source"):
        document = {key: value for key, value in VALID.items() if key != missing}
        with pytest.raises(ConfigError) as raised:
            parse_config(document)
        assert raised.value.key == missing and "is required" in str(raised.value)


# -- catalog registration (docs/catalog.md) -------------------------------------------------------


def test_catalog_registration_is_off_by_default_and_changes_no_spark_setting() -> None:
    config = parse_config(VALID)
    assert not config.catalog.enabled
    assert config.catalog.name == "spark_catalog"
    assert config.catalog.database_name(database="shop", pipeline="p") == "shop"
    assert config.spark.conf == {}
    # A metastore named while registration is off changes nothing either: off means no catalog is touched.
    off = parse_config(with_key("catalog", {"enabled": False, "hive_metastore": {"derby_path": "/meta"}}))
    assert off.spark.conf == {}


def test_catalog_database_template_and_hive_metastore_settings(tmp_path: Path) -> None:
    document = with_key("catalog", {
        "enabled": "true", "database": "bronze_{database}_{pipeline}",
        "hive_metastore": {"derby_path": "meta", "warehouse": "wh"},
    })
    document["spark"] = {"conf": {"spark.sql.shuffle.partitions": "3"}}
    config = parse_config(document, base_dir=tmp_path)
    assert config.catalog.enabled
    assert config.catalog.database_name(database="shop", pipeline="p7") == "bronze_shop_p7"
    assert config.spark.conf == {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path / 'meta'};create=true",
        "spark.sql.warehouse.dir": str(tmp_path / "wh"),
        "spark.sql.shuffle.partitions": "3",
    }
    remote = parse_config(with_key("catalog", {
        "enabled": True, "hive_metastore": {"uris": "thrift://meta-1:9083,thrift://meta-2:9083"}}))
    assert remote.spark.conf == {"spark.sql.catalogImplementation": "hive",
                                 "spark.hadoop.hive.metastore.uris": "thrift://meta-1:9083,thrift://meta-2:9083"}
    unity = with_key("catalog", {"enabled": True, "name": "unity"})
    unity["spark"] = {"conf": {"spark.sql.catalog.unity": "io.unitycatalog.spark.UCSingleCatalog"}}
    assert parse_config(unity).catalog.name == "unity"


@pytest.mark.parametrize(
    ("catalog", "spark_conf", "key", "problem"),
    [
        ({"enabled": "yes"}, {}, "catalog.enabled", "must be true or false"),
        ({"enable": True}, {}, "catalog.enable", "unknown key"),
        ("on", {}, "catalog", "must be a mapping"),
        ({"name": "my-catalog"}, {}, "catalog.name", "is not a Spark catalog name"),
        ({"name": "unity"}, {}, "catalog.name", "no spark.conf key spark.sql.catalog.unity defines"),
        ({"database": "bronze-{database}"}, {}, "catalog.database", "does not make a database name"),
        ({"database": "{database.upper}"}, {}, "catalog.database", "does not make a database name"),
        ({"database": "{schema}"}, {}, "catalog.database", "does not make a database name"),
        ({"hive_metastore": {}}, {}, "catalog.hive_metastore", "exactly one of uris"),
        ({"hive_metastore": {"uris": "thrift://m:9083", "derby_path": "/m"}}, {}, "catalog.hive_metastore",
         "exactly one of uris"),
        ({"hive_metastore": {"uris": "http://m:9083"}}, {}, "catalog.hive_metastore.uris", "is not thrift://"),
        ({"hive_metastore": {"derby_path": "jdbc:derby://m/db"}}, {}, "catalog.hive_metastore.derby_path",
         "is not a local folder"),
        ({"hive_metastore": {"derby_path": "/m", "port": 1}}, {}, "catalog.hive_metastore.port", "unknown key"),
        ({"name": "unity", "hive_metastore": {"derby_path": "/m"}},
         {"spark.sql.catalog.unity": "io.unitycatalog.spark.UCSingleCatalog"}, "catalog.hive_metastore",
         "backs Spark's session catalog only"),
        ({"enabled": True, "hive_metastore": {"derby_path": "/m"}}, {"spark.sql.catalogImplementation": "in-memory"},
         "spark.conf.spark.sql.catalogImplementation", "catalog.hive_metastore sets it to 'hive'"),
    ],
)
def test_every_catalog_key_is_checked_and_named(
    catalog: object, spark_conf: dict[str, str], key: str, problem: str
) -> None:
    document = with_key("catalog", catalog)
    document["spark"] = {"conf": spark_conf}
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert raised.value.key == key
    message = str(raised.value)
    assert message.startswith(f"config key '{key}': ") and problem in message, message
    assert "— remedy: " in message


@pytest.mark.parametrize(
    ("document", "key"),
    [
        (with_key("sink.mode", "scd2"), "sink.mode"),
        (with_key("sink.tables", {"shop.orders": {"mode": "History"}}), "sink.tables.shop.orders.mode"),
        (with_key("sink.tables", {"shop.orders": {"mode": True}}), "sink.tables.shop.orders.mode"),
    ],
)
def test_an_unknown_table_mode_names_the_choices(document: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert raised.value.key == key
    assert "mirror, soft_delete, history" in str(raised.value) and "docs/table-modes.md" in raised.value.remedy


def test_maintenance_settings_are_per_table_with_documented_defaults() -> None:
    from cdc_lib.config.model import MaintenanceConfig

    assert parse_config(VALID).sink.maintenance_for("shop.orders") == MaintenanceConfig()
    overrides = {"shop.orders": {"maintenance": {"min_files_to_compact": 3, "vacuum_retention_hours": 0,
                                                 "zorder_by": "customer_id", "enabled": "false"}}}
    settings = parse_config(with_key("sink.tables", overrides)).sink.maintenance_for("shop.orders")
    assert (settings.min_files_to_compact, settings.vacuum_retention_hours, settings.zorder_by, settings.enabled) \
        == (3, 0.0, ("customer_id",), False)
    assert settings.checkpoint_every_commits == MaintenanceConfig().checkpoint_every_commits
    for bad, key in (({"vacuum_hours": 1}, "vacuum_hours"), ({"vacuum_retention_hours": -1}, "vacuum_retention_hours"),
                     ({"min_files_to_compact": 1}, "min_files_to_compact")):
        with pytest.raises(ConfigError, match=key):
            parse_config(with_key("sink.tables", {"shop.orders": {"maintenance": bad}}))
# -- metrics (docs/production.md "Metrics") ---------------------------------------------------------


def test_metrics_endpoint_is_off_by_default_and_reads_host_and_port() -> None:
    assert parse_config(VALID).metrics.host_port is None
    config = parse_config(with_key("metrics", {"address": "127.0.0.1:9464", "refresh_seconds": 2}))
    assert config.metrics.host_port == ("127.0.0.1", 9464)
    assert config.metrics.refresh_seconds == 2.0
    assert parse_config(with_key("metrics", {"address": "[::1]:0"})).metrics.host_port == ("::1", 0)


@pytest.mark.parametrize(
    ("metrics", "key"),
    [
        ({"address": "9464"}, "metrics.address"),
        ({"address": "localhost:port"}, "metrics.address"),
        ({"address": "127.0.0.1:70000"}, "metrics.address"),
        ({"refresh_seconds": 0}, "metrics.refresh_seconds"),
        ({"port": 9464}, "metrics.port"),
    ],
)
def test_every_metrics_key_is_checked_and_named(metrics: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(with_key("metrics", metrics))
    assert error.value.key == key
