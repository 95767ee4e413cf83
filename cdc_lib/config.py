"""Pipeline configuration: a YAML file, `${VAR}` expanded from the environment, validated once."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from cdc_lib.errors import ConfigError

CONFIG_ENV_VAR = "BINLAKE_CONFIG"
_VAR_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_$-]+$")
_PATTERN_PATTERN = re.compile(r"^[A-Za-z0-9_$-]+\.(\*|[A-Za-z0-9_$*-]+)$")

ZeroDatePolicy = Literal["null", "error"]


@dataclass(frozen=True)
class SourceConfig:
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    server_id: int
    tables: tuple[str, ...]
    connect_timeout: int = 10
    ssl_ca: str | None = None
    #: MySQL zero and partial dates ('0000-00-00', '2024-00-10'): stored as NULL, or stop the table.
    zero_dates: ZeroDatePolicy = "null"

    def redacted(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": "***"}


@dataclass(frozen=True)
class SinkConfig:
    path: str

    def table_path(self, database: str, table: str) -> str:
        return f"{self.path.rstrip('/')}/{database}/{table}"


@dataclass(frozen=True)
class OffsetsConfig:
    uri: str
    endpoint_url: str | None = None
    region: str | None = None
    lease_seconds: int = 600


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SnapshotConfig:
    rows_per_partition: int = 500_000
    max_partitions: int = 8


@dataclass(frozen=True)
class BatchConfig:
    max_events: int = 100_000
    max_seconds: float = 60.0


@dataclass(frozen=True)
class PipelineConfig:
    pipeline: str
    source: SourceConfig
    sink: SinkConfig
    offsets: OffsetsConfig
    spark: SparkConfig
    batch: BatchConfig
    snapshot: SnapshotConfig
    config_path: Path | None = None


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
    raw = explicit or environ.get(CONFIG_ENV_VAR)
    if not raw:
        raise ConfigError(
            "--config", "no config file given", remedy=f"pass --config PATH or set {CONFIG_ENV_VAR}=PATH"
        )
    path = Path(raw)
    if not path.is_file():
        raise ConfigError("--config", f"file {path} does not exist", remedy="point --config at an existing YAML file")
    return path


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


def parse_config(document: Any, *, base_dir: Path | None = None) -> PipelineConfig:
    root = _mapping(document, "<root>")
    _reject_unknown(root, "", {"pipeline", "source", "sink", "offsets", "spark", "batch", "snapshot"})
    pipeline = _string(root, "pipeline", "")
    if not _NAME_PATTERN.match(pipeline):
        raise ConfigError("pipeline", f"'{pipeline}' may only hold letters, digits, '_' and '-'")
    source_doc = _mapping(_required(root, "source", ""), "source")
    _reject_unknown(
        source_doc, "source.", {"host", "port", "user", "password", "server_id", "tables", "connect_timeout", "ssl_ca",
                                 "zero_dates"}
    )
    tables_raw = _required(source_doc, "tables", "source.")
    if not isinstance(tables_raw, list) or not tables_raw:
        raise ConfigError("source.tables", "must be a non-empty list such as [shop.orders, 'inventory.*']")
    tables: list[str] = []
    for index, entry in enumerate(tables_raw):
        if not isinstance(entry, str) or not _PATTERN_PATTERN.match(entry):
            raise ConfigError(f"source.tables[{index}]", f"'{entry}' is not 'database.table' or 'database.*'")
        tables.append(entry)
    source = SourceConfig(
        host=_string(source_doc, "host", "source."),
        port=_integer(source_doc, "port", "source.", default=3306, low=1, high=65535),
        user=_string(source_doc, "user", "source."),
        password=_string(source_doc, "password", "source.", default="", allow_empty=True),
        server_id=_integer(source_doc, "server_id", "source.", low=1, high=2**32 - 1),
        tables=tuple(tables),
        connect_timeout=_integer(source_doc, "connect_timeout", "source.", default=10, low=1, high=600),
        ssl_ca=_optional_string(source_doc, "ssl_ca", "source."),
        zero_dates=_zero_date_policy(source_doc.get("zero_dates")),
    )
    sink_doc = _mapping(_required(root, "sink", ""), "sink")
    _reject_unknown(sink_doc, "sink.", {"path"})
    sink = SinkConfig(path=_local_or_uri(_string(sink_doc, "path", "sink."), base_dir))
    offsets_doc = _mapping(root.get("offsets") or {}, "offsets")
    offsets_doc = {"uri": f"{sink.path.rstrip('/')}/_offsets", **offsets_doc}
    _reject_unknown(offsets_doc, "offsets.", {"uri", "endpoint_url", "region", "lease_seconds"})
    offsets = OffsetsConfig(
        uri=_local_or_uri(_string(offsets_doc, "uri", "offsets."), base_dir),
        endpoint_url=_optional_string(offsets_doc, "endpoint_url", "offsets."),
        region=_optional_string(offsets_doc, "region", "offsets."),
        lease_seconds=_integer(offsets_doc, "lease_seconds", "offsets.", default=600, low=5, high=86_400),
    )
    spark_doc = _mapping(root.get("spark") or {}, "spark")
    _reject_unknown(spark_doc, "spark.", {"master", "conf"})
    conf_doc = _mapping(spark_doc.get("conf") or {}, "spark.conf")
    spark = SparkConfig(
        master=_string(spark_doc, "master", "spark.", default="local[*]"),
        conf={str(key): str(value) for key, value in conf_doc.items()},
    )
    batch_doc = _mapping(root.get("batch") or {}, "batch")
    _reject_unknown(batch_doc, "batch.", {"max_events", "max_seconds"})
    batch = BatchConfig(
        max_events=_integer(batch_doc, "max_events", "batch.", default=100_000, low=1, high=100_000_000),
        max_seconds=float(_integer(batch_doc, "max_seconds", "batch.", default=60, low=1, high=86_400)),
    )
    snapshot_doc = _mapping(root.get("snapshot") or {}, "snapshot")
    _reject_unknown(snapshot_doc, "snapshot.", {"rows_per_partition", "max_partitions"})
    snapshot = SnapshotConfig(
        rows_per_partition=_integer(
            snapshot_doc, "rows_per_partition", "snapshot.", default=500_000, low=1, high=10**9
        ),
        max_partitions=_integer(snapshot_doc, "max_partitions", "snapshot.", default=8, low=1, high=10_000),
    )
    return PipelineConfig(
        pipeline=pipeline, source=source, sink=sink, offsets=offsets, spark=spark, batch=batch, snapshot=snapshot
    )


def _zero_date_policy(value: Any) -> ZeroDatePolicy:
    # YAML reads a bare `null` as None: both spellings mean the default.
    if value is None or value == "null":
        return "null"
    if value == "error":
        return "error"
    raise ConfigError("source.zero_dates", f"'{value}' is not one of: null, error")


def _local_or_uri(value: str, base_dir: Path | None) -> str:
    if "://" in value or base_dir is None or Path(value).is_absolute():
        return value
    return str((base_dir / value).resolve())


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping, got {type(value).__name__}")
    return value


def _reject_unknown(document: Mapping[str, Any], prefix: str, known: set[str]) -> None:
    for key in document:
        if key not in known:
            raise ConfigError(f"{prefix}{key}", f"unknown key (known: {', '.join(sorted(known))})")


def _required(document: Mapping[str, Any], key: str, prefix: str) -> Any:
    if key not in document or document[key] is None:
        raise ConfigError(f"{prefix}{key}", "is required")
    return document[key]


def _string(
    document: Mapping[str, Any], key: str, prefix: str, *, default: str | None = None, allow_empty: bool = False
) -> str:
    if document.get(key) is None:
        if default is None:
            raise ConfigError(f"{prefix}{key}", "is required")
        return default
    value = document[key]
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{prefix}{key}", f"must be a string, got {type(value).__name__}")
    text = str(value)
    if not text and not allow_empty:
        raise ConfigError(f"{prefix}{key}", "must not be empty")
    return text


def _optional_string(document: Mapping[str, Any], key: str, prefix: str) -> str | None:
    return _string(document, key, prefix) if document.get(key) is not None else None


def _integer(
    document: Mapping[str, Any], key: str, prefix: str, *, default: int | None = None, low: int, high: int
) -> int:
    if document.get(key) is None:
        if default is None:
            raise ConfigError(f"{prefix}{key}", "is required")
        return default
    value = document[key]
    if isinstance(value, bool):
        raise ConfigError(f"{prefix}{key}", "must be an integer, got a boolean")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{prefix}{key}", f"must be an integer, got '{value}'") from None
    if not low <= number <= high:
        raise ConfigError(f"{prefix}{key}", f"must be between {low} and {high}, got {number}")
    return number
