"""What a statement logged in a binlog QUERY event does to the followed tables.

The binlog reader hands every statement that is not transaction control (BEGIN, COMMIT,
SAVEPOINT, XA …) to `table_effects`, which says for each followed table the statement
touches whether it changes nothing the mirror holds, empties the table, changes its
shape (the pipeline then evolves or stops it), or must stop it with a remedy.
A statement this module cannot read that mentions a followed table stops that table.

How statements are read: a tokenizer of MySQL/MariaDB lexical rules (`sql_tokens`: backtick identifiers,
strings, `/* */`, `-- `, `#` comments; executable comments `/*!50100 … */` and `/*M!100100 … */`
are code, because the server that wrote the binlog ran them) and a reader of the DDL grammar
per statement kind. sqlglot (MySQL dialect) falls back to an opaque `Command` for RENAME TABLE,
most partition clauses, ALTER ONLINE, CONVERT TO, OPTIMIZE, REPLACE, and drops executable comments
as if they were comments, so DDL is read here; sqlglot only finds the target tables of
multi-table UPDATE / DELETE, where its parse is complete.

Names: MariaDB/MySQL on Linux compare database and table names case-sensitively
(lower_case_table_names=0), so names are compared exactly as written (backticks removed).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from cdc_lib.binlog.sql_tokens import (
    EXECUTABLE_COMMENT,
    StatementReader,
    Token,
    Unreadable,
    tokenize,
    top_level_clauses,
)

EffectKind = Literal["none", "truncate", "schema", "stop"]


@dataclass(frozen=True)
class TableEffect:
    """What one statement does to one followed table.

    `none`: no row or column of the mirror changes (e.g. ADD INDEX, ANALYZE).
    `truncate`: every row is removed (TRUNCATE TABLE).
    `schema`: the table's shape may change; it pauses there until the pipeline evolved it or stopped it.
    `stop`: the mirror cannot follow; the table stops with `cause` and `remedy`.
    """

    table: str
    kind: EffectKind
    cause: str = ""
    remedy: str = ""


_DML_MODIFIERS = re.compile(r"\b(UPDATE|DELETE)((?:\s+(?:LOW_PRIORITY|QUICK|IGNORE)\b)+)", re.IGNORECASE)


# -- decisions ----------------------------------------------------------------------------

_RESNAPSHOT = "re-snapshot the table: binlake snapshot --table {name}"
_GONE_REMEDY = "remove {name} from source.tables, or re-create it and run binlake snapshot --table {name}"
_STATEMENT_REMEDY = (
    "set binlog_format=ROW globally and for every session that writes (SET GLOBAL binlog_format=ROW, then reconnect "
    "the writers), then re-snapshot the table: binlake snapshot --table {name}"
)
_SEVERITY = {"none": 0, "schema": 1, "truncate": 1, "stop": 2}

#: Statement kinds that touch no table's rows or columns (their row changes, if any, come as row events).
_NO_TABLE = frozenset({
    "SET", "GRANT", "REVOKE", "FLUSH", "RESET", "PURGE", "INSTALL", "UNINSTALL", "SHOW", "DO", "USE", "KILL",
    "LOCK", "UNLOCK", "SELECT", "HELP", "SIGNAL", "RESIGNAL", "DEALLOCATE", "PREPARE", "EXECUTE", "CHANGE",
    "START", "STOP", "CACHE", "CHECKSUM", "SHUTDOWN", "BACKUP", "RELEASE", "ROLLBACK", "COMMIT", "BEGIN", "XA",
    "SAVEPOINT", "CALL",
})
#: Objects of CREATE / ALTER / DROP other than tables and indexes (triggers' row changes are logged as rows).
_OTHER_OBJECTS = frozenset({
    "DATABASE", "SCHEMA", "VIEW", "TRIGGER", "PROCEDURE", "FUNCTION", "EVENT", "USER", "ROLE", "SERVER",
    "TABLESPACE", "LOGFILE", "RESOURCE", "SPATIAL", "PACKAGE", "AGGREGATE", "DEFINER", "ALGORITHM", "SQL",
})


def _effect(name: str, kind: EffectKind, statement: str, cause: str = "", remedy: str = "") -> TableEffect:
    if kind == "stop" and not remedy:
        remedy = _RESNAPSHOT.format(name=name)
    return TableEffect(name, kind, cause=f"{cause}: {_quote(statement)}" if cause else "", remedy=remedy)


def _gone(name: str, statement: str, how: str = "") -> TableEffect:
    return _effect(name, "stop", statement, f"the table was dropped or renamed{how}", _GONE_REMEDY.format(name=name))


def _quote(statement: str) -> str:
    text = " ".join(statement.split())
    return text if len(text) <= 200 else text[:200] + " …"


def table_effects(statement: str, default_schema: str, followed: Collection[str]) -> list[TableEffect]:
    """The effects of `statement` (run with `default_schema` as the current database) on `followed` tables.

    Only followed tables ("db.table") appear in the result; a statement that touches none returns [].
    """
    followed = set(followed)
    if not followed:
        return []
    try:
        tokens = tokenize(statement)
    except Unreadable:
        return _unreadable(statement, _loose_names(statement, default_schema), followed)
    if not tokens:
        return []
    try:
        effects = _read(tokens, statement, default_schema, followed)
    except Unreadable:
        return _unreadable(statement, _mentioned(tokens, default_schema), followed)
    merged: dict[str, TableEffect] = {}
    for effect in effects:
        if effect.table not in followed:
            continue
        known = merged.get(effect.table)
        if known is None or _SEVERITY[effect.kind] > _SEVERITY[known.kind]:
            merged[effect.table] = effect
    return list(merged.values())


def _unreadable(statement: str, mentioned: Iterable[str], followed: set[str]) -> list[TableEffect]:
    names = sorted({name for name in mentioned if name in followed})
    return [
        _effect(
            name, "stop", statement,
            "binlake cannot read a statement on the table, so it cannot know what it did",
            remedy=f"check what the statement did; then re-snapshot the table: binlake snapshot --table {name}",
        )
        for name in names
    ]


def _mentioned(tokens: list[Token], default_schema: str) -> set[str]:
    """Every name in the statement read as a table name, qualified or not."""
    names: set[str] = set()
    for index, token in enumerate(tokens):
        if not token.is_name:
            continue
        if index >= 2 and tokens[index - 1].text == "." and tokens[index - 2].is_name:
            continue  # the table of db.t, added with its database below
        names.add(f"{default_schema}.{token.text}")
        if index + 2 < len(tokens) and tokens[index + 1].text == "." and tokens[index + 2].is_name:
            names.add(f"{token.text}.{tokens[index + 2].text}")
    return names


def _loose_names(statement: str, default_schema: str) -> set[str]:
    words = re.findall(r"`((?:[^`]|``)+)`|([A-Za-z0-9_$\u0080-\uffff]+)", statement)
    plain = [quoted.replace("``", "`") or bare for quoted, bare in words]
    names = {f"{default_schema}.{word}" for word in plain}
    names |= {f"{a}.{b}" for a, b in zip(plain, plain[1:], strict=False)}
    return names


def _read(tokens: list[Token], statement: str, default_schema: str, followed: set[str]) -> list[TableEffect]:
    reader = StatementReader(tokens, default_schema)
    head = reader.keyword()
    if head in _NO_TABLE:
        return []
    if head == "ALTER":
        return _alter(reader, statement)
    if head == "DROP":
        return _drop(reader, statement, followed)
    if head == "RENAME":
        return _rename(reader, statement)
    if head == "TRUNCATE":
        reader.accept("TRUNCATE")
        reader.accept("TABLE")
        name = reader.name()
        return [_effect(name, "truncate", statement)]
    if head == "CREATE":
        return _create(reader, statement)
    if head in ("OPTIMIZE", "ANALYZE", "CHECK", "REPAIR"):
        # OPTIMIZE / ANALYZE / CHECK / REPAIR TABLE keep every row (REPAIR of a crashed MyISAM table may lose
        # rows, which no binlog format shows; binlake follows InnoDB tables).
        return [_effect(name, "none", statement) for name in _mentioned(tokens, default_schema)]
    if head in ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "HANDLER"):
        return [
            _effect(
                name, "stop", statement,
                "a statement-based change (binlog_format STATEMENT or MIXED) wrote rows without row events",
                remedy=_STATEMENT_REMEDY.format(name=name),
            )
            for name in _dml_targets(reader, statement, default_schema)
        ]
    raise Unreadable(f"statement kind {head or tokens[0].text}")


def _alter(reader: StatementReader, statement: str) -> list[TableEffect]:
    reader.accept("ALTER")
    reader.accept("ONLINE")
    reader.accept("IGNORE")
    if reader.keyword() in _OTHER_OBJECTS or reader.keyword() == "SEQUENCE":
        return []
    if not reader.accept("TABLE"):
        raise Unreadable("ALTER of an unknown object")
    reader.accept("IF", "EXISTS")
    name = reader.name()
    reader.skip_wait()
    kind: EffectKind = "none"
    cause = ""
    partition_names = False
    others: list[TableEffect] = []
    for clause in top_level_clauses(reader.tokens[reader.at :]):
        other = _swapped_table(clause, reader.default_schema)
        if other is not None:
            # EXCHANGE PARTITION … WITH TABLE other / CONVERT TABLE other TO PARTITION: the other table's rows change
            # or it disappears, without row events.
            others.append(_effect(other, "stop", statement, "partition maintenance swapped or moved the table's rows"))
        if partition_names and clause[0].is_name and clause[0].upper not in _CLAUSE_HEADS | _TABLE_OPTIONS:
            continue  # DROP PARTITION p1, p2 / REORGANIZE PARTITION p1, p2 INTO (…): the names after the first
        words = [token.upper for token in clause[:3]]
        partition_names = "PARTITION" in words and "BY" not in words
        found, why = _alter_clause(clause)
        decision: EffectKind
        if found == "partition-list":
            decision, why = "stop", "partition maintenance removed or swapped rows without row events"
        else:
            decision = found
        if _SEVERITY[decision] > _SEVERITY[kind]:
            kind, cause = decision, why
    if kind == "stop":
        return [_effect(name, "stop", statement, cause), *others]
    return [_effect(name, kind, statement), *others]


def _swapped_table(clause: list[Token], default_schema: str) -> str | None:
    words = [token.upper for token in clause]
    start = None
    if words[0] == "EXCHANGE" and "WITH" in words:
        start = words.index("WITH") + 1
    elif words[:2] == ["CONVERT", "TABLE"]:
        start = 1
    if start is None or start >= len(words) or words[start] != "TABLE":
        return None
    reader = StatementReader(clause[start + 1 :], default_schema)
    return reader.name()


_NO_ROW_ADD = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "CONSTRAINT", "FOREIGN", "CHECK",
                         "VECTOR"})
_NO_ROW_DROP = frozenset({"INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK"})
#: Table options: they change how rows are stored, never a row or a column's values.
_TABLE_OPTIONS = frozenset({
    "ENGINE", "COMMENT", "ROW_FORMAT", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM",
    "COMPRESSION", "CONNECTION", "DATA", "DELAY_KEY_WRITE", "ENCRYPTED", "ENCRYPTION", "ENCRYPTION_KEY_ID",
    "IETF_QUOTES", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "PAGE_CHECKSUM",
    "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "PASSWORD", "SECONDARY_ENGINE", "SEQUENCE", "STATS_AUTO_RECALC",
    "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "STORAGE", "TABLESPACE", "TRANSACTIONAL", "UNION", "WITH",
    "WITHOUT", "FORCE", "ALGORITHM", "LOCK", "ENABLE", "DISABLE", "ORDER", "COLLATE", "ENGINE_ATTRIBUTE",
    "SECONDARY_ENGINE_ATTRIBUTE", "AUTOEXTEND_SIZE", "NOWAIT", "WAIT", "VALIDATION",
})
#: Words that start an ALTER TABLE specification (after a comma, anything else continues a partition list).
_CLAUSE_HEADS = frozenset({"ADD", "DROP", "MODIFY", "CHANGE", "ALTER", "RENAME", "CONVERT", "DISCARD", "IMPORT",
                           "DEFAULT", "CHARACTER", "CHARSET", "PARTITION", "REMOVE", "TRUNCATE", "EXCHANGE",
                           "REORGANIZE", "COALESCE", "REBUILD", "OPTIMIZE", "ANALYZE", "CHECK", "REPAIR"})
#: Partition maintenance that keeps every row where it is or moves it between partitions.
_KEEPING_PARTITION_OPS = frozenset({"ADD", "REORGANIZE", "COALESCE", "REBUILD", "OPTIMIZE", "ANALYZE", "CHECK",
                                    "REPAIR"})
#: Partition maintenance that removes or swaps rows without a row event. Verified on MariaDB 10.11
#: (tests/integration/test_ddl_forms.py): ALTER TABLE … DROP PARTITION writes one QUERY event and no
#: DELETE_ROWS event, so the mirror can only learn of it from the statement.
_REMOVING_PARTITION_OPS = frozenset({"DROP", "TRUNCATE", "EXCHANGE", "DISCARD", "IMPORT", "CONVERT"})


def _alter_clause(clause: list[Token]) -> tuple[EffectKind | Literal["partition-list"], str]:
    """One ALTER TABLE specification: ("none" | "schema" | "stop" | "partition-list", why)."""
    words = [token.upper for token in clause]
    first = words[0]
    second = words[1] if len(words) > 1 else ""
    if "PARTITION" in words[:3] or "PARTITIONS" in words[:3]:
        op = first
        if op in _REMOVING_PARTITION_OPS:
            return "partition-list", ""
        if op in _KEEPING_PARTITION_OPS or op == "PARTITION":
            return "none", ""
    if first == "PARTITION" and second == "BY":
        return "none", ""  # repartitioning keeps every row
    if first == "REMOVE" and second == "PARTITIONING":
        return "none", ""
    if first in ("DISCARD", "IMPORT") and "TABLESPACE" in words:
        return "stop", "the tablespace was discarded or imported, which changes rows without row events"
    if first == "CONVERT" and second == "TABLE":
        return "partition-list", ""  # CONVERT TABLE t2 TO PARTITION p: rows arrive without row events
    if first == "CONVERT" and second == "TO":
        return "schema", ""
    if first == "ADD":
        rest = words[1:]
        if rest and rest[0] in ("IF",):
            rest = rest[3:]  # IF NOT EXISTS
        if rest and rest[0] in _NO_ROW_ADD:
            return "none", ""
        if rest and rest[0] == "PRIMARY":
            return "schema", ""
        if rest and rest[0] in ("PERIOD", "SYSTEM"):
            return "schema", ""
        return "schema", ""  # ADD [COLUMN] c …, ADD (c …, d …)
    if first == "DROP":
        rest = words[1:]
        if rest and rest[0] in _NO_ROW_DROP:
            return "none", ""
        if rest and rest[0] == "PRIMARY":
            return "schema", ""
        return "schema", ""  # DROP [COLUMN] [IF EXISTS] c, DROP SYSTEM VERSIONING
    if first in ("MODIFY", "CHANGE"):
        return "schema", ""
    if first == "RENAME":
        if second in ("INDEX", "KEY"):
            return "none", ""
        if second == "COLUMN":
            return "schema", ""
        return "stop", "the table was dropped or renamed (ALTER TABLE … RENAME)"
    if first == "ALTER":
        rest = words[1:]
        if rest and rest[0] in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return "none", ""
        if "DEFAULT" in words or "VISIBLE" in words or "INVISIBLE" in words:
            return "none", ""  # ALTER [COLUMN] c SET / DROP DEFAULT: existing rows keep their values
        return "schema", ""
    if first == "DEFAULT" or first in ("CHARACTER", "CHARSET"):
        return "none", ""  # the default character set / collation of columns added later
    if first in _TABLE_OPTIONS:
        return "none", ""
    raise Unreadable(f"ALTER TABLE clause {' '.join(token.text for token in clause[:3])}")


def _drop(reader: StatementReader, statement: str, followed: set[str]) -> list[TableEffect]:
    reader.accept("DROP")
    if reader.accept("TEMPORARY"):
        return []  # a temporary table shadows the real one; dropping it leaves the real table alone
    if reader.keyword() in ("DATABASE", "SCHEMA"):
        reader.at += 1
        reader.accept("IF", "EXISTS")
        token = reader.peek()
        if token is None or not token.is_name:
            raise Unreadable("DROP DATABASE without a name")
        prefix = f"{token.text}."
        return [_gone(name, statement, " (its database was dropped)") for name in followed if name.startswith(prefix)]
    if reader.accept("TABLE") or reader.accept("TABLES"):
        reader.accept("IF", "EXISTS")
        return [_gone(name, statement) for name in reader.names()]
    if reader.accept("INDEX") or (reader.accept("ONLINE") and reader.accept("INDEX")):
        reader.accept("IF", "EXISTS")
        reader.name()
        if not reader.accept("ON"):
            raise Unreadable("DROP INDEX without ON")
        return [_effect(reader.name(), "none", statement)]
    if reader.keyword() in _OTHER_OBJECTS or reader.keyword() in ("SEQUENCE", "PREPARE"):
        if reader.keyword() == "SEQUENCE":
            reader.at += 1
            reader.accept("IF", "EXISTS")
            return [_gone(name, statement) for name in reader.names()]
        return []
    raise Unreadable("DROP of an unknown object")


def _rename(reader: StatementReader, statement: str) -> list[TableEffect]:
    reader.accept("RENAME")
    if reader.keyword() in ("USER",):
        return []
    if not (reader.accept("TABLE") or reader.accept("TABLES")):
        raise Unreadable("RENAME of an unknown object")
    reader.accept("IF", "EXISTS")
    effects = []
    while True:
        source = reader.name()
        reader.skip_wait()
        if not reader.accept("TO"):
            raise Unreadable("RENAME TABLE without TO")
        target = reader.name()
        effects.append(_gone(source, statement, " (renamed away)"))
        # Another table renamed onto a followed name replaces its rows without a row event.
        effects.append(_effect(target, "stop", statement, "another table was renamed onto the table"))
        if not reader.accept_punct(","):
            break
    if not reader.done():
        raise Unreadable("unexpected text after RENAME TABLE")
    return effects


def _create(reader: StatementReader, statement: str) -> list[TableEffect]:
    reader.accept("CREATE")
    replace = reader.accept("OR", "REPLACE")
    reader.skip_wait()
    if reader.accept("TEMPORARY"):
        return []
    for modifier in ("UNIQUE", "FULLTEXT", "SPATIAL", "VECTOR", "ONLINE", "OFFLINE"):
        reader.accept(modifier)
    if reader.accept("INDEX"):
        reader.accept("IF", "NOT", "EXISTS")
        reader.name()
        while not reader.accept("ON"):
            if reader.peek() is None:
                raise Unreadable("CREATE INDEX without ON")
            reader.at += 1  # USING BTREE
        return [_effect(reader.name(), "none", statement)]
    if reader.accept("TABLE"):
        if_not_exists = reader.accept("IF", "NOT", "EXISTS")
        name = reader.name()
        if replace:
            return [_effect(name, "stop", statement, "the table was replaced (CREATE OR REPLACE TABLE)")]
        if if_not_exists:
            return [_effect(name, "none", statement)]  # the followed table exists: the statement did nothing
        # A followed name created afresh: the followed table was dropped before (which stopped it) or this is a
        # new table whose rows the mirror never had.
        return [_effect(name, "stop", statement, "the table was created anew")]
    if reader.keyword() == "SEQUENCE":
        reader.at += 1
        reader.accept("IF", "NOT", "EXISTS")
        name = reader.name()
        return [_effect(name, "stop", statement, "the table was replaced by a sequence")] if replace else []
    return []  # databases, views, triggers, routines, users …


def _dml_targets(reader: StatementReader, statement: str, default_schema: str) -> set[str]:
    """The tables a statement-logged INSERT / REPLACE / LOAD / UPDATE / DELETE writes to."""
    head = reader.keyword()
    if head in ("INSERT", "REPLACE"):
        reader.at += 1
        for modifier in ("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"):
            reader.accept(modifier)
        return {reader.name()}
    if head == "LOAD":
        while reader.peek() is not None and not reader.accept("INTO", "TABLE"):
            reader.at += 1
        return {reader.name()}
    if head in ("UPDATE", "DELETE"):
        import sqlglot
        from sqlglot import exp

        if EXECUTABLE_COMMENT.search(statement):
            raise Unreadable("sqlglot reads executable comments as comments")
        # sqlglot takes the modifiers for table names (DELETE QUICK FROM t → a table QUICK).
        plain = _DML_MODIFIERS.sub(r"\1 ", statement, count=1)
        try:
            parsed = sqlglot.parse_one(plain, read="mysql")
        except sqlglot.errors.ParseError:
            raise Unreadable("DML sqlglot cannot parse") from None
        targets: list[exp.Expression] = []
        if isinstance(parsed, exp.Update):
            targets = list(parsed.this.find_all(exp.Table)) if parsed.this else []
        elif isinstance(parsed, exp.Delete):
            targets = list(parsed.args.get("tables") or []) or ([parsed.this] if parsed.this else [])
        else:
            raise Unreadable("DML sqlglot reads as another statement")
        names = set()
        aliases = {table.alias_or_name: table for table in parsed.find_all(exp.Table)}
        for target in targets:
            table = target.this if isinstance(target, exp.Alias) else target
            if not isinstance(table, exp.Table):
                raise Unreadable("DML target is not a table")
            table = aliases.get(table.name, table) if not table.args.get("db") else table
            names.add(f"{table.db or default_schema}.{table.name}")
        if not names or not names <= _mentioned(reader.tokens, default_schema):
            raise Unreadable("DML whose targets sqlglot did not find in the statement")
        return names
    raise Unreadable(f"statement {head}")
