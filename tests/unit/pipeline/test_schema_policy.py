"""Which schema changes a policy looks at: a change of shape, never an index or a comment."""

from __future__ import annotations

import copy
from dataclasses import replace
from types import SimpleNamespace

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import SchemaChangeAwaitingApproval, SchemaChangeError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.types import ColumnInfo
from cdc_lib.pipeline.schema_diff import SchemaDiff
from cdc_lib.pipeline.schema_policy import changes_shape, policy_hold
from cdc_lib.state.offsets import TableState
from tests.unit.config.documents import VALID


def _column(name: str, column_type: str) -> ColumnInfo:
    return ColumnInfo(name=name, data_type=column_type.split("(")[0], column_type=column_type, nullable=True)


def test_a_change_of_shape_is_any_added_widened_tightened_or_refused_column() -> None:
    assert not changes_shape(SchemaDiff())
    assert changes_shape(SchemaDiff(added=[_column("c", "int")]))
    assert changes_shape(SchemaDiff(widened=[(_column("a", "varchar(10)"), _column("a", "varchar(20)"))]))
    assert changes_shape(SchemaDiff(tightened=["a"]))
    assert changes_shape(SchemaDiff(problems=["column b dropped or renamed"]))


def _context(policy: str | None) -> SimpleNamespace:
    document = copy.deepcopy(VALID)
    if policy is not None:
        document["sink"]["tables"] = {"shop.orders": {"schema_policy": policy}}
    return SimpleNamespace(config=parse_config(document))


_BEFORE = BinlogPosition(file="mariadb-bin.000002", pos=400)
_STATE = TableState(position=_BEFORE, snapshot_low=_BEFORE, snapshot_high=_BEFORE, snapshot_at="2026-11-27",
                    schema={})
_ADDED = SchemaDiff(added=[_column("c", "int")])


def _hold(policy: str | None, state: TableState, statement: str = "ALTER TABLE t ADD c INT",
          diff: SchemaDiff = _ADDED) -> tuple[TableState, SchemaChangeError | None]:
    return policy_hold(_context(policy), "shop.orders", state, statement=statement, before=_BEFORE, diff=diff)


def test_approve_records_the_change_keeps_its_first_sighting_and_consumes_an_approval_once() -> None:
    held, error = _hold("approve", _STATE)
    assert isinstance(error, SchemaChangeAwaitingApproval)
    assert "awaiting approval: ALTER TABLE t ADD c INT" in str(error)
    assert held.schema_change is not None and not held.schema_change["approved"]
    assert held.schema_change["position"] == _BEFORE.to_json()
    again, error = _hold("approve", replace(held, schema_change={**held.schema_change, "at": "first"}))
    assert error is not None and again.schema_change is not None and again.schema_change["at"] == "first"
    approved = replace(held, schema_change={**held.schema_change, "approved": True})
    went_on, error = _hold("approve", approved)
    assert error is None and went_on.schema_change is None
    # An approval is of that statement at that position: another change waits again.
    other, error = _hold("approve", approved, statement="ALTER TABLE t ADD d INT")
    assert error is not None and other.schema_change is not None and not other.schema_change["approved"]


def test_stop_refuses_any_change_of_shape_and_evolve_drops_a_stale_record() -> None:
    _, error = _hold("stop", _STATE)
    assert isinstance(error, SchemaChangeError) and "schema_policy stop" in str(error)
    assert _hold("stop", _STATE, diff=SchemaDiff())[1] is None, "an index or a comment passes"
    held, _ = _hold("approve", _STATE)
    evolved, error = _hold(None, held)
    assert error is None and evolved.schema_change is None
