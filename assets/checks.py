"""Asset checks on the Delta tables: is the copy right, current and recoverable?

    consistency     ERROR  the table has a snapshot, no recorded error, and its offset is past the snapshot's
                           high watermark (so the copy equals the source as of that offset)
    lag             WARN   the copy trails the source by less than `lag_warn_seconds`, and binlake applies the
                           binlog faster than the source writes it (metadata: the time to catch up)
    binlog_runway   WARN   the binlog file holding the table's offset is not purged within `runway_warn_hours`
                           (ERROR once it is gone: only a re-snapshot helps then)
    reconciliation  ERROR  row count and content digest of source and Delta agree, chunk by chunk
                           (WARN when a difference may be changes still in flight)
    freshness       WARN   the table was brought up to date within `freshness_minutes` (Dagster's
                           last-update freshness check; idle tables stay fresh through observations)

The first three are cheap and run in every micro-batch step; reconciliation
reads both copies and runs on its own schedule or from the UI.
"""

import datetime as dt
import warnings
from collections.abc import Iterator
from typing import Any

import dagster as dg

from assets.naming import (
    CONSISTENCY_CHECK,
    LAG_CHECK,
    RECONCILIATION_CHECK,
    RUNWAY_CHECK,
    PipelineNames,
)
from assets.resources import TRANSIENT_RETRY, BinlakeResource, engine_errors, jvm_output_to_log_file
from cdc_lib.common.failures import is_transient
from cdc_lib.display.report import catch_up_text
from cdc_lib.errors import BinlakeError, NotSnapshottedError
from cdc_lib.pipeline.pipeline import Pipeline, TableStatus
from cdc_lib.reconcile.reconcile import ReconciliationReport, reconcile_table
from cdc_lib.status.runway import TableRunway, binlog_runway

ERROR = dg.AssetCheckSeverity.ERROR
WARN = dg.AssetCheckSeverity.WARN


def health_check_specs(*, names: PipelineNames, tables: list[str]) -> list[dg.AssetCheckSpec]:
    """Consistency, lag and binlog runway for every table (evaluated by the micro-batch step)."""
    specs = []
    for table in tables:
        key = names.table_key(table)
        specs += [
            dg.AssetCheckSpec(
                CONSISTENCY_CHECK,
                asset=key,
                description="Snapshotted, no recorded error, and the binlog offset is past the snapshot high "
                "watermark, so the Delta copy equals the source as of that offset.",
            ),
            dg.AssetCheckSpec(
                LAG_CHECK, asset=key, description="The copy trails the source by less than the threshold."
            ),
            dg.AssetCheckSpec(
                RUNWAY_CHECK,
                asset=key,
                description="The binlog file the table's offset needs is kept by the server long enough "
                "(binlog_expire_logs_seconds / expire_logs_days).",
            ),
        ]
    return specs


def consistency_result(key: dg.AssetKey, table: str, status: TableStatus | None) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {}
    if status is None or not status.snapshotted:
        return dg.AssetCheckResult(
            asset_key=key, check_name=CONSISTENCY_CHECK, passed=False, severity=ERROR,
            description=f"{table} has no snapshot yet: materialize partition '{table}' of the snapshot asset.",
            metadata={"snapshotted": False},
        )
    metadata = {
        "snapshotted": True,
        "consistent": status.consistent,
        "binlog_position": dg.MetadataValue.text(status.position or "-"),
        "high_watermark": dg.MetadataValue.text(status.high_watermark or "-"),
    }
    if status.error:
        return dg.AssetCheckResult(
            asset_key=key, check_name=CONSISTENCY_CHECK, passed=False, severity=ERROR,
            description=f"{table} stopped: {status.error}", metadata={**metadata, "error": status.error},
        )
    if status.retrying_text:
        # A passing fault (disk full, S3 503, a commit conflict): nothing applied, a later batch retries by itself.
        return dg.AssetCheckResult(
            asset_key=key, check_name=CONSISTENCY_CHECK, passed=False, severity=WARN,
            description=f"{table} {status.retrying_text}; a later micro-batch retries by itself (no re-snapshot).",
            metadata={**metadata, "retrying": status.retrying_text},
        )
    return dg.AssetCheckResult(
        asset_key=key, check_name=CONSISTENCY_CHECK, passed=status.consistent, severity=ERROR, metadata=metadata,
        description=None if status.consistent else
        "The offset has not yet passed the snapshot's high watermark; the next micro-batches will get it there.",
    )


def lag_result(key: dg.AssetKey, status: TableStatus | None, threshold: float) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {"threshold_seconds": dg.MetadataValue.float(threshold)}
    if status is None or status.lag_seconds is None:
        return dg.AssetCheckResult(
            asset_key=key, check_name=LAG_CHECK, passed=False, severity=WARN, metadata=metadata,
            description="No lag known: the table has no snapshot yet.",
        )
    metadata["lag_seconds"] = dg.MetadataValue.float(float(status.lag_seconds))
    metadata["lag_bytes"] = dg.MetadataValue.int(int(status.lag_bytes or 0))
    metadata.update(_catch_up_metadata(status.catch_up))
    # Not catching up fails the check even under the threshold: the lag can only grow from here.
    passed = status.lag_seconds <= threshold and not status.error and not status.catch_up_warning and \
        not status.retrying
    problems = []
    if status.lag_seconds > threshold:
        problems.append(f"The copy trails the source by {status.lag_seconds:g}s ({status.lag_bytes} binlog bytes)")
    if status.catch_up_warning:
        problems.append(f"NOT CATCHING UP: {catch_up_text(status.catch_up)}; add throughput (bigger batches, "
                        "sync --until-caught-up, fewer tables per pipeline) before the binlog runway runs out")
    if status.error:
        problems.append(f"the table stopped: {status.error}")
    if status.retrying_text:
        problems.append(status.retrying_text)
    return dg.AssetCheckResult(
        asset_key=key, check_name=LAG_CHECK, passed=passed, severity=WARN, metadata=metadata,
        description=None if passed else "; ".join(problems),
    )


def _catch_up_metadata(estimate: dict[str, Any] | None) -> dict[str, Any]:
    if not estimate:
        return {}
    metadata: dict[str, Any] = {"catch_up": dg.MetadataValue.text(catch_up_text(estimate))}
    if estimate["seconds"] is not None:
        metadata["catch_up_seconds"] = dg.MetadataValue.float(round(float(estimate["seconds"]), 1))
    for name in ("apply_bytes_per_second", "source_bytes_per_second"):
        if estimate[name] is not None:
            metadata[name] = dg.MetadataValue.float(round(float(estimate[name]), 1))
    return metadata


def runway_result(
    key: dg.AssetKey, table: str, runway: TableRunway | None, status: TableStatus | None, warn_hours: float
) -> dg.AssetCheckResult:
    threshold = warn_hours * 3600
    if runway is None:
        reason = f"the table stopped: {status.error}" if status is not None and status.error else "no snapshot yet"
        return dg.AssetCheckResult(
            asset_key=key, check_name=RUNWAY_CHECK, passed=False, severity=WARN,
            description=f"No binlog offset to check ({reason}).",
        )
    metadata: dict[str, Any] = {
        "needed_binlog": dg.MetadataValue.text(runway.needed_file),
        "oldest_binlog_on_server": dg.MetadataValue.text(runway.oldest_on_server or "-"),
        "binlog_bytes_from_offset": dg.MetadataValue.int(runway.bytes_from_offset),
        "threshold_hours": dg.MetadataValue.float(warn_hours),
    }
    if runway.expiry.expire_seconds is not None:
        metadata["expire_seconds"] = dg.MetadataValue.float(runway.expiry.expire_seconds)
    if runway.expiry.size_limit_bytes is not None:
        metadata["binlog_size_limit_bytes"] = dg.MetadataValue.int(runway.expiry.size_limit_bytes)
    if runway.rotated_at is not None:
        metadata["needed_binlog_closed_at"] = dg.MetadataValue.timestamp(runway.rotated_at.timestamp())
    if runway.purged:
        return dg.AssetCheckResult(
            asset_key=key, check_name=RUNWAY_CHECK, passed=False, severity=ERROR, metadata=metadata,
            description=f"Binlog {runway.needed_file} is already purged (oldest on server: "
            f"{runway.oldest_on_server}); re-snapshot {table}.",
        )
    if runway.runway_seconds is None:
        metadata["runway_hours"] = dg.MetadataValue.text("unbounded (the server does not expire binlogs by age)")
        return dg.AssetCheckResult(
            asset_key=key, check_name=RUNWAY_CHECK, passed=True, severity=WARN, metadata=metadata
        )
    metadata["runway_hours"] = dg.MetadataValue.float(round(runway.runway_seconds / 3600, 2))
    passed = runway.runway_seconds >= threshold
    return dg.AssetCheckResult(
        asset_key=key, check_name=RUNWAY_CHECK, passed=passed, severity=WARN, metadata=metadata,
        description=None if passed else
        f"The server purges {runway.needed_file} in {runway.runway_seconds / 3600:.1f}h; sync before then, or "
        "raise binlog_expire_logs_seconds.",
    )


def health_results(
    *,
    log: dg.DagsterLogManager,
    binlake: BinlakeResource,
    pipeline: Pipeline,
    by_key: dict[dg.AssetKey, str],
    statuses: dict[str, TableStatus],
    check_keys: set[dg.AssetCheckKey],
) -> Iterator[dg.AssetCheckResult]:
    """Results of the selected cheap checks, from one status read and one runway read."""
    runways: dict[str, TableRunway] = {}
    if any(check.name == RUNWAY_CHECK for check in check_keys):
        with engine_errors("reading the binlog runway", log):
            runways = binlog_runway(pipeline, [by_key[check.asset_key] for check in check_keys])
    for check in sorted(check_keys, key=lambda item: (item.asset_key.to_user_string(), item.name)):
        table = by_key[check.asset_key]
        status = statuses.get(table)
        if check.name == CONSISTENCY_CHECK:
            yield consistency_result(check.asset_key, table, status)
        elif check.name == LAG_CHECK:
            yield lag_result(check.asset_key, status, binlake.lag_warn_seconds)
        elif check.name == RUNWAY_CHECK:
            yield runway_result(check.asset_key, table, runways.get(table), status, binlake.runway_warn_hours)


def health_evaluations(results: Iterator[dg.AssetCheckResult]) -> Iterator[dg.AssetCheckEvaluation]:
    """The same results as events an op logs: the follow job has no asset step to yield check results from."""
    for result in results:
        assert result.asset_key is not None and result.check_name is not None
        yield dg.AssetCheckEvaluation(
            asset_key=result.asset_key, check_name=result.check_name, passed=result.passed,
            metadata=dict(result.metadata or {}), severity=result.severity, description=result.description,
        )


# -- reconciliation -------------------------------------------------------------------------------


def reconciliation_result(key: dg.AssetKey, report: ReconciliationReport) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {
        "source_rows": dg.MetadataValue.int(report.source_rows),
        "delta_rows": dg.MetadataValue.int(report.delta_rows),
        "chunks": dg.MetadataValue.int(report.chunks),
        "chunking": dg.MetadataValue.text(report.mode),
        "columns_compared": dg.MetadataValue.int(report.columns),
        "mismatched_chunks": dg.MetadataValue.int(len(report.mismatches)),
        "seconds": dg.MetadataValue.float(round(report.seconds, 2)),
        "confirmed": dg.MetadataValue.bool(report.confirmed),
    }
    if report.mismatches:
        metadata["mismatches"] = dg.MetadataValue.json([m.to_json() for m in report.mismatches[:10]])
    if report.drift is not None:
        metadata["drifting_rows"] = dg.MetadataValue.json(report.drift.to_json())
        metadata["duplicated_keys"] = dg.MetadataValue.int(report.drift.duplicated)
    if report.schema_differences:
        metadata["schema_differences"] = dg.MetadataValue.json(list(report.schema_differences))
    if report.notes:
        metadata["notes"] = dg.MetadataValue.text("; ".join(report.notes))
    if report.matches:
        return dg.AssetCheckResult(
            asset_key=key, check_name=RECONCILIATION_CHECK, passed=True, severity=ERROR, metadata=metadata,
            description=f"{report.source_rows} rows match in {report.chunks} chunks.",
        )
    where = ", ".join(m.where for m in report.mismatches[:3]) or "; ".join(report.schema_differences[:3])
    if report.drift is not None and report.drift.duplicated:
        keys = ", ".join(f"{'/'.join(key)} ({rows} rows)" for key, rows in report.drift.duplicated_keys)
        where += f"; {report.drift.duplicated} keys duplicated in Delta: {keys}"
    return dg.AssetCheckResult(
        asset_key=key, check_name=RECONCILIATION_CHECK, passed=False,
        severity=ERROR if report.confirmed else WARN, metadata=metadata,
        description=f"Source has {report.source_rows} rows, Delta {report.delta_rows}; differences in {where}"
        + ("" if report.confirmed else " (possibly changes still in flight; re-run after the next micro-batch)"),
    )


def build_reconciliation_checks(*, names: PipelineNames, tables: list[str]) -> dg.AssetChecksDefinition:
    """One subsettable op comparing source and Delta for each selected table."""
    by_key = {names.table_key(table): table for table in tables}

    @dg.multi_asset_check(
        name=names.reconciliation_op,
        specs=[
            dg.AssetCheckSpec(
                RECONCILIATION_CHECK,
                asset=key,
                description="Row count and content digest of the source table and its Delta copy agree, "
                "chunk by primary-key range.",
            )
            for key in by_key
        ],
        can_subset=True,
        retry_policy=TRANSIENT_RETRY,
        required_resource_keys={names.resource_key},
        description="Chunked source-vs-Delta comparison: MySQL tallies each key range itself, Spark tallies Delta.",
    )
    def reconciliation(context: dg.AssetCheckExecutionContext) -> Iterator[Any]:
        binlake = names.resource(context)
        pipeline = binlake.pipeline()
        for check in sorted(context.selected_asset_check_keys, key=lambda item: item.asset_key.to_user_string()):
            table = by_key[check.asset_key]
            try:
                with jvm_output_to_log_file(context.log):
                    report = reconcile_table(
                        pipeline, table, chunk_rows=binlake.reconcile_chunk_rows,
                        recheck_after_seconds=binlake.reconcile_recheck_seconds,
                    )
            except NotSnapshottedError as error:
                yield dg.AssetCheckResult(
                    asset_key=check.asset_key, check_name=RECONCILIATION_CHECK, passed=False, severity=WARN,
                    description=str(error),
                )
                continue
            except BinlakeError as error:
                if is_transient(error):
                    raise
                context.log.error(f"reconciliation of {table} failed: {error}")
                yield dg.AssetCheckResult(
                    asset_key=check.asset_key, check_name=RECONCILIATION_CHECK, passed=False, severity=ERROR,
                    description=str(error), metadata={"error": error.__class__.__name__, "remedy": error.remedy},
                )
                continue
            context.log.info(
                f"{table}: {'match' if report.matches else 'DRIFT'} — source {report.source_rows} rows, "
                f"Delta {report.delta_rows} rows, {len(report.mismatches)}/{report.chunks} chunks differ"
            )
            yield reconciliation_result(check.asset_key, report)

    return reconciliation


def build_freshness_checks(
    *, names: PipelineNames, tables: list[str], minutes: float
) -> list[dg.AssetChecksDefinition]:
    """Dagster's last-update freshness checks; the micro-batch's observations keep idle tables fresh.

    Dagster marks this factory as superseded by `FreshnessPolicy`, but a
    `FreshnessPolicy` only counts materializations, and a CDC table with no
    source change is not re-materialized: it would turn stale while perfectly
    current. These checks also accept observations carrying
    `dagster/last_updated_timestamp`, which every micro-batch records. A table with a `freshness` setting
    also carries Dagster's `FreshnessPolicy` (`assets.tables.freshness_policy`): "a change arrived within".
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        return list(
            dg.build_last_update_freshness_checks(
                assets=[names.table_key(table) for table in tables],
                lower_bound_delta=dt.timedelta(minutes=minutes),
                severity=WARN,
            )
        )


__all__ = [
    "build_freshness_checks", "build_reconciliation_checks", "health_check_specs", "health_evaluations",
    "health_results",
]
