"""The approval gate in Dagster: a blocking check fails with the DDL while a table waits at a schema change; the
schema decision job approves it and the next micro-batch evolves the table exactly."""

from __future__ import annotations

import dagster as dg

from assets.naming import SCHEMA_APPROVAL_CHECK, PipelineNames
from cdc_lib.pipeline.pipeline import Pipeline
from orchestration.definitions import build_definitions
from tests.conftest import scan_rows, source_rows, sql
from tests.dagster.conftest import Shop
from tests.dagster.daemon import tick


def _approval(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    found = [item for item in result.get_asset_check_evaluations() if item.check_name == SCHEMA_APPROVAL_CHECK]
    assert len(found) == 1
    return found[0]


def test_the_blocking_check_fails_until_the_decision_job_approves(
    mariadb, database, config_file, instance: dg.DagsterInstance
) -> None:
    db = database
    table, other = f"{db}.t", f"{db}.other"
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.t VALUES (1, 'x')",
    )
    config, config_path = config_file([table, other], sink__tables={table: {"schema_policy": "approve"}})
    Pipeline(config).snapshot()
    defs = build_definitions(config)
    names = PipelineNames(config.pipeline)
    checks = {key for key in defs.resolve_implicit_global_asset_job_def().asset_layer.asset_graph.asset_check_keys
              if key.name == SCHEMA_APPROVAL_CHECK}
    assert checks == {dg.AssetCheckKey(names.table_key(table), SCHEMA_APPROVAL_CHECK)}, "approve tables only"

    alter = f"ALTER TABLE {db}.t ADD COLUMN c INT DEFAULT 3"
    sql(mariadb, alter, f"INSERT INTO {db}.t VALUES (2, 'y', 4)", f"INSERT INTO {db}.other VALUES (1)")
    sync = defs.resolve_job_def(names.sync_job)
    waiting = sync.execute_in_process(instance=instance, raise_on_error=False)
    evaluation = _approval(waiting)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.description is not None and alter in evaluation.description
    assert scan_rows(Pipeline(config).table_path(other)) == [(1,)], "the other table flows"
    # The table waits for a person: the table_errors sensor reports it but never re-snapshots it away.
    shop = Shop(server=mariadb, database=db, config=config, config_path=config_path)
    reported = tick(defs, names.table_error_sensor, instance, shop, auto_resnapshot=True)
    assert not reported.run_requests and "awaiting approval" in (reported.skip_message or "")

    decided = defs.resolve_job_def(names.schema_decision_job).execute_in_process(
        instance=instance, run_config={"ops": {f"{names.schema_decision_job}_op": {"config": {"table": table}}}},
    )
    assert decided.success

    applied = sync.execute_in_process(instance=instance)
    assert applied.success and _approval(applied).passed
    # A batch ends at an ALTER it applies (as without a policy): the rows after it come with the next one.
    assert sync.execute_in_process(instance=instance).success
    assert sorted(scan_rows(Pipeline(config).table_path(table), ["id", "a", "c"])) == source_rows(mariadb, table)
