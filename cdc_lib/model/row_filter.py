"""Row filters: a per-table SQL predicate that decides which rows land (docs/row-filters.md).

    sink.tables.<db.t>.filter: "status <> 'gone' AND (region IN ('eu', 'uk') OR amount >= 100.50)"

One parsed predicate serves both roads, so they cannot disagree: `parse_filter` reads the text (at config load, so a
typo fails there), `RowFilter.bind` checks it against the table's schema (before a snapshot reads a row, and at
each batch), and the bound filter is rendered to SQL for the snapshot's JDBC SELECT (`BoundFilter.sql`) and
evaluated in Python on every binlog before and after image (`BoundFilter.matches`), on the values as decoded, before
any mask (a filter on a masked column tests the clear value).

The subset is small on purpose, and exact: column references on the left of comparisons (= <> != < <= > >=),
[NOT] IN (literals), IS [NOT] NULL, [NOT] BETWEEN, AND/OR/NOT and parentheses, over integer, decimal, DATE,
DATETIME, text and binary-string columns, with integer, decimal, string, DATE '…' and TIMESTAMP '…' literals. SQL's
three-valued logic: a comparison with NULL is unknown, and an unknown row does not match. A text comparison is the
server's: Python does not know collations, so the binlog road asks the server how each distinct (value, literal)
compares under the column's collation (`cdc_lib.model.collated`; `BoundFilter.questions` names what a row needs, a
batch asks them at once) and finishes the three-valued logic here. Binary strings compare bytewise in Python, as the
server compares them. Anything else (functions, arithmetic, LIKE, floats, TIMESTAMP columns) is refused with a
remedy rather than evaluated approximately.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, TypeAlias

from cdc_lib.errors import ColumnRulesError
from cdc_lib.model.collated import Question, TextAnswers
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import ColumnInfo

Row = tuple[Any, ...]
Truth: TypeAlias = bool | None  # None: SQL's UNKNOWN


class FilterSyntaxError(ValueError):
    """The predicate text is outside the subset binlake reads; config parsing turns it into a ConfigError."""


# -- tokens -------------------------------------------------------------------------------
#
# A tokenizer of its own rather than cdc_lib.binlog.sql_tokens: that one reads what a server already ran (it keeps
# executable comments' contents and drops other comments); a filter is text binlake sends, so comments, `;`,
# double quotes (a string or a name, by sql_mode) and backslash escapes (by NO_BACKSLASH_ESCAPES) are refused.

_TOKEN = re.compile(
    r"\s+"
    r"|(?P<number>-?\d+(?:\.\d+)?)(?![\w.])"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|`(?P<ident>(?:[^`]|``)+)`"
    r"|'(?P<string>(?:[^'\\]|'')*)'"
    r"|(?P<op><>|!=|<=|>=|=|<|>|\(|\)|,)"
)
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "DATE", "TIMESTAMP", "TRUE", "FALSE",
                       "LIKE", "XOR", "DIV", "MOD", "REGEXP", "RLIKE", "COLLATE", "BINARY", "CASE", "SELECT"})

TokenKind = Literal["number", "word", "ident", "string", "op"]


@dataclass(frozen=True)
class _Token:
    kind: TokenKind
    text: str


def _tokens(text: str) -> list[_Token]:
    for refused, why in ((";", "a ';'"), ("--", "a comment"), ("#", "a comment"), ("/*", "a comment"),
                         ('"', "a double quote (say 'text' for a string, `name` for a column)"),
                         ("\\", "a backslash (strings take no escapes here; double a quote as '')")):
        if refused in text:
            raise FilterSyntaxError(f"the filter holds {why}")
    tokens: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise FilterSyntaxError(f"unexpected text at character {at + 1}: {text[at:at + 20]!r}")
        at = match.end()
        kind = match.lastgroup
        if kind is None:
            continue  # whitespace
        value = match.group(kind)
        if kind == "ident":
            value = value.replace("``", "`")
        elif kind == "string":
            value = value.replace("''", "'")
        tokens.append(_Token(kind, value))  # type: ignore[arg-type]
    return tokens


# -- syntax tree ----------------------------------------------------------------------------

LiteralKind = Literal["number", "string", "date", "timestamp"]


@dataclass(frozen=True)
class Lit:
    kind: LiteralKind
    text: str


@dataclass(frozen=True)
class Compare:
    column: str
    op: str  # one of = <> < <= > >= (!= is read as <>)
    value: Lit


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Lit, ...]
    negated: bool


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool


@dataclass(frozen=True)
class Between:
    column: str
    low: Lit
    high: Lit
    negated: bool


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class Junction:
    op: Literal["AND", "OR"]
    operands: tuple[Node, ...]


Node: TypeAlias = Compare | InList | IsNull | Between | Not | Junction


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def keyword(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.upper() in words:
            self.at += 1
            return True
        return False

    def op(self, *ops: str) -> str | None:
        token = self.peek()
        if token is not None and token.kind == "op" and token.text in ops:
            self.at += 1
            return token.text
        return None

    def expect_op(self, op: str, where: str) -> None:
        if self.op(op) is None:
            raise FilterSyntaxError(f"'{op}' expected {where}, found {self._found()}")

    def _found(self) -> str:
        token = self.peek()
        return "the end" if token is None else repr(token.text)

    def expression(self) -> Node:
        return self._junction("OR", self._and)

    def _and(self) -> Node:
        return self._junction("AND", self._not)

    def _junction(self, word: Literal["AND", "OR"], operand: Callable[[], Node]) -> Node:
        operands = [operand()]
        while self.keyword(word):
            operands.append(operand())
        return operands[0] if len(operands) == 1 else Junction(word, tuple(operands))

    def _not(self) -> Node:
        if self.keyword("NOT"):
            return Not(self._not())
        if self.op("("):
            inner = self.expression()
            self.expect_op(")", "to close '('")
            return inner
        return self._predicate()

    def _predicate(self) -> Node:
        token = self.peek()
        if token is None or token.kind not in ("word", "ident") or (
            token.kind == "word" and token.text.upper() in _KEYWORDS
        ):
            raise FilterSyntaxError(
                f"a column name was expected, found {self._found()} (the subset compares a column with literals; "
                "quote a column named like a keyword in backticks)"
            )
        self.at += 1
        column = token.text
        if self.keyword("IS"):
            negated = self.keyword("NOT")
            if not self.keyword("NULL"):
                raise FilterSyntaxError(f"IS takes NULL or NOT NULL, found {self._found()}")
            return IsNull(column, negated)
        negated = self.keyword("NOT")
        if self.keyword("IN"):
            self.expect_op("(", "after IN")
            values = [self.literal()]
            while self.op(","):
                values.append(self.literal())
            self.expect_op(")", "to close the IN list")
            return InList(column, tuple(values), negated)
        if self.keyword("BETWEEN"):
            low = self.literal()
            if not self.keyword("AND"):
                raise FilterSyntaxError(f"BETWEEN … AND … expected, found {self._found()}")
            return Between(column, low, self.literal(), negated)
        if negated:
            raise FilterSyntaxError(f"NOT after a column takes IN or BETWEEN, found {self._found()}")
        op = self.op("=", "<>", "!=", "<", "<=", ">", ">=")
        if op is None:
            raise FilterSyntaxError(f"a comparison (= <> != < <= > >=, IN, BETWEEN, IS) expected after '{column}', "
                                    f"found {self._found()}")
        return Compare(column, "<>" if op == "!=" else op, self.literal())

    def literal(self) -> Lit:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.upper() in ("DATE", "TIMESTAMP"):
            self.at += 1
            text = self.peek()
            if text is None or text.kind != "string":
                raise FilterSyntaxError(f"{token.text.upper()} takes a quoted literal, found {self._found()}")
            self.at += 1
            kind: LiteralKind = "date" if token.text.upper() == "DATE" else "timestamp"
            _temporal(Lit(kind, text.text))  # checked here, so a bad date fails at config load
            return Lit(kind, text.text)
        if token is not None and token.kind == "number":
            self.at += 1
            return Lit("number", token.text)
        if token is not None and token.kind == "string":
            self.at += 1
            return Lit("string", token.text)
        if token is not None and token.kind == "word" and token.text.upper() == "NULL":
            raise FilterSyntaxError("a comparison with NULL is never true in SQL; say IS NULL or IS NOT NULL")
        raise FilterSyntaxError(f"a literal (number, 'text', DATE '…', TIMESTAMP '…') expected, found {self._found()}")


def parse_filter(text: str) -> RowFilter:
    """The predicate `text` read into a `RowFilter` (not yet checked against a schema).

    Raises:
        FilterSyntaxError: the text is empty, or outside the subset (docs/row-filters.md).
    """
    tokens = _tokens(text)
    if not tokens:
        raise FilterSyntaxError("the filter is empty")
    parser = _Parser(tokens)
    tree = parser.expression()
    if parser.peek() is not None:
        raise FilterSyntaxError(f"unexpected {parser._found()} after a complete predicate")
    return RowFilter(text=text, tree=tree)


def bind_filter(text: str, schema: TableSchema) -> BoundFilter:
    """`parse_filter(text).bind(schema)`, a syntax error too raised as the table's ColumnRulesError."""
    try:
        parsed = parse_filter(text)
    except FilterSyntaxError as exc:
        table = schema.table.name
        raise ColumnRulesError(f"the row filter cannot be read: {exc}",
                               remedy=f"fix sink.tables.{table}.filter (docs/row-filters.md)", table=table) from None
    return parsed.bind(schema)


# -- binding to a schema ----------------------------------------------------------------------

_INTEGER = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_DECIMAL = frozenset({"decimal", "numeric"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
#: A character set or collation name as information_schema gives it: the asker puts it in SQL as a name.
_NAME = re.compile(r"[A-Za-z0-9_]+")

ColumnKind = Literal["integer", "decimal", "date", "datetime", "text", "binary"]
_KINDS = frozenset({"integer", "decimal", "date", "datetime", "text", "binary"})


def _column_kind(column: ColumnInfo) -> ColumnKind | str:
    """The kind the evaluator compares `column` as, or why it cannot."""
    kind = column.data_type.lower()
    if kind in _INTEGER:
        return "integer"
    if kind in _DECIMAL:
        return "decimal"
    if kind == "date":
        return "date"
    if kind == "datetime":
        return "datetime"
    if kind in _TEXT:
        charset, collation = column.character_set or "", column.collation or ""
        if not _NAME.fullmatch(charset) or not _NAME.fullmatch(collation):
            # A schema recorded before binlake read collations: how the server compares the column is not known.
            return ("text whose collation the table's recorded schema does not hold (recorded before binlake read "
                    "collations): its comparisons are the server's, under that collation")
        return "text"
    if kind in _BINARY:
        return "binary"
    if kind == "timestamp":
        return "TIMESTAMP values depend on the session time zone the snapshot reads them in"
    return f"{kind} columns are outside the filter subset"


def _temporal(literal: Lit) -> dt.date:
    try:
        if literal.kind == "date" or (literal.kind == "string" and len(literal.text) == 10):
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", literal.text):
                raise ValueError
            return dt.date.fromisoformat(literal.text)
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?", literal.text):
            raise ValueError
        return dt.datetime.fromisoformat(literal.text)
    except ValueError:
        raise FilterSyntaxError(
            f"{literal.text!r} is not a date 'YYYY-MM-DD' or a datetime 'YYYY-MM-DD HH:MM:SS[.ffffff]'"
        ) from None


def _value(literal: Lit, kind: ColumnKind) -> Any:
    """`literal` as the value a column of `kind` is compared with; raises FilterSyntaxError if it does not fit."""
    if kind == "integer" or kind == "decimal":
        if literal.kind != "number":
            raise FilterSyntaxError(f"{literal.text!r} is not a number (MySQL would compare text with a number "
                                    "as floating point)")
        return int(literal.text) if "." not in literal.text and kind == "integer" else Decimal(literal.text)
    if kind == "date" or kind == "datetime":
        if literal.kind == "number":
            raise FilterSyntaxError(f"{literal.text} is a number; write a date as DATE 'YYYY-MM-DD'")
        value = _temporal(literal)
        if kind == "date" and isinstance(value, dt.datetime):
            raise FilterSyntaxError(f"{literal.text!r} is a datetime; a DATE column is compared with dates")
        if kind == "datetime" and not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day)
        return value
    if literal.kind != "string":
        raise FilterSyntaxError(f"{literal.text!r} is not a string; a text column is compared with 'text'")
    if kind == "binary":
        # The snapshot's WHERE sends the literal in the connection's utf8mb4, and the server compares its bytes.
        return literal.text.encode()
    return literal.text


def _leaves(node: Node, *, null_tests: bool) -> list[str]:
    if isinstance(node, Junction):
        return [name for operand in node.operands for name in _leaves(operand, null_tests=null_tests)]
    if isinstance(node, Not):
        return _leaves(node.operand, null_tests=null_tests)
    return [node.column] if null_tests or not isinstance(node, IsNull) else []


@dataclass(frozen=True)
class RowFilter:
    """A parsed predicate, not yet checked against a table."""

    text: str
    tree: Node

    @property
    def columns(self) -> frozenset[str]:
        """The columns the predicate reads."""
        return frozenset(_leaves(self.tree, null_tests=True))

    @property
    def compared(self) -> frozenset[str]:
        """The columns the predicate compares with a literal (not only tests for NULL)."""
        return frozenset(_leaves(self.tree, null_tests=False))

    def bind(self, schema: TableSchema) -> BoundFilter:
        """The filter checked against `schema` (its source columns, in source order).

        A text column is compared under the collation its `ColumnInfo` records; one without (a schema recorded
        before collations were read) is refused: binlake does not guess how the server compares it.

        Raises:
            ColumnRulesError: the predicate names a column the table lacks (a DDL dropped or renamed it), a column of
                a type outside the subset, or a literal that does not fit its column's type.
        """
        table = schema.table.name
        names = schema.column_names
        kinds: dict[str, ColumnKind] = {}
        for name in sorted(self.columns):
            if name not in names:
                raise ColumnRulesError(
                    f"the row filter reads column '{name}', which the table does not have (columns: "
                    f"{', '.join(names)})",
                    remedy=f"fix sink.tables.{table}.filter (if a schema change dropped or renamed the column, the "
                    f"filter must name its new form; then binlake resume --table {table}, or re-snapshot the table if "
                    f"the rows it selects changed: binlake snapshot --table {table})",
                    table=table,
                )
            column = schema.columns[names.index(name)]
            kind = _column_kind(column)
            if name not in self.compared and column.data_type.lower() in _TEXT:
                kind = "text"  # only tested for NULL, which no collation changes
            if kind not in _KINDS:
                remedy = (f"re-snapshot the table so its schema is recorded with collations: binlake snapshot "
                          f"--table {table}" if "collation" in kind else
                          f"filter sink.tables.{table} on integer, decimal, DATE, DATETIME, text or binary-string "
                          "columns (docs/row-filters.md)")
                raise ColumnRulesError(f"the row filter compares column '{name}': {kind}", remedy=remedy, table=table)
            kinds[name] = kind  # type: ignore[assignment]
        columns = {name: schema.columns[names.index(name)] for name in kinds}
        try:
            test = _compile(self.tree, kinds, names, columns)
            sql = _render(self.tree, kinds)
            asked = tuple(_asked(self.tree, kinds, names, columns))
        except FilterSyntaxError as exc:
            raise ColumnRulesError(f"the row filter does not fit the table: {exc}",
                                   remedy=f"fix sink.tables.{table}.filter (docs/row-filters.md)",
                                   table=table) from None
        return BoundFilter(text=self.text, sql=sql, evaluate=test, asked=asked)


@dataclass(frozen=True)
class BoundFilter:
    """A filter checked against one schema: its SQL for the snapshot, its test for the binlog's row images."""

    text: str
    #: The predicate as binlake renders it for the snapshot's WHERE (from the same tree as `test`).
    sql: str
    evaluate: Test
    #: (row index, character set, collation, literals) of each text comparison: what the server is asked.
    asked: tuple[tuple[int, str, str, tuple[str, ...]], ...] = ()

    @property
    def asks_server(self) -> bool:
        """Whether the filter compares text, whose answers come from the server (`TextAnswers`)."""
        return bool(self.asked)

    def questions(self, row: Row) -> Iterator[Question]:
        """Every text comparison evaluating `row` may need (all of them: the prefetch does not short-circuit)."""
        for index, charset, collation, literals in self.asked:
            value = row[index]
            if value is not None:
                for literal in literals:
                    yield charset, collation, value, literal

    def test(self, row: Row, answers: TextAnswers | None = None) -> Truth:
        """The predicate's truth on a source row; `answers` are needed when it compares text (`asks_server`)."""
        return self.evaluate(row, answers)

    def matches(self, row: Row, answers: TextAnswers | None = None) -> bool:
        """Whether a source row (in source schema order, unmasked) lands: TRUE only; FALSE and UNKNOWN do not."""
        return self.evaluate(row, answers) is True


# -- evaluation ---------------------------------------------------------------------------------

Test = Callable[[Row, "TextAnswers | None"], Truth]

#: How a sign (value against literal) answers each comparison.
_BY_SIGN: dict[str, Callable[[int], bool]] = {
    "=": lambda sign: sign == 0, "<>": lambda sign: sign != 0, "<": lambda sign: sign < 0,
    "<=": lambda sign: sign <= 0, ">": lambda sign: sign > 0, ">=": lambda sign: sign >= 0,
}


def _text_comparator(op: str, column: ColumnInfo) -> Callable[[Any, Any, TextAnswers | None], bool]:
    """A comparison under the column's collation, answered by the server (through `answers`)."""
    charset, collation, by_sign = str(column.character_set), str(column.collation), _BY_SIGN[op]

    def compare(value: Any, literal: Any, answers: TextAnswers | None) -> bool:
        if answers is None:
            raise RuntimeError("a row filter comparing text was evaluated without the server's answers")
        return by_sign(answers.sign((charset, collation, value, literal)))
    return compare


def _comparator(op: str, kind: ColumnKind, column: ColumnInfo) -> Callable[[Any, Any, TextAnswers | None], bool]:
    if kind == "text":
        return _text_comparator(op, column)
    compare = _python_comparator(op, kind)
    return lambda a, b, answers: compare(a, b)


def _python_comparator(op: str, kind: ColumnKind) -> Callable[[Any, Any], bool]:
    base: dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: bool(a == b), "<>": lambda a, b: bool(a != b), "<": lambda a, b: bool(a < b),
        "<=": lambda a, b: bool(a <= b), ">": lambda a, b: bool(a > b), ">=": lambda a, b: bool(a >= b),
    }
    compare = base[op]
    if kind == "binary":
        # The binary collation compares bytes as unsigned, a shorter prefix first, and pads nothing (a BINARY(n)
        # value holds its 0x00 padding: the decoder keeps it, as the server stores it), as Python's bytes do.
        return lambda a, b: compare(bytes(a) if isinstance(a, (bytearray, memoryview)) else a, b)
    if kind == "decimal":
        # A DECIMAL wider than Spark's 38 digits is held as its exact text (cdc_lib.model.types.binlog_converter).
        return lambda a, b: compare(Decimal(a) if isinstance(a, str) else a, b)
    return compare


def _compile(node: Node, kinds: dict[str, ColumnKind], names: Sequence[str], columns: dict[str, ColumnInfo]) -> Test:
    if isinstance(node, Junction):
        operands = tuple(_compile(operand, kinds, names, columns) for operand in node.operands)
        # SQL's three-valued AND ends at the first FALSE, OR at the first TRUE; else UNKNOWN wins over the rest.
        decisive = node.op != "AND"

        def junction(row: Row, answers: TextAnswers | None) -> Truth:
            unknown = False
            for operand in operands:
                truth = operand(row, answers)
                if truth is decisive:
                    return decisive
                unknown = unknown or truth is None
            return None if unknown else not decisive
        return junction
    if isinstance(node, Not):
        inner = _compile(node.operand, kinds, names, columns)

        def negation(row: Row, answers: TextAnswers | None) -> Truth:
            truth = inner(row, answers)
            return None if truth is None else not truth
        return negation
    index = list(names).index(node.column)
    kind = kinds[node.column]
    if isinstance(node, IsNull):
        negated = node.negated
        return lambda row, answers: (row[index] is not None) if negated else (row[index] is None)
    column = columns[node.column]
    if isinstance(node, Compare):
        compare = _comparator(node.op, kind, column)
        literal = _value(node.value, kind)

        def comparison(row: Row, answers: TextAnswers | None) -> Truth:
            value = row[index]
            return None if value is None else compare(value, literal, answers)
        return comparison
    if isinstance(node, Between):
        low, high = _value(node.low, kind), _value(node.high, kind)
        at_least, at_most = _comparator(">=", kind, column), _comparator("<=", kind, column)
        negated = node.negated

        def between(row: Row, answers: TextAnswers | None) -> Truth:
            value = row[index]
            if value is None:
                return None
            inside = at_least(value, low, answers) and at_most(value, high, answers)
            return not inside if negated else inside
        return between
    values = tuple(_value(literal, kind) for literal in node.values)
    equal = _comparator("=", kind, column)
    negated = node.negated

    def membership(row: Row, answers: TextAnswers | None) -> Truth:
        value = row[index]
        if value is None:
            return None
        found = any(equal(value, candidate, answers) for candidate in values)  # the list holds no NULL (refused)
        return not found if negated else found
    return membership


def _asked(node: Node, kinds: dict[str, ColumnKind], names: Sequence[str],
           columns: dict[str, ColumnInfo]) -> Iterator[tuple[int, str, str, tuple[str, ...]]]:
    """Each text comparison of the tree: its column's row index, character set and collation, and its literals."""
    if isinstance(node, Junction):
        for operand in node.operands:
            yield from _asked(operand, kinds, names, columns)
        return
    if isinstance(node, Not):
        yield from _asked(node.operand, kinds, names, columns)
        return
    if isinstance(node, IsNull) or kinds[node.column] != "text":
        return
    literals = (node.value,) if isinstance(node, Compare) else (
        (node.low, node.high) if isinstance(node, Between) else node.values)
    column = columns[node.column]
    yield (list(names).index(node.column), str(column.character_set), str(column.collation),
           tuple(literal.text for literal in literals))


# -- SQL ---------------------------------------------------------------------------------------


def _quoted_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _column_sql(name: str, kind: ColumnKind) -> str:
    quoted = _quoted_name(name)
    if kind in ("date", "datetime"):
        # A zero or partial date ('0000-00-00', '2024-00-10') reaches Delta as NULL on both roads (and the binlog
        # decodes it as None), so the snapshot's WHERE must see NULL too, not a date before every other.
        return f"IF(YEAR({quoted}) = 0 OR MONTH({quoted}) = 0 OR DAYOFMONTH({quoted}) = 0, NULL, {quoted})"
    return quoted


def _literal_sql(literal: Lit, kind: ColumnKind) -> str:
    value = _value(literal, kind)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        value = value.decode()  # a binary column's literal: the same text, whose utf8mb4 bytes the server compares
    # No backslash reaches here (refused by the tokenizer), so doubling the quote is the whole escaping.
    return "'" + str(value).replace("'", "''") + "'"


def _render(node: Node, kinds: dict[str, ColumnKind]) -> str:
    if isinstance(node, Junction):
        return "(" + f" {node.op} ".join(_render(operand, kinds) for operand in node.operands) + ")"
    if isinstance(node, Not):
        return f"(NOT {_render(node.operand, kinds)})"
    kind = kinds[node.column]
    column = _column_sql(node.column, kind)
    if isinstance(node, IsNull):
        return f"({column} IS {'NOT ' if node.negated else ''}NULL)"
    if isinstance(node, Compare):
        return f"({column} {node.op} {_literal_sql(node.value, kind)})"
    if isinstance(node, Between):
        return (f"({column} {'NOT ' if node.negated else ''}BETWEEN {_literal_sql(node.low, kind)} "
                f"AND {_literal_sql(node.high, kind)})")
    values = ", ".join(_literal_sql(literal, kind) for literal in node.values)
    return f"({column} {'NOT ' if node.negated else ''}IN ({values}))"


__all__ = ["BoundFilter", "FilterSyntaxError", "RowFilter", "bind_filter", "parse_filter"]
