"""The `binlake` command line: a thin caller of cdc_lib.pipeline.pipeline."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from cdc_lib.common.logs import (
    LOG_FORMATS,
    Verbosity,
    configure_logging,
    log_dir,
    native_stderr_to,
    redact,
    run_log_path,
    spark_log_path,
)
from cdc_lib.config.load import load_config
from cdc_lib.config.model import PipelineConfig
from cdc_lib.display.progress import DEFAULT_INTERVAL_SECONDS, terminal_or_lines
from cdc_lib.display.report import format_reconciliation, format_status
from cdc_lib.errors import BinlakeError
from cdc_lib.pipeline.follow import DEFAULT_POLL_SECONDS, FollowBatch, FollowSummary, follow
from cdc_lib.reconcile.reconcile import DEFAULT_CHUNK_ROWS as RECONCILE_CHUNK_ROWS
from cdc_lib.sink.spark import session as spark
from cdc_lib.status.runway import DEFAULT_RUNWAY_WARN_HOURS

if TYPE_CHECKING:
    from cdc_lib.pipeline.pipeline import Pipeline

log = logging.getLogger("binlake")


def summarize(error: BaseException) -> str:
    """One line about an unexpected exception; for a JVM error, the Java exception rather than py4j's wrapper."""
    java = getattr(error, "java_exception", None)
    text = str(error)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM may be gone; keep py4j's text
            pass
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join((lines[0] if lines else "").split())[:300]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="binlake", description="MySQL/MariaDB binlog → Delta Lake CDC")
    parser.add_argument("--config", help="pipeline YAML (default: $BINLAKE_CONFIG)")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="store_true", help="log binlake's DEBUG lines, name Spark's log")
    loudness.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text", help="stderr log lines as text or JSON (default text)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("validate", help="check server settings, grants, tables and stores")
    snapshot = commands.add_parser("snapshot", help="snapshot tables into Delta (all by default)")
    snapshot.add_argument("--table", action="append", help="db.table; repeat for several")
    snapshot.add_argument(
        "--progress-every", type=float, default=DEFAULT_INTERVAL_SECONDS, metavar="SECONDS",
        help="progress on stderr: a live line on a terminal; elsewhere a line per table at most this often "
        f"(default {DEFAULT_INTERVAL_SECONDS:g}); -q shows none",
    )
    snapshot.add_argument(
        "--restart", action="store_true", help="start an unfinished snapshot over instead of resuming it"
    )
    sync = commands.add_parser("sync", help="run one micro-batch from the binlog")
    sync.add_argument("--until-caught-up", action="store_true", help="repeat batches until the binlog end")
    sync.add_argument("--json", action="store_true")
    sync.add_argument(
        "--follow", action="store_true",
        help="keep applying the binlog with one warm Spark session; stop with SIGTERM/Ctrl-C (between batches)",
    )
    sync.add_argument("--budget", type=float, metavar="SECONDS", help="with --follow: stop after this long")
    sync.add_argument(
        "--poll", type=float, metavar="SECONDS", default=DEFAULT_POLL_SECONDS,
        help="with --follow: pause between looks at the binlog end while caught up (default %(default)g)",
    )
    status = commands.add_parser("status", help="offsets, lag, retrying, last reconcile")
    status.add_argument(
        "--format", choices=("text", "json", "openmetrics", "prometheus"), default=None,
        help="text for a person (default), json, openmetrics, or prometheus (the older text format node_exporter's "
        "textfile collector reads); both metric formats exit 0 whatever the tables' state, which they carry "
        "(docs/production.md \"Metrics\")",
    )
    status.add_argument("--json", action="store_true", help="the same as --format json")
    status.add_argument(
        "--runway-warn-hours", type=float, default=DEFAULT_RUNWAY_WARN_HOURS,
        help="flag tables whose binlog the server purges within this many hours (default %(default)g)",
    )
    reconcile = commands.add_parser(
        "reconcile", help="compare source and Delta chunk by chunk, then the rows of differing chunks; exit 1 on drift"
    )
    reconcile.add_argument("--table", action="append", help="db.table; repeat for several (default: all)")
    reconcile.add_argument("--json", action="store_true")
    reconcile.add_argument(
        "--chunk-rows", type=int, default=RECONCILE_CHUNK_ROWS, help="rows per compared chunk (default %(default)d)"
    )
    resume = commands.add_parser(
        "resume", help="take a stopped table back into the sync at its offset, once its cause is fixed (no re-snapshot "
        "while the binlog still holds its changes)"
    )
    resume.add_argument("--table", action="append", required=True, help="db.table; repeat for several")
    schema = commands.add_parser(
        "schema", help="approve or reject the schema change a table under schema_policy approve waits at"
    )
    schema_commands = schema.add_subparsers(dest="schema_command", required=True)
    for verb, text in (("approve", "the next sync evolves the Delta table from the change's position"),
                       ("reject", "the table stops; a re-snapshot takes it back")):
        decision = schema_commands.add_parser(verb, help=text)
        decision.add_argument("--table", action="append", required=True, help="db.table; repeat for several")
    register = commands.add_parser(
        "register", help="name the snapshotted Delta tables in the Spark catalog (catalog.enabled); exit 1 on a refusal"
    )
    register.add_argument("--table", action="append", help="db.table; repeat for several (default: all)")
    maintain = commands.add_parser(
        "maintain", help="compact, VACUUM, checkpoint and clean up the Delta tables beside the sync",
    )
    maintain.add_argument("--table", action="append", help="db.table; repeat for several (default: all)")
    maintain.add_argument("--dry-run", action="store_true", help="print what it would do, with sizes; change nothing")
    maintain.add_argument("--json", action="store_true")
    binlog = commands.add_parser("binlog", help="look at binlog files offline (no server, no config)")
    binlog_commands = binlog.add_subparsers(dest="binlog_command", required=True)
    decode = binlog_commands.add_parser(
        "decode", help="decode binlog files as the sync reads them: transactions, rows in binlake's values, and what "
        "the sync does with each event; exit 1 if an event stops every table"
    )
    decode.add_argument("files", nargs="+", metavar="FILE", help="binlog files, read in order as one stream")
    decode.add_argument("--json", action="store_true", help="one JSON object per event (JSON Lines; docs/cli.md)")
    decode.add_argument("--start", type=int, metavar="POS", help="start at this event position in the first file")
    decode.add_argument("--stop", type=int, metavar="POS",
                        help="stop before the first event at or past this position in the last file")
    demo = commands.add_parser("demo", help="run the end-to-end demo against a private MariaDB")
    demo.add_argument("--workdir", default=".binlake-demo", help="where the demo keeps MariaDB, lake and config")
    demo.add_argument("--keep-running", action="store_true", help="leave the demo MariaDB running afterwards")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "sync":
        _check_follow_arguments(parser, arguments)
    if arguments.command == "status" and arguments.json and arguments.format not in (None, "json"):
        parser.error(f"--json and --format {arguments.format} disagree; give one")
    logs = log_dir(workdir=arguments.workdir if arguments.command == "demo" else None)
    run_log = run_log_path(logs)
    # Native output (a delta-rs panic and its backtrace) and tracebacks go to the run's log, not the terminal.
    with native_stderr_to(run_log) as captured:
        return _main(arguments, spark_log_path(logs), run_log if captured else None)


def _main(arguments: argparse.Namespace, spark_log: Path, run_log: Path | None) -> int:
    verbosity: Verbosity = "verbose" if arguments.verbose else "quiet" if arguments.quiet else "normal"
    configure_logging(verbosity, log_format=arguments.log_format)
    secrets: list[str] = []
    try:
        with spark.jvm_output_to(spark_log):
            log.debug("Spark's output, if it starts, goes to %s", spark_log)
            if arguments.command == "demo":
                from cdc_lib.dev.demo import run_demo

                return run_demo(arguments.workdir, keep_running=arguments.keep_running)
            if arguments.command == "binlog":
                return _binlog_decode(arguments)
            config = load_config(arguments.config)
            secrets = [config.source.password]
            configure_logging(
                verbosity, secrets, log_format=arguments.log_format, context={"pipeline": config.pipeline}
            )
            return _run(arguments, config)
    except BinlakeError as error:
        print(f"binlake: error: {redact(str(error), secrets)}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("binlake: interrupted; offsets were not moved past what was committed", file=sys.stderr)
        return 130
    except BaseException as error:  # noqa: BLE001 - the last line of defence: still one line, still no secret
        # delta-rs's PanicException is a BaseException (pyo3): a bug report's matter, reported like any other.
        if not isinstance(error, Exception) and type(error).__name__ != "PanicException":
            raise
        if arguments.verbose:
            log.error("unexpected failure", exc_info=error)
        traceback_note = ""
        if run_log is not None and _write_traceback(run_log, error, secrets):
            traceback_note = f"; the traceback is in {run_log}"
        # The JVM's own account of a Spark failure is in its log, not in py4j's one-line summary.
        jvm_log = f" (Spark's log: {spark.jvm_log_file})" if spark.jvm_log_file == spark_log else ""
        print(
            f"binlake: error: unexpected {type(error).__name__}: {redact(summarize(error), secrets)} — remedy: "
            f"{unexpected_remedy(arguments.command)}; rerun, and report it if it persists{traceback_note}{jvm_log}",
            file=sys.stderr,
        )
        return 2


def unexpected_remedy(command: str) -> str:
    """What an unexpected failure of `command` left behind, so the user knows what a rerun repeats."""
    if command == "maintain":
        return "maintenance changes no row: a commit it did not finish left the table as it was"
    if command in ("reconcile", "status", "validate", "binlog"):
        return f"binlake {command} changes no Delta table and no offset"
    if command == "snapshot":
        return "a rerun resumes the snapshot at its first chunk not committed"
    if command == "register":
        return "the Delta tables are unchanged; a rerun registers the tables not yet named"
    return "nothing past the last committed batch was applied"


def _maintain(pipeline: Pipeline, arguments: argparse.Namespace) -> int:
    from cdc_lib.maintenance.run import maintain

    outcomes = maintain(pipeline.context, arguments.table, dry_run=arguments.dry_run)
    if arguments.json:
        print(json.dumps([outcome.to_json() for outcome in outcomes], indent=1))
        return 0
    would = "would " if arguments.dry_run else ""
    for outcome in outcomes:
        if outcome.skipped:
            print(f"{outcome.table}: skipped — {outcome.skipped}")
            continue
        print(f"{outcome.table} ({outcome.engine}): {outcome.files_before} files, {_size(outcome.bytes_before)}")
        print(f"  compaction: {would}merge {outcome.compacted_files} small files ({_size(outcome.compacted_bytes)})"
              + (f" into {outcome.files_written}" if outcome.files_written else ""))
        print(f"  vacuum: {would}remove {outcome.vacuumed_files} files ({_size(outcome.vacuumed_bytes)}); retention "
              f"{outcome.retention_hours:g} h ({outcome.retention_reason})")
        if outcome.checkpoint_version is not None:
            print(f"  checkpoint: {would}write one at version {outcome.checkpoint_version}"
                  + (f", without {outcome.tombstones_dropped} records of vacuumed files"
                     if outcome.tombstones_dropped else ""))
        if outcome.log_files_removed:
            print(f"  log: {would}remove {outcome.log_files_removed} files before the kept checkpoint")
        for leftover in outcome.leftovers_removed:
            print(f"  leftover: {would}remove {leftover}")
        for note in outcome.notes:
            print(f"  note: {note}")
    return 0


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size / 1024:.1f} GiB"


def _write_traceback(path: Path, error: BaseException, secrets: list[str]) -> bool:
    """Append the traceback of an unexpected failure to the run's log file; whether it could."""
    text = "".join(traceback.format_exception(error))
    try:
        with path.open("a", encoding="utf-8") as file:
            file.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} unexpected failure\n")
            file.write(redact(text, secrets))
    except OSError:
        return False
    return True


def _run(arguments: argparse.Namespace, config: PipelineConfig) -> int:
    from cdc_lib.pipeline.pipeline import Pipeline

    pipeline = Pipeline(config)
    if arguments.command == "validate":
        for line in pipeline.validate():
            print(f"ok  {line}")
        return 0
    if arguments.command == "snapshot":
        # Not on a terminal, the lines are binlake log lines: they take --log-format, and -q hides them.
        progress = None if arguments.quiet else terminal_or_lines(
            sys.stderr, emit=lambda line: log.info("snapshot progress: %s", line),
            interval_seconds=arguments.progress_every,
        )
        snapshots = pipeline.snapshot(arguments.table, progress=progress, restart=arguments.restart)
        for snapshot in snapshots:
            print(
                f"{snapshot.table}: {snapshot.rows} rows in {snapshot.seconds:.1f}s "
                f"({snapshot.rows_per_second:,.0f} rows/s, {snapshot.partitions} chunks"
                + (f", {snapshot.chunks_resumed} resumed" if snapshot.chunks_resumed else "") + "), "
                f"Delta version {snapshot.delta_version}, low {snapshot.low_watermark}, high {snapshot.high_watermark}"
                + (f", registered as {snapshot.registered_as}" if snapshot.registered_as else "")
            )
            if snapshot.catalog_error:
                print(f"  catalog: NOT REGISTERED (the snapshot stands) — {snapshot.catalog_error}")
        return 1 if any(snapshot.catalog_error for snapshot in snapshots) else 0
    if arguments.command == "sync" and arguments.follow:
        return _follow(pipeline, arguments)
    if arguments.command == "sync":
        results = pipeline.sync(until_caught_up=arguments.until_caught_up)
        if arguments.json:
            print(json.dumps([_jsonable(asdict(result)) for result in results], indent=1))
            return 0
        for result in results:
            # A batch of changes written by delta-rs (batch.writer) starts no Spark either.
            no_spark = " (Spark not started)" if result.batch_seq else " (no change: Spark not started)"
            print(
                f"batch {result.batch_seq or '-'}: {result.row_changes} row changes in {result.transactions} "
                f"transactions, {result.seconds:.2f}s read, {result.start} → {result.end}"
                f"{'' if result.spark_started else no_spark}"
            )
            for table in result.tables:
                if table.rows_written or table.error:
                    print(
                        f"  {table.table}: +{table.inserted} ~{table.updated} -{table.deleted} "
                        f"→ Delta v{table.delta_version}" + (f"  ERROR {table.error}" if table.error else "")
                    )
            for name, reason in result.skipped_tables.items():
                print(f"  {name}: skipped — {reason}")
            for name, reason in result.snapshots_in_flight.items():
                print(f"  {name}: waits — {reason}")
            for name, reason in result.retrying_tables.items():
                # A passing fault: nothing applied, the offset stays, a later sync retries by itself.
                print(f"  {name}: {reason}")
        failed = any(table.error for result in results for table in result.tables)
        return 1 if failed or any(result.skipped_tables for result in results) else 0
    if arguments.command == "maintain":
        return _maintain(pipeline, arguments)
    if arguments.command == "status":
        statuses = pipeline.status(runway_warn_hours=arguments.runway_warn_hours)
        output = arguments.format or ("json" if arguments.json else "text")
        if output in ("openmetrics", "prometheus"):
            from cdc_lib.status.metrics import openmetrics_text

            sys.stdout.write(openmetrics_text(pipeline.context, statuses, classic=output == "prometheus"))
            return 0
        from cdc_lib.maintenance.run import last_maintenance

        maintained = {status.table: last_maintenance(pipeline.context, status.table) for status in statuses
                      if status.snapshotted}
        if output == "json":
            print(json.dumps([{**status.to_json(), "last_maintenance": maintained.get(status.table)}
                              for status in statuses], indent=1))
        else:
            print(format_status(statuses))
            for name, record in maintained.items():
                print(f"{name}: last maintenance " + ("never (binlake maintain)" if record is None else
                      f"{record['at']}: {record['compacted_files']} files compacted, {record['vacuumed_files']} "
                      f"vacuumed, {record['log_files_removed']} log files removed"))
        return 1 if any(status.error for status in statuses) else 0
    if arguments.command == "resume":
        for name in arguments.table:
            resumed = pipeline.resume(name)
            if resumed.cleared is None:
                print(f"{resumed.table}: not stopped; it syncs from {resumed.position}")
            else:
                print(f"{resumed.table}: resumed from {resumed.position}; the next sync replays the binlog from "
                      f"there (was: {resumed.cleared})")
        return 0
    if arguments.command == "schema":
        for name in arguments.table:
            approve = arguments.schema_command == "approve"
            decided = pipeline.approve_schema_change(name) if approve else pipeline.reject_schema_change(name)
            print(f"{decided.table}: {'approved' if approve else 'rejected'} at {decided.position}: "
                  f"{decided.statement}" + ("; the next sync evolves the table from there" if approve
                                            else f"; re-snapshot it: binlake snapshot --table {decided.table}"))
        return 0
    if arguments.command == "register":
        from cdc_lib.sink.catalog import register_tables

        outcomes = register_tables(pipeline.context, arguments.table)
        for outcome in outcomes:
            if outcome.registration is not None:
                done = "registered" if outcome.registration.created else "already registered"
                print(f"{outcome.table}: {done} as {outcome.registration.name} → {outcome.registration.location}")
            else:
                print(f"{outcome.table}: NOT REGISTERED — {outcome.error}")
        return 1 if any(outcome.error for outcome in outcomes) else 0
    if arguments.command == "reconcile":
        from cdc_lib.reconcile.reconcile import reconcile

        reports = reconcile(pipeline, arguments.table, chunk_rows=arguments.chunk_rows)
        if arguments.json:
            print(json.dumps([_jsonable(report.to_json()) for report in reports], indent=1))
        else:
            for report in reports:
                print("\n".join(format_reconciliation(report)))
        return 0 if all(report.matches for report in reports) else 1
    raise AssertionError(arguments.command)


def _binlog_decode(arguments: argparse.Namespace) -> int:
    """`binlake binlog decode`: each event as it is decoded (what came before a bad event is printed)."""
    from cdc_lib.binlog.decode import decode_files
    from cdc_lib.display.binlog_events import json_lines, text_lines

    stopping: list[str] = []

    def watched() -> Iterator[Any]:
        for event in decode_files([Path(name) for name in arguments.files], start=arguments.start,
                                  stop=arguments.stop):
            if event.verdict == "stops_all":
                stopping.append(f"{event.file}:{event.pos}: {event.error} — remedy: {event.remedy}")
            yield event

    for line in (json_lines if arguments.json else text_lines)(watched()):
        print(line, flush=True)
    for reason in stopping:
        print(f"binlake: error: the sync stops every table at {reason}", file=sys.stderr)
    return 1 if stopping else 0


def _check_follow_arguments(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    if not arguments.follow:
        if arguments.budget is not None or arguments.poll != DEFAULT_POLL_SECONDS:
            parser.error("--budget and --poll go with --follow")
        return
    if arguments.until_caught_up:
        parser.error("--follow catches up by itself; drop --until-caught-up")
    if arguments.poll <= 0 or (arguments.budget is not None and arguments.budget <= 0):
        parser.error("--poll and --budget take a positive number of seconds")


def _follow(pipeline: Pipeline, arguments: argparse.Namespace) -> int:
    """`binlake sync --follow`: one line per batch that wrote something, a summary when it stops."""
    stop = threading.Event()

    def on_batch(batch: FollowBatch) -> None:
        result = batch.result
        failed = [table for table in result.tables if table.error]
        if not batch.rows_written and not failed:
            return
        if arguments.json:
            document = {"batch": batch.number, "elapsed": round(batch.elapsed, 3), "behind_bytes": batch.behind_bytes,
                        **_jsonable(asdict(result))}
            print(json.dumps(document), flush=True)
            return
        tables = ", ".join(
            f"{table.table} +{table.inserted} ~{table.updated} -{table.deleted} v{table.delta_version}"
            for table in result.tables if table.rows_written
        )
        lag = "lag ?" if batch.behind_bytes is None else (
            "caught up" if batch.behind_bytes == 0 else f"lag {batch.behind_bytes:,} bytes"
        )
        print(
            f"{time.strftime('%H:%M:%S')} batch {result.batch_seq or '-'}: {batch.rows_written} rows in "
            f"{len(batch.tables_written)} tables ({tables}), {result.transactions} transactions, {lag}",
            flush=True,
        )
        for table in failed:
            print(f"  {table.table}: ERROR {table.error}", flush=True)

    outcome: list[FollowSummary | BaseException] = []

    def run() -> None:
        try:
            outcome.append(follow(
                pipeline, budget_seconds=arguments.budget, poll_seconds=arguments.poll, stop=stop, on_batch=on_batch
            ))
        except BaseException as error:  # noqa: BLE001 - raised again in the main thread
            outcome.append(error)

    # The loop runs on a worker thread so that signals stay with the main thread: PySpark takes SIGINT over
    # (cancel jobs, raise) when a session starts in the main thread, which would cut a batch short.
    # A daemon: after a second signal the process exits without waiting for the batch (as safe as a crash).
    worker = threading.Thread(target=run, name="binlake-follow", daemon=True)
    with _stop_on_signals(stop):
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    summary = outcome[0]
    if arguments.json:
        print(json.dumps({"summary": _jsonable(asdict(summary))}), flush=True)
    else:
        print(
            f"follow stopped ({summary.stopped}) after {summary.seconds:.1f}s: {summary.batches_written} of "
            f"{summary.batches} batches wrote {summary.rows_written:,} rows ({summary.row_changes:,} row changes, "
            f"{summary.transactions:,} transactions), {summary.retries} transient failures retried",
            flush=True,
        )
        for name, reason in sorted(summary.table_errors.items()):
            print(f"  {name}: stopped — {reason}", flush=True)
    return 1 if summary.table_errors else 0


class _StopOnSignals:
    """The first SIGTERM/SIGINT sets `stop` (the current batch finishes); a second one interrupts at once."""

    NUMBERS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.previous = {number: signal.getsignal(number) for number in self.NUMBERS}

    def handle(self, number: int, frame: FrameType | None) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt
        log.warning("%s: stopping after the current batch (send it again to stop at once)",
                    signal.Signals(number).name)
        self.stop.set()


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    signals = _StopOnSignals(stop)
    for number in signals.NUMBERS:
        signal.signal(number, signals.handle)
    try:
        yield
    finally:
        for number, earlier in signals.previous.items():
            signal.signal(number, earlier)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


if __name__ == "__main__":
    sys.exit(main())
