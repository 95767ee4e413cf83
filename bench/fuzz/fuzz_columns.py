"""The fuzzer's column rules: drawn per table (`sink.tables.<t>.columns` / `.mask`), and the oracle's own reading
of them, written from docs/columns-and-masking.md alone (never `cdc_lib.changes.columns`): a bug shared by the
two would hide itself, so the oracle does not share binlake's code.

The oracle shapes the source as the server renders it (the fuzzer's canonical values: text for text, int for
whole numbers and YEAR, upper-case hex for binary) and compares that with Delta's values of the landed columns.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import Mapping, Sequence
from typing import Any

from bench.fuzz.fuzz_values import ColumnKind, SourceColumn

#: The environment variable holding the hash key of every drawn `hash` mask, and the key the fuzzer sets in it
#: (the CLI syncs the fuzzer starts inherit it). Fixed: a replayed round must land the same hashes.
KEY_ENV = "BINLAKE_FUZZ_MASK_KEY"
KEY = "fuzz-mask-key-2145"
#: Share of rounds that draw rules (with the `columns` family on), and of a drawing round's tables that get some.
ROUND_SHARE = 0.4
TABLE_SHARE = 0.75

# The docs' classes of source types (docs/columns-and-masking.md): which mask takes which column.
_TEXT = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_WHOLE = ("tinyint", "smallint", "mediumint", "int", "bigint", "year")
_BINARY = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")


def _kind_type(kind: ColumnKind) -> str:
    """The MySQL data type a fuzzer column kind creates (`varchar_latin1` → varchar, `int_unsigned` → int)."""
    return kind.name.split("_")[0]


def draw_rules(rng: random.Random, key: Sequence[str], columns: Mapping[str, ColumnKind]) -> dict[str, Any] | None:
    """One table's rules as the config document holds them, or None (the table lands every column in clear)."""
    if rng.random() >= TABLE_SHARE:
        return None
    others = list(columns)
    rules: dict[str, Any] = {}
    landed = others
    projection = rng.choice(("include", "exclude", "none"))
    if projection == "include" and others:
        landed = sorted(rng.sample(others, rng.randint(0, len(others) - 1)), key=others.index)
        # The key must be among the included columns (the docs' first refusal).
        rules["columns"] = {"include": [*key, *landed]}
    elif projection == "exclude" and len(others) > 1:
        left_out = sorted(rng.sample(others, rng.randint(1, len(others) - 1)), key=others.index)
        landed = [name for name in others if name not in left_out]
        rules["columns"] = {"exclude": left_out}
    masks: dict[str, Any] = {}
    for name in landed:
        if rng.random() < 0.55:
            mask = _draw_mask(rng, _kind_type(columns[name]))
            if mask is not None:
                masks[name] = mask
    if masks:
        rules["mask"] = masks
    return rules or None


def _draw_mask(rng: random.Random, data_type: str) -> dict[str, Any] | None:
    choices = ["redact_null"]
    if data_type in _TEXT or data_type in _WHOLE or data_type in _BINARY:
        choices += ["hash", "hash"]
    if data_type in _TEXT:
        choices += ["redact_text", "truncate", "partial", "partial"]
    choice = rng.choice(choices)
    if choice == "hash":
        return {"hash": {"key_env": KEY_ENV}}
    if choice == "redact_null":
        return {"redact": None}
    if choice == "redact_text":
        return {"redact": rng.choice(("x", "hidden", "é😀", ""))}
    if choice == "truncate":
        return {"truncate": rng.randint(0, 4)}
    return {"partial": {"keep_first": rng.randint(0, 3), "keep_last": rng.randint(0, 3),
                        "fill": rng.choice(("*", "#", "é"))}}


def landed_columns(columns: Sequence[SourceColumn], rules: Mapping[str, Any] | None) -> list[SourceColumn]:
    """The source's columns (as they are now) that the rules land: an include list lands only what it names (a
    column added since is not landed), an exclude list every column but those it names (one added since is)."""
    if not rules or "columns" not in rules:
        return list(columns)
    projection = rules["columns"]
    if "include" in projection:
        return [column for column in columns if column.name in projection["include"]]
    return [column for column in columns if column.name not in projection["exclude"]]


def masked(column: SourceColumn, value: Any, rules: Mapping[str, Any] | None) -> Any:
    """The value Delta must hold for a canonical source value of `column`."""
    spec = (rules or {}).get("mask", {}).get(column.name)
    if spec is None:
        return value
    kind, argument = next(iter(spec.items()))
    if kind == "redact":
        return argument  # the constant (or NULL) also where the source is NULL
    if value is None:
        return None
    if kind == "hash":
        return hmac.new(KEY.encode(), _hash_input(column, value), hashlib.sha256).hexdigest()
    if kind == "truncate":
        return value[:argument]
    first, last, fill = argument["keep_first"], argument["keep_last"], argument["fill"]
    hidden = len(value) - first - last
    if hidden <= 0:
        # "a value too short to hide anything becomes all fill": as many fill characters as it has.
        return fill * len(value)
    return value[:first] + fill * hidden + value[len(value) - last:]


def _hash_input(column: SourceColumn, value: Any) -> bytes:
    """The docs' hash input: the text's UTF-8 bytes, the number's decimal digits, the bytes themselves."""
    if column.data_type in _BINARY:
        return bytes.fromhex(value)  # the fuzzer reads binary as HEX()
    if column.data_type in _WHOLE:
        return str(int(value)).encode()
    return str(value).encode("utf-8")


def describe(rules: Mapping[str, Any]) -> str:
    """The rules on one line, for a round's script."""
    parts = []
    if "columns" in rules:
        (kind, names), = rules["columns"].items()
        parts.append(f"{kind} {','.join(names) or '-'}")
    for name, spec in rules.get("mask", {}).items():
        (kind, argument), = spec.items()
        parts.append(f"{name}: {kind}" + ("" if kind == "hash" else f" {argument!r}"))
    if "filter" in rules:
        parts.append(f"filter {rules['filter']}")
    return "; ".join(parts)


__all__ = ["KEY", "KEY_ENV", "ROUND_SHARE", "describe", "draw_rules", "landed_columns", "masked"]
