"""Text a person reads: the status table and the reconciliation verdicts, shared by the CLI and the demo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdc_lib.common.failures import Retrying

if TYPE_CHECKING:
    from cdc_lib.reconcile.reconcile import ReconciliationReport


def format_status(statuses: Sequence[Any]) -> str:
    """One aligned row per `TableStatus`: past the snapshot or not, the last reconcile verdict, offset, lag, time to
    catch up, Delta version, runway and error; then a line saying what the two verdict columns mean."""
    header = ("table", "past snapshot", "last reconcile", "offset", "high watermark", "lag bytes", "lag events",
              "lag s", "catch-up", "delta v", "runway", "error")
    rows = [header]
    for status in statuses:
        rows.append(
            (
                status.table,
                ("yes" if status.consistent else "no") if status.snapshotted else "not snapshotted",
                verdict_text(getattr(status, "last_reconcile", None)),
                status.position or "-",
                status.high_watermark or "-",
                "-" if status.lag_bytes is None else str(status.lag_bytes),
                "-" if status.lag_events is None else str(status.lag_events),
                "-" if status.lag_seconds is None else f"{status.lag_seconds:g}",
                catch_up_text(getattr(status, "catch_up", None)),
                "-" if status.delta_version is None else str(status.delta_version),
                _runway_text(status),
                status.error or _retrying_text(getattr(status, "retrying", None)) or (
                    f"snapshot {status.snapshot_in_flight}" if getattr(status, "snapshot_in_flight", None) else ""
                ),
            )
        )
    widths = [max(len(str(row[index])) for row in rows) for index in range(len(header))]
    lines = ("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)
    return "\n".join([*(line.rstrip() for line in lines), STATUS_LEGEND])


#: What the two verdict columns of `format_status` mean: "past snapshot" is about the offset, not the data.
STATUS_LEGEND = (
    "past snapshot: the offset passed the snapshot's high watermark (binlog replay complete); it compares no "
    "data. last reconcile: the last `binlake reconcile` of the table with its source."
)


def verdict_text(verdict: dict[str, Any] | None) -> str:
    """`Verdict.to_json()` for a person: MATCH, DRIFT (with the rows found) or UNCONFIRMED, and when; "never"."""
    if not verdict:
        return "never"
    when = str(verdict["at"])[:16].replace("T", " ")
    if verdict["verdict"] == "match":
        return f"match {when}"
    rows = verdict.get("drifting_rows")
    found = f"{verdict['mismatched_chunks']} chunks" if rows is None else f"{rows} rows"
    duplicated = verdict.get("duplicated_keys") or 0
    found += f", {duplicated} duplicated keys" if duplicated else ""
    kind = "DRIFT" if verdict["verdict"] == "drift" else "UNCONFIRMED"
    return f"{kind} ({found}) {when}"


def _retrying_text(retrying: dict[str, Any] | None) -> str:
    """`Retrying.to_json()` for a person: "retrying: <cause>, since <time>, <n> attempts"."""
    if not retrying:
        return ""
    described = Retrying.from_json(retrying)
    return "" if described is None else f"{described.describe()} (next after {described.next_attempt_at})"


def catch_up_text(estimate: dict[str, Any] | None) -> str:
    """`CatchUp.to_json()` for a person: a duration, NOT CATCHING UP (with both rates), or "-" when unknown."""
    if not estimate or estimate["verdict"] == "unknown":
        return "-"
    if estimate["verdict"] == "not_catching_up":
        return (f"NOT CATCHING UP (applies {_rate(estimate['apply_bytes_per_second'])}, "
                f"source writes {_rate(estimate['source_bytes_per_second'])})")
    return duration_text(float(estimate["seconds"]))


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _rate(bytes_per_second: float | None) -> str:
    if bytes_per_second is None:
        return "?"
    return f"{bytes_per_second / 1e6:.2f} MB/s" if bytes_per_second >= 1e5 else f"{bytes_per_second / 1e3:.1f} kB/s"


def _runway_text(status: Any) -> str:
    runway = status.runway
    if not runway:
        return "-"
    if runway["purged"]:
        text = f"PURGED ({runway['needed_file']})"
    elif runway["runway_seconds"] is None:
        text = "unbounded"
    else:
        text = f"{runway['runway_seconds'] / 3600:.1f}h"
    oldest_age = runway.get("oldest_on_server_age_seconds")
    if runway["oldest_on_server"] and oldest_age is not None:
        text += f" (oldest {runway['oldest_on_server']}, {oldest_age / 3600:.1f}h old)"
    return f"WARNING {text}" if status.runway_warning else text


def _keys(keys: Sequence[Sequence[str]]) -> str:
    return ", ".join(key[0] if len(key) == 1 else f"({', '.join(key)})" for key in keys)


def format_reconciliation(report: ReconciliationReport) -> list[str]:
    """The verdict line of one table, then (on drift) one line per finding: where, which keys, and why unsure."""
    verdict = "MATCH" if report.matches else "DRIFT"
    drift = report.drift
    counts = (
        f"missing {drift.missing}, extra {drift.extra}, differing {drift.differing}"
        + (f", duplicated {drift.duplicated}" if drift.duplicated else "") if drift is not None
        else "missing 0, extra 0" if report.matches else "missing -, extra -"
    )
    lines = [f"{verdict} {report.table}: source {report.source_rows} rows, Delta {report.delta_rows} rows, {counts}"]
    if report.mismatches:
        where = "; ".join(mismatch.where for mismatch in report.mismatches[:5])
        more = f" and {len(report.mismatches) - 5} more" if len(report.mismatches) > 5 else ""
        lines.append(f"  {len(report.mismatches)} of {report.chunks} chunks differ: {where}{more}")
    if drift is not None:
        if len(drift.chunks) < len(report.mismatches):
            lines.append(f"  rows compared in the first {len(drift.chunks)} differing chunks only")
        for kind, keys, count in (
            ("missing in Delta", drift.missing_keys, drift.missing),
            ("extra in Delta", drift.extra_keys, drift.extra),
            ("differing", drift.differing_keys, drift.differing),
        ):
            if keys:
                lines.append(f"  {kind}: {_keys(keys)}" + (" …" if count > len(keys) else ""))
        if drift.duplicated_keys:
            held = ", ".join(f"{_keys([key])} ({rows} rows)" for key, rows in drift.duplicated_keys)
            lines.append(f"  duplicated in Delta (one key, several rows): {held}"
                         + (" …" if drift.duplicated > len(drift.duplicated_keys) else ""))
    lines += [f"  schema: {difference}" for difference in report.schema_differences]
    if not report.matches and not report.confirmed:
        lines.append("  not confirmed (possibly changes still in flight; sync, then reconcile again)")
    lines += [f"  note: {note}" for note in report.notes]
    return lines
