from pathlib import Path

import pytest

from cdc_lib.config import expand_env, load_config, parse_config
from cdc_lib.errors import ConfigError

VALID = {
    "pipeline": "shop",
    "source": {"host": "127.0.0.1", "port": 3306, "user": "cdc", "password": "pw", "server_id": 5701,
               "tables": ["shop.orders", "inventory.*"]},
    "sink": {"path": "/lake"},
}


def with_change(path: str, value: object) -> dict:
    document = {**VALID, "source": dict(VALID["source"]), "sink": dict(VALID["sink"])}
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


def test_env_expansion_and_missing_variable() -> None:
    assert expand_env("a ${X} ${Y:-dflt}", {"X": "1"}) == "a 1 dflt"
    with pytest.raises(ConfigError, match="MISSING_VAR"):
        expand_env("${MISSING_VAR}", {})


def test_load_config_from_env_path(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "pipeline: shop\nsource: {host: h, user: u, password: '${PW}', server_id: 1, tables: [a.b]}\n"
        "sink: {path: ./lake}\n"
    )
    config = load_config(environ={"BINLAKE_CONFIG": str(path), "PW": "secret"})
    assert config.source.password == "secret"
    assert config.sink.path == str(tmp_path / "lake")


def test_missing_config_names_remedy(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="BINLAKE_CONFIG"):
        load_config(environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", environ={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("pipeline: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, environ={})
