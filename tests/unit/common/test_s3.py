"""An s3a:// sink as configuration: keys validated, offsets following the sink, Spark's s3a settings, jar versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from cdc_lib.sink.spark.jars import aws_sdk_version, pyspark_hadoop_version, s3a_artifacts
from cdc_lib.sink.spark.session import s3a_conf, sink_conf

SOURCE = {"host": "127.0.0.1", "user": "cdc", "password": "pw", "server_id": 5701, "tables": ["shop.orders"]}


def config(sink: dict, **sections: object) -> PipelineConfig:
    return parse_config({"pipeline": "shop", "source": SOURCE, "sink": sink, **sections})


def test_s3a_sink_settings_and_offsets_follow_the_sink() -> None:
    parsed = config({"path": "s3a://lake-bucket/cdc", "endpoint_url": "http://127.0.0.1:9000/", "region": "eu-west-1",
                     "access_key_id": "AKIAEXAMPLE", "secret_access_key": "hush"})
    assert parsed.sink.on_s3 and parsed.sink.s3.endpoint_url == "http://127.0.0.1:9000"
    assert parsed.sink.s3.path_style, "a custom endpoint defaults to path-style URLs"
    assert "hush" not in repr(parsed) and "AKIAEXAMPLE" not in repr(parsed)
    assert parsed.offsets.uri == "s3a://lake-bucket/cdc/_offsets"
    assert (parsed.offsets.endpoint_url, parsed.offsets.region) == ("http://127.0.0.1:9000", "eu-west-1")
    assert parsed.offsets.credentials == parsed.sink.s3.credentials
    elsewhere = config({"path": "s3a://lake-bucket/cdc", "endpoint_url": "http://127.0.0.1:9000"},
                       offsets={"uri": "s3://other-bucket/offsets"})
    assert elsewhere.offsets.endpoint_url is None, "another bucket is not assumed to live on the sink's server"


@pytest.mark.parametrize(
    ("sink", "key", "hint"),
    [
        ({"path": "s3://lake-bucket/cdc"}, "sink.path", "s3a://lake-bucket/cdc"),
        ({"path": "gs://lake-bucket/cdc"}, "sink.path", "s3a://"),
        ({"path": "s3a://Bad_Bucket/cdc"}, "sink.path", "bucket"),
        ({"path": "s3a://lake-bucket", "endpoint_url": "127.0.0.1:9000"}, "sink.endpoint_url", "http://"),
        ({"path": "s3a://lake-bucket", "region": "EU West"}, "sink.region", "eu-west-1"),
        ({"path": "s3a://lake-bucket", "path_style_access": "sometimes"}, "sink.path_style_access", "true or false"),
        ({"path": "s3a://lake-bucket", "access_key_id": "AKIAEXAMPLE"}, "sink.secret_access_key", "neither"),
        ({"path": "/lake", "endpoint_url": "http://127.0.0.1:9000"}, "sink.endpoint_url", "remove"),
        ({"path": "s3a://lake-bucket", "endpoint": "http://x"}, "sink.endpoint", "known:"),
    ],
)
def test_bad_s3_sink_key_is_named_with_a_remedy(sink: dict, key: str, hint: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(sink)
    assert raised.value.key == key
    assert hint in str(raised.value) and "remedy:" in str(raised.value)
    assert "AKIAEXAMPLE" not in str(raised.value)


def test_s3a_conf_is_per_bucket_and_takes_credentials_from_config_then_environment() -> None:
    sink = config({"path": "s3a://lake-bucket/cdc", "endpoint_url": "http://127.0.0.1:9000",
                   "access_key_id": "AKIAEXAMPLE", "secret_access_key": "hush"}).sink
    conf = s3a_conf(sink, environ={"AWS_ACCESS_KEY_ID": "from-env", "AWS_SECRET_ACCESS_KEY": "env-secret"})
    prefix = "spark.hadoop.fs.s3a.bucket.lake-bucket."
    assert conf == {
        f"{prefix}endpoint": "http://127.0.0.1:9000",
        f"{prefix}endpoint.region": "us-east-1",
        f"{prefix}path.style.access": "true",
        f"{prefix}connection.ssl.enabled": "false",
        f"{prefix}access.key": "AKIAEXAMPLE",
        f"{prefix}secret.key": "hush",
        f"{prefix}aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        f"{prefix}connection.establish.timeout": "5s",
        f"{prefix}connection.timeout": "60s",
        f"{prefix}connection.request.timeout": "60s",
    }
    from_env = s3a_conf(config({"path": "s3a://lake-bucket/cdc"}).sink,
                        environ={"AWS_ACCESS_KEY_ID": "from-env", "AWS_SECRET_ACCESS_KEY": "s",
                                 "AWS_SESSION_TOKEN": "t", "AWS_REGION": "eu-central-1"})
    assert from_env[f"{prefix}access.key"] == "from-env" and from_env[f"{prefix}session.token"] == "t"
    assert from_env[f"{prefix}endpoint.region"] == "eu-central-1"
    assert from_env[f"{prefix}path.style.access"] == "false", "AWS itself: virtual-host URLs"
    assert "endpoint" not in {key.removeprefix(prefix) for key in from_env}
    bare = s3a_conf(config({"path": "s3a://lake-bucket/cdc"}).sink, environ={})
    assert not any("key" in key for key in bare), "no credentials: S3A's own chain (instance role) decides"
    assert s3a_conf(config({"path": "/lake"}).sink, environ={}) == {}


def test_user_spark_conf_wins_over_sink_settings() -> None:
    sink = config({"path": "s3a://lake.bucket/cdc", "endpoint_url": "http://127.0.0.1:9000",
                   "region": "eu-west-1"}).sink
    user = {"spark.hadoop.fs.s3a.endpoint": "https://s3.example.com",
            "spark.hadoop.fs.s3a.bucket.lake.bucket.path.style.access": "false"}
    prefix = "spark.hadoop.fs.s3a.bucket.lake.bucket."
    ours = sink_conf(sink, user)
    assert f"{prefix}endpoint" not in ours and f"{prefix}path.style.access" not in ours
    assert ours[f"{prefix}endpoint.region"] == "eu-west-1"
    assert ours[f"{prefix}connection.ssl.enabled"] == "false"
    assert sink_conf(config({"path": "/lake"}).sink, user) == {}


def test_s3a_jars_match_the_hadoop_inside_pyspark() -> None:
    import pyspark

    hadoop = pyspark_hadoop_version()
    assert (Path(pyspark.__file__).parent / "jars" / f"hadoop-client-api-{hadoop}.jar").is_file()
    hadoop_aws, bundle = s3a_artifacts()
    assert (hadoop_aws.artifact, hadoop_aws.version) == ("hadoop-aws", hadoop)
    assert bundle.group == "software.amazon.awssdk" and bundle.version == aws_sdk_version(hadoop)
    assert bundle.version.startswith("2.")


def test_one_network_bound_reaches_every_client() -> None:
    """`source.network_timeout_seconds` bounds MySQL (pymysql, JDBC), boto3, delta-rs and S3A waits alike."""
    from cdc_lib.common.s3 import S3Settings, s3_client
    from cdc_lib.sink.delta_rs.writer import storage_options
    from cdc_lib.sink.storage import S3SinkStorage
    from cdc_lib.snapshot.jdbc_read import jdbc_url
    from cdc_lib.source.server import connection_settings

    default = config({"path": "/lake"})
    assert default.source.network_timeout_seconds == 60, "the documented default"
    parsed = config({"path": "s3a://lake-bucket/cdc", "endpoint_url": "http://127.0.0.1:9000"},
                    source={**SOURCE, "network_timeout_seconds": 7})
    settings = connection_settings(parsed.source)
    assert (settings["read_timeout"], settings["write_timeout"], settings["connect_timeout"]) == (7, 7, 7)
    assert "socketTimeout=7000" in jdbc_url(parsed.source) and "connectTimeout=7000" in jdbc_url(parsed.source)
    assert parsed.sink.s3.timeout_seconds == 7 and parsed.offsets.timeout_seconds == 7
    client_config = s3_client(parsed.sink.s3).meta.config
    assert (client_config.connect_timeout, client_config.read_timeout) == (5, 7)
    options = storage_options(parsed.sink.path, S3SinkStorage(parsed.sink.s3))
    assert options is not None and (options["timeout"], options["connect_timeout"]) == ("7s", "5s")
    s3a = s3a_conf(parsed.sink)
    assert s3a["spark.hadoop.fs.s3a.bucket.lake-bucket.connection.timeout"] == "7s"
    assert s3a["spark.hadoop.fs.s3a.bucket.lake-bucket.connection.establish.timeout"] == "5s"
    assert S3Settings().read_seconds == 30, "settings made outside a config keep boto3's former bounds"
