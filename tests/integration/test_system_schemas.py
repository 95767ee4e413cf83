"""Tables in the server's own schemas: which ones `source.tables` reaches, on a real MariaDB's information_schema.

Some projects create their tables in the `mysql` schema (the real MySQL binlog fixtures of issue 27 do). Such a
table, named exactly, is copied like any other; the server's own tables there are refused with the reason (their
changes reach the binlog as statements, not rows); a wildcard never reaches into the system schemas.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import TableError
from cdc_lib.model.tables import TableRef
from cdc_lib.source import server as mysql


@pytest.fixture
def user_table_in_mysql_schema(mariadb: LocalMariaDB) -> Iterator[str]:
    name = f"binlake_{uuid.uuid4().hex[:8]}"
    mariadb.execute(f"CREATE TABLE mysql.{name} (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB")
    yield name
    mariadb.execute(f"DROP TABLE IF EXISTS mysql.{name}")


def test_a_table_a_user_created_in_the_mysql_schema_is_found_by_its_name(
    mariadb: LocalMariaDB, database: str, user_table_in_mysql_schema: str
) -> None:
    mariadb.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    connection = mariadb.admin_connection()
    try:
        named = mysql.resolve_tables(connection, (f"mysql.{user_table_in_mysql_schema}", f"{database}.*"))
        assert named == [TableRef("mysql", user_table_in_mysql_schema), TableRef(database, "t")]
        schema = mysql.describe_table(connection, named[0])
        assert [column.name for column in schema.columns] == ["id", "v"] and schema.primary_key == ("id",)

        # Wildcards never reach into the server's schemas, not even one that names `mysql`.
        everything = mysql.resolve_tables(connection, ("*.*",))
        assert TableRef(database, "t") in everything
        assert not [ref for ref in everything if ref.database in mysql.SYSTEM_SCHEMAS]
        assert mysql.resolve_tables(connection, ("mysql.*",)) == []
    finally:
        connection.close()


@pytest.mark.parametrize("name", ["mysql.global_priv", "mysql.time_zone_name", "mysql.innodb_table_stats"])
def test_the_servers_own_tables_are_refused_with_the_reason(mariadb: LocalMariaDB, name: str) -> None:
    connection = mariadb.admin_connection()
    try:
        with pytest.raises(TableError, match="one of the server's own tables") as refused:
            mysql.resolve_tables(connection, (name,))
    finally:
        connection.close()
    assert "remove" in (refused.value.remedy or "") and name in (refused.value.remedy or "")


def test_a_missing_table_still_says_it_does_not_exist(mariadb: LocalMariaDB, database: str) -> None:
    connection = mariadb.admin_connection()
    try:
        with pytest.raises(TableError, match="does not exist on the server"):
            mysql.resolve_tables(connection, (f"{database}.absent",))
        with pytest.raises(TableError, match="no table on the server matches"):
            mysql.resolve_tables(connection, (f"{database}.absen?",))
    finally:
        connection.close()
