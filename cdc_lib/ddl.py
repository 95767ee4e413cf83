"""What a statement logged in a binlog QUERY event does to the followed tables.

The binlog reader hands every statement that is not transaction control (BEGIN, COMMIT,
SAVEPOINT, XA …) to `table_effects`, which says for each followed table the statement
touches whether it changes nothing the mirror holds, empties the table, changes its
shape (the pipeline then evolves or stops it), or must stop it with a remedy.
A statement this module cannot read that mentions a followed table stops that table.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

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


_DDL_TABLE = re.compile(
    r"^\s*(?:ALTER|DROP|RENAME|TRUNCATE|CREATE)\s+(?:ONLINE\s+|IGNORE\s+)?(?:TABLE\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
    r"(?:`?(\w+)`?\.)?`?(\w+)`?",
    re.IGNORECASE,
)


def table_effects(statement: str, default_schema: str, followed: Collection[str]) -> list[TableEffect]:
    """The effects of `statement` (run with `default_schema` as the current database) on `followed` tables.

    Only followed tables ("db.table") appear in the result; a statement that touches none returns [].
    """
    match = _DDL_TABLE.match(statement)
    if not match:
        return []
    name = f"{match.group(1) or default_schema}.{match.group(2)}"
    if name not in followed:
        return []
    keyword = statement.split(None, 1)[0].upper()
    if keyword == "TRUNCATE":
        return [TableEffect(name, "truncate")]
    if keyword == "ALTER":
        return [TableEffect(name, "schema")]
    if keyword in ("DROP", "RENAME"):
        return [
            TableEffect(
                name,
                "stop",
                cause=f"the table was dropped or renamed: {statement[:120]}",
                remedy=f"remove {name} from source.tables, or re-create it and run binlake snapshot --table {name}",
            )
        ]
    return []
