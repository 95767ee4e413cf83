"""Which schema changes a policy looks at: a change of shape, never an index or a comment."""

from __future__ import annotations

from cdc_lib.model.types import ColumnInfo
from cdc_lib.pipeline.schema_diff import SchemaDiff
from cdc_lib.pipeline.schema_policy import changes_shape


def _column(name: str, column_type: str) -> ColumnInfo:
    return ColumnInfo(name=name, data_type=column_type.split("(")[0], column_type=column_type, nullable=True)


def test_a_change_of_shape_is_any_added_widened_tightened_or_refused_column() -> None:
    assert not changes_shape(SchemaDiff())
    assert changes_shape(SchemaDiff(added=[_column("c", "int")]))
    assert changes_shape(SchemaDiff(widened=[(_column("a", "varchar(10)"), _column("a", "varchar(20)"))]))
    assert changes_shape(SchemaDiff(tightened=["a"]))
    assert changes_shape(SchemaDiff(problems=["column b dropped or renamed"]))
