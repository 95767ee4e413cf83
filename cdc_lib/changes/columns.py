"""Column projection and masking: which source columns a table lands, and in what form (docs/columns-and-masking.md).

    sink.tables.<db.t>.columns: {include: [...]} | {exclude: [...]}
    sink.tables.<db.t>.mask.<column>: {hash: {key_env: VAR}} | {redact: null | constant} | {truncate: N}
                                    | {partial: {keep_first: N, keep_last: M, fill: '*'}}
    sink.tables.<db.t>.types.<column>: boolean       (a TINYINT(1) column of 0/1 as a Delta boolean; docs/types.md)

`ColumnShape` is built from a table's source schema and its rules, and is the one place both roads shape a row:
the snapshot selects only `source_names` over JDBC and runs `mask_of` on each masked column in Spark right after
the read (`cdc_lib.snapshot.jdbc_read`); the binlog road decodes the full row image (the binlog holds every
column) and `apply` cuts and masks it inside the decoder, before the fold, a spill, or any message sees the row
(`cdc_lib.binlog.table_rows`). The same Python function masks a value on both roads, so a hash is the same value
whichever road wrote it. The pipeline state keeps the source schema (the decoder needs it); the sink sees `schema`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc_lib.config.model import ColumnMask, ColumnRules
from cdc_lib.errors import BooleanValueError, ColumnRulesError
from cdc_lib.model.row_filter import BoundFilter, bind_filter
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import ColumnInfo

Row = tuple[Any, ...]
Mask = Callable[[Any], Any]

_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
_INTEGER = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
#: A hash is taken over the value as both roads hold it; only types whose value is the same object on both (text,
#: whole numbers, bytes) are hashed, so a hash from the snapshot equals the binlog's for the same source value.
_HASHABLE = _TEXT | _INTEGER | _BINARY
#: The Delta type of a hashed column: 64 lowercase hex digits of HMAC-SHA256.
HASH_COLUMN_TYPE = "char(64)"


@dataclass(frozen=True)
class ColumnShape:
    """One table's projection and masks, checked against its source schema."""

    source: TableSchema
    #: The schema the sink writes: kept columns in source order, a hashed column as CHAR(64) text.
    schema: TableSchema
    #: Positions in the source row of the kept columns.
    kept: tuple[int, ...]
    #: Position in the shaped row → its mask.
    masks: Mapping[int, Mask]
    #: The table's row filter (docs/row-filters.md), over source rows: the snapshot's WHERE, and the test each
    #: binlog image passes before `apply` (so it sees clear values). None: every row.
    row_filter: BoundFilter | None = None

    @property
    def source_names(self) -> tuple[str, ...]:
        """The source columns read (the snapshot's JDBC SELECT list)."""
        return self.schema.column_names

    def mask_of(self, name: str) -> Mask | None:
        index = self.schema.column_names.index(name)
        return self.masks.get(index)

    def apply(self, row: Row) -> Row:
        """A source row (in source schema order) as the sink holds it."""
        shaped = [row[index] for index in self.kept]
        for index, mask in self.masks.items():
            value = shaped[index]
            if value is not None or self._redacts(mask):
                shaped[index] = mask(value)
        return tuple(shaped)

    @staticmethod
    def _redacts(mask: Mask) -> bool:
        return getattr(mask, "redact", False) is True


def with_ignored(rules: ColumnRules | None, ignored: tuple[str, ...]) -> ColumnRules | None:
    """`rules` with the columns `schema_policy: ignore_new_columns` ignores (`TableState.ignored_columns`) left out
    as an exclude list leaves them out; an include list already leaves out any column added after it was written."""
    if not ignored:
        return rules
    rules = rules or ColumnRules()
    if rules.include is not None:
        return rules
    return replace(rules, exclude=(*rules.exclude, *(name for name in ignored if name not in rules.exclude)))


def column_shape(schema: TableSchema, rules: ColumnRules | None, *, strict: bool = True,
                 environ: Mapping[str, str] | None = None, row_filter: str | None = None) -> ColumnShape | None:
    """`schema` shaped by `rules` and `row_filter`; None when the table has neither (every row and column, in clear).

    The row filter is checked against the schema whether `strict` or not: a filter whose column a DDL dropped or
    renamed cannot say which rows land, so the table stops (ColumnRulesError) instead of guessing.

    `strict`: a rule naming a column the schema lacks is refused (a snapshot, a batch); not strict (a schema change,
    a back-fill's part of the columns), such a rule does not apply: a column dropped from the source is no longer
    left out or masked, and the schema change itself decides what its drop means.

    Raises:
        ColumnRulesError: a rule names a column the table lacks, leaves out or masks a key column, masks a column
            of a type its mask does not fit, or a hash key's environment variable is unset; the row filter names a
            column the table lacks or compares one outside its subset.
    """
    bound = None if row_filter is None else bind_filter(row_filter, schema)
    if rules is None:
        if bound is None:
            return None
        rules = ColumnRules()
    table = schema.table.name
    names = schema.column_names
    for name in (*(rules.include or ()), *rules.exclude, *rules.mask, *rules.types):
        if strict and name not in names:
            raise ColumnRulesError(
                f"the column rules name column '{name}', which the table does not have (columns: {', '.join(names)})",
                remedy=f"fix the name under sink.tables.{table}", table=table,
            )
    if rules.include is not None:
        dropped = [name for name in names if name not in rules.include]
    else:
        dropped = list(rules.exclude)
    for name in schema.primary_key:
        if name in dropped:
            raise ColumnRulesError(
                f"primary key column '{name}' is left out: Delta rows are merged by the key, so every key column lands",
                remedy=f"keep '{name}' under sink.tables.{table}.columns", table=table,
            )
        if name in rules.mask:
            raise ColumnRulesError(
                f"primary key column '{name}' is masked: the key is what binlake merges by and splits snapshots on, "
                "and a mask would rewrite every key when its secret or rule changes",
                remedy=f"remove sink.tables.{table}.mask.{name}; to hide a key, land a table without it",
                table=table,
            )
    for name in rules.mask:
        if name in dropped:
            raise ColumnRulesError(f"column '{name}' is both left out and masked",
                                   remedy=f"drop sink.tables.{table}.mask.{name}", table=table)
    for name in rules.types:
        if name in dropped or name in rules.mask:
            raise ColumnRulesError(
                f"column '{name}' has a type override and is {'left out' if name in dropped else 'masked'}",
                remedy=f"drop sink.tables.{table}.types.{name}", table=table)
        if name in schema.primary_key:
            raise ColumnRulesError(
                f"primary key column '{name}' has a type override: keys are merged and split on as the source's "
                "numbers", remedy=f"drop sink.tables.{table}.types.{name}", table=table)
    kept = tuple(index for index, name in enumerate(names) if name not in dropped)
    columns = []
    masks: dict[int, Mask] = {}
    for position, index in enumerate(kept):
        column = schema.columns[index]
        if column.name in rules.types:
            masks[position] = _boolean(column, table)
            columns.append(replace(column, data_type="boolean", column_type="boolean"))
            continue
        spec = rules.mask.get(column.name)
        if spec is None:
            columns.append(column)
            continue
        masks[position] = _mask(spec, column, table, environ if environ is not None else os.environ)
        columns.append(_masked_column(column, spec))
    shaped = TableSchema(table=schema.table, columns=tuple(columns), primary_key=schema.primary_key)
    return ColumnShape(source=schema, schema=shaped, kept=kept, masks=masks, row_filter=bound)


def sink_schema(schema: TableSchema, rules: ColumnRules | None, *, strict: bool = True) -> TableSchema:
    """The schema the sink writes for a source schema (no hash key needed: only the types change)."""
    shape = column_shape(schema, rules, strict=strict, environ=_NO_SECRETS)
    return schema if shape is None else shape.schema


class _NoSecrets(dict[str, str]):
    """An environment in which every variable is set to a placeholder: shaping a schema needs no secret."""

    def get(self, key: str, default: Any = None) -> str:
        return "-"


_NO_SECRETS = _NoSecrets()


def _masked_column(column: ColumnInfo, spec: ColumnMask) -> ColumnInfo:
    if spec.kind == "hash":
        return ColumnInfo(name=column.name, data_type="char", column_type=HASH_COLUMN_TYPE, nullable=column.nullable,
                          character_set="ascii")
    if spec.kind == "redact":
        return replace(column, nullable=True) if spec.value is None else column
    return column


def _mask(spec: ColumnMask, column: ColumnInfo, table: str, environ: Mapping[str, str]) -> Mask:
    kind = column.data_type.lower()

    def refuse(why: str) -> ColumnRulesError:
        return ColumnRulesError(f"column '{column.name}' ({column.column_type}) cannot take mask {spec.kind}: {why}",
                                remedy=f"change sink.tables.{table}.mask.{column.name}", table=table)

    if spec.kind == "hash":
        if kind not in _HASHABLE:
            raise refuse("hash takes text, whole-number and binary columns")
        assert spec.key_env is not None
        secret = environ.get(spec.key_env)
        if not secret:
            raise ColumnRulesError(
                f"the hash key of column '{column.name}' is in environment variable {spec.key_env}, which is not set",
                remedy=f"set {spec.key_env} (the same value on every run, or the hashes change)", table=table,
            )
        return _hasher(secret.encode())
    if spec.kind == "redact":
        if spec.value is not None and kind not in _TEXT:
            raise refuse("a constant replaces text columns only (use redact: null)")
        return _redactor(spec.value)
    if kind not in _TEXT - {"enum", "set"}:
        raise refuse(f"{spec.kind} takes text columns only")
    if spec.kind == "truncate":
        length = spec.length
        return lambda value: value[:length]
    return _partial(spec.keep_first, spec.keep_last, spec.fill)


def _boolean(column: ColumnInfo, table: str) -> Mask:
    """0 → False, 1 → True; any other value stops the table (BooleanValueError) instead of becoming True.

    Only TINYINT(1) (what MySQL writes for BOOLEAN) is taken: the width is the schema's promise that the column is
    a flag; the values are checked one by one all the same, since TINYINT(1) holds -128 … 127.
    """
    if column.data_type.lower() != "tinyint" or not column.column_type.lower().startswith("tinyint(1)"):
        raise ColumnRulesError(
            f"column '{column.name}' ({column.column_type}) cannot land as boolean: only TINYINT(1) columns can",
            remedy=f"drop sink.tables.{table}.types.{column.name}", table=table)
    name = column.name

    def flag(value: Any) -> bool:
        if value == 0:
            return False
        if value == 1:
            return True
        raise BooleanValueError(table, name, str(value))

    flag.boolean = True  # type: ignore[attr-defined]
    return flag


def _hasher(secret: bytes) -> Mask:
    def hashed(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        elif isinstance(value, str):
            data = value.encode()
        else:  # a whole number: int on the binlog road, int or Decimal (unsigned BIGINT) from Spark
            data = str(int(value)).encode()
        return hmac.new(secret, data, hashlib.sha256).hexdigest()

    return hashed


def _redactor(constant: str | None) -> Mask:
    def redacted(value: Any) -> Any:
        return constant

    redacted.redact = True  # type: ignore[attr-defined]
    return redacted


def _partial(first: int, last: int, fill: str) -> Mask:
    def partial(value: str) -> str:
        hidden = len(value) - first - last
        if hidden <= 0:  # too short to keep both ends without showing the whole value
            return fill * len(value)
        return value[:first] + fill * hidden + (value[len(value) - last:] if last else "")

    return partial


__all__ = ["HASH_COLUMN_TYPE", "ColumnShape", "column_shape", "sink_schema"]
