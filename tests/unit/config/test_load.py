"""Reading a config file: which file, `${VAR}` from the environment, the errors of a missing or broken file."""

from pathlib import Path

import pytest

from cdc_lib.config.load import expand_env, load_config
from cdc_lib.errors import ConfigError


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
