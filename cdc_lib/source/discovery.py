"""The tables a pipeline config names: explicit `db.table` entries, and `db.*` patterns expanded on the server.

Explicit names need no connection, so a config that lists its tables loads
without touching MySQL. A pattern can only be expanded by asking the server;
`table_names` does that once and reports a failure against the config key.
"""

from __future__ import annotations

from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import BinlakeError, ConfigError
from cdc_lib.source import server as mysql


def is_pattern(entry: str) -> bool:
    return "*" in entry


def explicit_tables(config: PipelineConfig) -> list[str]:
    """The `db.table` entries of `source.tables`, in config order, without duplicates."""
    names: list[str] = []
    for entry in config.source.tables:
        if not is_pattern(entry) and entry not in names:
            names.append(entry)
    return names


def table_patterns(config: PipelineConfig) -> list[tuple[int, str]]:
    """The `db.*`-style entries of `source.tables` with their index in the list."""
    return [(index, entry) for index, entry in enumerate(config.source.tables) if is_pattern(entry)]


def expand_patterns(config: PipelineConfig) -> list[str]:
    """Every table the config selects, patterns expanded on the server (explicit ones first).

    Raises:
        BinlakeError: the server cannot be reached or a named table is missing.
    """
    with mysql.source_connection(config.source) as connection:
        refs = mysql.resolve_tables(connection, config.source.tables)
    resolved = [ref.name for ref in refs]
    explicit = explicit_tables(config)
    return explicit + sorted(name for name in resolved if name not in explicit)


def table_names(config: PipelineConfig) -> list[str]:
    """The tables to build assets for.

    Explicit names are taken as written. Patterns are expanded on the server
    now; if that fails the error names the pattern's config key, so a load of
    the definitions fails with something a person can fix.

    Raises:
        ConfigError: a pattern could not be expanded.
    """
    patterns = table_patterns(config)
    if not patterns:
        return explicit_tables(config)
    index, pattern = patterns[0]
    try:
        names = expand_patterns(config)
    except BinlakeError as error:
        raise ConfigError(
            f"source.tables[{index}]",
            f"pattern '{pattern}' must be expanded on the server when the definitions load, and that failed: "
            f"{error.cause}",
            remedy=f"make the server reachable, or list the tables explicitly instead of '{pattern}'",
        ) from None
    if not names:
        raise ConfigError(f"source.tables[{index}]", f"pattern '{pattern}' matches no table on the server")
    return names
