"""Reading pipeline config files: which file (`--config`, `$BINLAKE_CONFIG`, a deployment's several), `${VAR}`
expanded from the environment, then validated once (`parse`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError

CONFIG_ENV_VAR = "BINLAKE_CONFIG"
_VAR_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """Replace `${VAR}` and `${VAR:-default}`; a missing variable without default is an error."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"${{{name}}}",
            "environment variable is not set",
            remedy=f"export {name}=... before running binlake",
        )

    return _VAR_PATTERN.sub(substitute, text)


def resolve_config_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    raw = os.fspath(explicit) if explicit else environ.get(CONFIG_ENV_VAR)
    if not raw:
        raise ConfigError(
            "--config", "no config file given", remedy=f"pass --config PATH or set {CONFIG_ENV_VAR}=PATH"
        )
    path = Path(raw)
    if not explicit and (os.pathsep in raw or path.is_dir()):
        raise ConfigError(
            CONFIG_ENV_VAR, f"'{raw}' names several pipelines (a Dagster deployment's list)",
            remedy="pass --config PATH with the one pipeline to work on",
        )
    if not path.is_file():
        raise ConfigError("--config", f"file {path} does not exist", remedy="point --config at an existing YAML file")
    return path


def resolve_config_paths(raw: str | None) -> list[Path]:
    """The config files of a deployment: `raw` is one file, a folder of `*.yaml`/`*.yml`, or several of either
    separated by `os.pathsep` (':' on Linux).

    Raises:
        ConfigError: when nothing is named, a named path is missing, or a folder holds no config.
    """
    if not raw or not raw.strip():
        raise ConfigError(
            CONFIG_ENV_VAR, "no config file given",
            remedy=f"set {CONFIG_ENV_VAR}=PATH (a file, a folder of *.yaml, or several joined by '{os.pathsep}')",
        )
    paths: list[Path] = []
    for entry in (part.strip() for part in raw.split(os.pathsep)):
        if not entry:
            continue
        path = Path(entry)
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise ConfigError(CONFIG_ENV_VAR, f"folder {path} holds no *.yaml file", remedy="add a pipeline config")
            paths.extend(found)
        elif path.is_file():
            paths.append(path)
        else:
            raise ConfigError(
                CONFIG_ENV_VAR, f"{path} does not exist", remedy="name existing config files or folders"
            )
    return paths


def load_configs(raw: str | None = None, *, environ: Mapping[str, str] | None = None) -> list[PipelineConfig]:
    """Every pipeline of a deployment (see `resolve_config_paths`; default `$BINLAKE_CONFIG`), each validated.

    Raises:
        ConfigError: for the first bad file, or when two files name the same pipeline.
    """
    environ = os.environ if environ is None else environ
    configs: list[PipelineConfig] = []
    seen: dict[str, Path] = {}
    for path in resolve_config_paths(raw if raw is not None else environ.get(CONFIG_ENV_VAR)):
        config = load_config(path, environ=environ)
        if config.pipeline in seen:
            raise ConfigError(
                "pipeline", f"'{config.pipeline}' is named by both {seen[config.pipeline]} and {path}",
                remedy="give each config file its own pipeline name (offsets and Delta commits are keyed by it)",
            )
        seen[config.pipeline] = path
        configs.append(config)
    return configs


def load_config(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> PipelineConfig:
    """Read, expand and validate a pipeline config file.

    Raises:
        ConfigError: naming the first bad key.
    """
    environ = os.environ if environ is None else environ
    resolved = resolve_config_path(path, environ)
    try:
        document = yaml.safe_load(expand_env(resolved.read_text(), environ))
    except yaml.YAMLError as exc:
        raise ConfigError("<file>", f"{resolved} is not valid YAML ({exc.__class__.__name__})") from None
    config = parse_config(document, base_dir=resolved.parent)
    return PipelineConfig(**{**config.__dict__, "config_path": resolved})


def config_from_document(
    document: Any, *, base_dir: Path | None = None, environ: Mapping[str, str] | None = None
) -> PipelineConfig:
    """A pipeline config given as parsed YAML (a Dagster component's attributes) rather than as a file.

    `${VAR}` is expanded in every string, then the document is validated as a file's would be: the same keys,
    the same errors. A number or flag given as `${VAR}` stays a string, which the validation reads as a file's.

    Raises:
        ConfigError: naming the first bad key.
    """
    environ = os.environ if environ is None else environ
    return parse_config(_expand_strings(document, environ), base_dir=base_dir)


def _expand_strings(value: Any, environ: Mapping[str, str]) -> Any:
    # Expanding the strings of a parsed document, not its YAML text: a value cannot change the YAML around it
    # (a password such as '0123' or 'a: b' stays the string it is).
    if isinstance(value, str):
        return expand_env(value, environ)
    if isinstance(value, Mapping):
        return {key: _expand_strings(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_strings(item, environ) for item in value]
    return value
