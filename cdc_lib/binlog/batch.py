"""One read of the binlog, event group by event group: a batch's transactions → each table's changes.

`BinlogRead` is fed the events the stream (`cdc_lib.binlog.stream`) reads: it keeps the open event group
(`transaction.OpenTransaction`), decides which tables each committed transaction applies to (their own
offsets, or GTID states after a failover), stops a table at the group that broke it, and holds tables
with rows in an XA branch still prepared. `BatchRead` is what the read produced.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent

from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.event_types import compressed_table_id, raw_event, uncompressed_rows_packet
from cdc_lib.binlog.replication_library import rebuilt_rows_event, stream_setting
from cdc_lib.binlog.table_rows import TableDecoder, fold_rows
from cdc_lib.binlog.transaction import (
    OpenTransaction,
    PreparedXas,
    Transactional,
    XaId,
    engine_kind,
    transaction_control,
)
from cdc_lib.changes.columns import ColumnShape
from cdc_lib.changes.events import CommitStamp, Row, TableChanges, batch_changes
from cdc_lib.changes.metadata_columns import StampedChanges
from cdc_lib.changes.spill import ChangeLog, SpilledChanges, SpillSegment, default_spill_root, spill_folder
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import BatchConfig, SourceConfig, TableMode
from cdc_lib.errors import (
    BooleanValueError,
    ColumnRulesError,
    KeyMappingError,
    RowDecodeError,
    SchemaChangeError,
    ServerSettingsError,
    SourceConnectionError,
    UnreadableEventError,
    ZeroDateError,
)
from cdc_lib.model.collated import Question, TextAnswers
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet
from cdc_lib.model.positions import (
    BinlogPosition,
    ServerIdentity,
    advance_state,
    earliest_state,
    transaction_applied,
)
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import check_key_columns
from cdc_lib.source.server import query, source_connection
from cdc_lib.source.text_compare import ServerComparisons, answer_cache


@dataclass(frozen=True)
class TableCursor:
    """A table as the reader sees it: its offset and the schema rows decode into."""

    name: str
    position: BinlogPosition
    schema: TableSchema
    #: How the table keeps changes (config.TableMode): soft-delete and history tables fold with commit stamps.
    mode: TableMode = "mirror"
    #: Whether its rows carry the source commit time for binlake's metadata columns (cdc_lib.changes.metadata_columns).
    metadata_columns: bool = False
    #: Its column projection and masks (cdc_lib.changes.columns); None: every column in clear.
    shape: ColumnShape | None = None

    @property
    def sink_schema(self) -> TableSchema:
        """The schema its rows have once decoded, and the sink writes (`schema` is the source's, decoded from)."""
        return self.schema if self.shape is None else self.shape.schema


@dataclass(frozen=True)
class TableFailure:
    """A table that must stop: `position` is the boundary before the transaction that broke it."""

    error: Exception
    position: BinlogPosition


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement on a followed table; the table pauses there until the pipeline has handled it."""

    statement: str
    before: BinlogPosition
    after: BinlogPosition


@dataclass
class BatchRead:
    """What one read of the binlog produced."""

    start: BinlogPosition
    end: BinlogPosition
    changes: dict[str, TableChanges] = field(default_factory=dict)
    table_errors: dict[str, TableFailure] = field(default_factory=dict)
    schema_changes: dict[str, SchemaChange] = field(default_factory=dict)
    events_read: int = 0
    row_changes: int = 0
    transactions: int = 0
    reached_end: bool = False
    last_event_time: dt.datetime | None = None
    seconds: float = 0.0
    #: Read from the tables' GTID state on a server other than the one their offsets were written on.
    by_gtid: bool = False
    #: Tables with rows in an XA branch prepared and not yet committed or rolled back in what was read:
    #: their offset stays at the start of its PREPARE group (see `end_for`).
    held: dict[str, BinlogPosition] = field(default_factory=dict)

    def end_for(self, name: str) -> BinlogPosition:
        """Where the table's offset goes after this read.

        A table stopped by an error or paused at a DDL stays at that boundary. A table with rows in a
        branch still prepared stays before its PREPARE, even though later transactions of the read are
        applied to it: the next read replays from there, and replaying a stretch of binlog that was
        applied already converges to the same rows (every change carries full row images and the fold
        keeps the last one per key), while the branch's rows are read again with their COMMIT.
        """
        failure = self.table_errors.get(name)
        if failure is not None:
            return failure.position
        change = self.schema_changes.get(name)
        if change is not None:
            return change.before
        return self.held.get(name, self.end)

    def stopped(self, name: str) -> bool:
        return name in self.table_errors or name in self.schema_changes

    def relevant_changes(self) -> dict[str, TableChanges]:
        return {name: changes for name, changes in self.changes.items() if not changes.empty}


# MariaDB GTID event flags (sql/log_event.h).
_FL_STANDALONE = 1
_FL_PREPARED_XA = 64
_FL_COMPLETED_XA = 128


class BinlogRead:
    """One read of the binlog: the table cursors, the open event group, and what the read has produced.

    Transaction boundaries: an XID, a COMMIT or ROLLBACK statement, a standalone statement (DDL), an
    XA PREPARE (its rows are parked until the XA COMMIT or XA ROLLBACK group), and the XA COMMIT or
    XA ROLLBACK statement itself. A batch ends only at one of them.
    """

    def __init__(self, source: SourceConfig, cursors: list[TableCursor], server: ServerIdentity | None,
                 spill: SpillPlan | None = None) -> None:
        self.source = source
        self.spill = spill or SpillPlan()
        self.logs: dict[str, ChangeLog] = {}
        self.start = min((cursor.position for cursor in cursors), key=lambda position: position.sort_key)
        self.by_gtid = server is not None and any(not cursor.position.written_on(server) for cursor in cursors)
        self.by_name = {cursor.name: cursor for cursor in cursors}
        # A row filter comparing text is answered by the server (docs/row-filters.md): one connection for the read,
        # opened only if some answer is not known yet.
        asking = any(cursor.shape is not None and cursor.shape.row_filter is not None
                     and cursor.shape.row_filter.asks_server for cursor in cursors)
        self.comparisons = ServerComparisons(source) if asking else None
        self.answers = None if self.comparisons is None else TextAnswers(self.comparisons, answer_cache(source))
        self.decoders = {
            cursor.name: TableDecoder.for_schema(cursor.schema, zero_dates=source.zero_dates, shape=cursor.shape,
                                                 answers=self.answers)
            for cursor in cursors
        }
        #: Row images decoded ahead of their turn (`decode_ahead`, by event id), and the comparisons they need.
        self.decoded: dict[int, list[Row]] = {}
        self.questions: list[Question] = []
        self.result = BatchRead(start=self.start, end=self.start, by_gtid=self.by_gtid)
        for cursor in cursors:  # a table snapshotted before binlake refused its key type stops where it is
            try:
                check_key_columns(cursor.schema.columns, cursor.schema.primary_key, table=cursor.name)
            except KeyMappingError as exc:
                self.result.table_errors[cursor.name] = TableFailure(exc, cursor.position)
        self.modes = {cursor.name: cursor.mode for cursor in cursors}
        # Only soft-delete and history tables need each commit's time and order (mirror tables skip the cost).
        self.stamped = any(mode != "mirror" for mode in self.modes.values()) or any(
            cursor.metadata_columns for cursor in cursors
        )
        self.start_state = earliest_state([cursor.position.gtid for cursor in cursors]) if self.by_gtid else None
        self.gtid: str | None = self.start_state if self.by_gtid else self.start.gtid
        #: `gtid` parsed, on MySQL: advancing a parsed set costs a tenth of parsing its text per transaction.
        self.executed: MysqlGtidSet | None = None
        self.identity = server or self.start.server
        self.current_file = self.start.file
        # A GTID dump skips the transactions we have on the server side, so offsets seen before the first
        # transaction arrives may lie before skipped ones: only commits anchor positions on the new server.
        self.anchored = not self.by_gtid
        self.boundary = self.start  # where the open (or next) event group starts
        self.transaction: OpenTransaction | None = None
        #: Inside BEGIN … COMMIT (rather than between groups, or after a GTID of a standalone statement).
        self.begun = False
        self.prepared = PreparedXas()
        self.engines: dict[str, Transactional] | None = None
        self.altered: dict[str, str] = {}  # table → DDL statement of the open group that changed its shape
        self.rows_seen = False

    # -- positions --------------------------------------------------------------------------

    def behind(self, name: str, start: BinlogPosition, gtid: str | None) -> bool:
        """Whether a transaction (starting at `start`, GTID `gtid`) lies before the table's own offset."""
        if self.by_gtid:
            return gtid is not None and transaction_applied(self.by_name[name].position.gtid, gtid)
        return start < self.by_name[name].position

    def resume_point(self, name: str) -> BinlogPosition:
        """Where a table that stops at the open group resumes.

        Before a GTID read has anchored on this server, the boundary may still be another table's offset
        (ahead of this one); resuming there would skip transactions, so the table keeps its own.
        """
        return self.boundary if self.anchored else self.by_name[name].position

    def open(self) -> OpenTransaction:
        if self.transaction is None:
            self.transaction = OpenTransaction(self.boundary, self._key_positions, mode_of=self.modes.__getitem__,
                                               spill_fold=self._spill_segment)
        return self.transaction

    def _key_positions(self, name: str) -> tuple[int, ...]:
        return self.decoders[name].key_positions

    # -- spilling (cdc_lib.changes.spill) -------------------------------------------------------------

    def _log_of(self, name: str) -> ChangeLog:
        change_log = self.logs.get(name)
        if change_log is None:
            change_log = self.logs[name] = ChangeLog(
                spill_folder(self.spill.root, name), self.by_name[name].sink_schema, mode=self.modes[name],
                key_positions=self.decoders[name].key_positions, limit=self.spill.limit,
            )
        return change_log

    def _spill_segment(self, name: str) -> TableChanges | None:
        if name not in self.spill.tables:
            return None
        return SpillSegment(self.decoders[name].key_positions, log=self._log_of(name))

    def _batch_fold(self, name: str) -> TableChanges:
        if name in self.spill.tables:
            return SpilledChanges(self.decoders[name].key_positions, log=self._log_of(name))
        if self.by_name[name].metadata_columns:
            return StampedChanges(self.decoders[name].key_positions)
        return batch_changes(self.modes[name], self.decoders[name].key_positions)

    def check_buffered(self, name: str, transaction: OpenTransaction) -> None:
        """Past `batch.max_buffered_changes` row images of one table in memory, the read restarts spilling it."""
        if name in self.spill.tables or self.by_name[name].metadata_columns:
            # A spilled fold keeps no commit times: a table with metadata columns is held in memory.
            return
        folded = self.result.changes.get(name)
        if transaction.buffered(name) + (folded.buffered if folded is not None else 0) > self.spill.limit:
            raise SpillNeeded(name)

    def discard_spills(self) -> None:
        for change_log in self.logs.values():
            change_log.remove()

    def applies_to(self, name: str) -> bool:
        transaction = self.transaction
        start = transaction.start if transaction is not None else self.boundary
        gtid = transaction.gtid if transaction is not None else None
        return not self.result.stopped(name) and not self.behind(name, start, gtid)

    # -- stopping tables --------------------------------------------------------------------

    def stop(self, name: str, error: Exception) -> None:
        """Stop a table at the open group: its earlier transactions of this read still apply."""
        if not self.applies_to(name):
            return
        self.result.table_errors[name] = TableFailure(error, self.resume_point(name))
        if self.transaction is not None:
            self.transaction.discard_table(name)

    def pass_oversized(self, name: str | None, refusal: Exception) -> bool:
        """An event of a compressed transaction beyond `batch.max_payload_event_bytes` (`payload.Oversized`).

        Rows of a table this read does not follow are passed over; rows of a followed table stop that table here
        (the others go on); anything else (no table named) ends the read as before.
        """
        if name is None:
            return False
        if name in self.by_name:
            self.stop(name, refusal)
        return True

    def stop_all(self, cause: str, remedy: str) -> None:
        for name in self.by_name:
            self.stop(name, UnreadableEventError(cause, remedy=remedy, table=name))

    # -- event groups -----------------------------------------------------------------------

    def gtid_event(self, event: Any, tagged: str | None = None) -> None:
        """A group starts; `tagged` is the GTID of a GTID_TAGGED event (read by `gtid_events`, not the library)."""
        gtid = tagged or getattr(event, "gtid", None)
        self.transaction = None
        self.altered = {}
        transaction = self.open()
        if gtid:
            transaction.gtid = gtid
            self.advance(gtid)
        flags = getattr(event, "flags", 0) if isinstance(event, MariadbGtidEvent) else None
        # MariaDB: a GTID without FL_STANDALONE opens the group as BEGIN would (no BEGIN event follows).
        self.begun = flags is not None and not flags & _FL_STANDALONE

    def advance(self, gtid: str) -> None:
        """The GTID state past transaction `gtid`: per domain on MariaDB (``d-s-n``), a growing set on MySQL."""
        if ":" not in gtid:
            self.gtid = advance_state(self.gtid, gtid)
            return
        try:
            if self.executed is None:
                self.executed = MysqlGtidSet.parse(self.gtid)
            self.executed = self.executed.add(gtid)
            self.gtid = str(self.executed)
        except GtidSetError:  # an unparsable set still leaves the transaction's own GTID
            self.executed, self.gtid = None, gtid

    def commit(self, end_pos: int, event_time: int, changes: dict[str, TableChanges] | None = None,
               *, rows: int | None = None, start: BinlogPosition | None = None, gtid: str | None = None) -> None:
        """End the open group at `end_pos` (binlog offset after its last event), applying `changes`."""
        transaction = self.transaction
        if changes is None:
            changes = transaction.folded() if transaction is not None else {}
            rows = transaction.row_changes if transaction is not None else 0
            start = transaction.start if transaction is not None else self.boundary
            gtid = transaction.gtid if transaction is not None else None
        result = self.result
        before = self.boundary
        self.anchored = True
        end = BinlogPosition(self.current_file, end_pos, self.gtid, self.identity)
        stamp = (
            CommitStamp(dt.datetime.fromtimestamp(event_time, dt.UTC), result.transactions + 1, end)
            if self.stamped else None
        )
        for name, table_changes in changes.items():
            if result.stopped(name) or self.behind(name, start or before, gtid):
                continue
            folded = result.changes.get(name)
            if folded is None:
                folded = result.changes[name] = self._batch_fold(name)
            folded.merge_from(table_changes, stamp)
        for name, statement in self.altered.items():
            if not result.stopped(name):
                result.schema_changes[name] = SchemaChange(statement[:2000], self.resume_point(name), end)
        result.row_changes += rows or 0
        result.transactions += 1
        result.end = end
        result.last_event_time = dt.datetime.fromtimestamp(event_time, dt.UTC)
        self.end_group(end)

    def end_group(self, end: BinlogPosition) -> None:
        self.boundary = end
        self.transaction = None
        self.begun = False
        self.altered = {}

    # -- rows -------------------------------------------------------------------------------

    def decode_ahead(self, event: Any) -> int:
        """Decode a rows event of a table whose row filter compares text before its turn (`filter_window`), noting
        the comparisons its images need; returns how many images it holds (0: left to its turn)."""
        name = f"{getattr(event, 'schema', '')}.{getattr(event, 'table', '')}"
        decoder = self.decoders.get(name)
        if decoder is None or not decoder.asks_server or self.result.stopped(name):
            return 0
        try:
            images = decoder.fast.images(event)
        except Exception:  # noqa: BLE001 - decoded again at its turn, where a failure stops the table as it should
            return 0
        if images is None:
            return 0
        self.decoded[id(event)] = images
        decoder.questions_of(images, self.questions)
        return len(images)

    def ask_ahead(self) -> bool:
        """Ask the server every comparison noted by `decode_ahead` it has no answer for; whether any were noted."""
        if self.answers is None or not self.questions:
            return False
        questions, self.questions = self.questions, []
        self.answers.prefetch(questions)
        return True

    def rows_event(self, event: Any) -> None:
        name = f"{event.schema}.{event.table}"
        decoder = self.decoders.get(name)
        ahead = self.decoded.pop(id(event), None)
        if decoder is None or self.result.stopped(name):
            return
        transaction = self.open()
        changes = transaction.changes_for(name)
        try:
            fold_rows(event, decoder, changes, ahead)
            if not self.rows_seen:
                self.rows_seen = True
                failpoint("binlog_mid_read")  # once per batch, after its first rows event
        except ZeroDateError as exc:
            if not self.applies_to(name):
                return  # a transaction the table has already: its rows are dropped at the commit
            # Nothing of this batch reaches the table: it stays where it was, stopped.
            self.result.table_errors[name] = TableFailure(exc, self.by_name[name].position)
            self.result.changes.pop(name, None)
            transaction.discard_table(name)
        except SourceConnectionError:
            raise  # the server asked about a row filter's text went away: a passing fault, the whole read is retried
        except (SchemaChangeError, ServerSettingsError, UnreadableEventError, BooleanValueError) as exc:
            self.stop(name, exc)
            transaction.discard_table(name)
        except ColumnRulesError as exc:  # the server refused a row filter's text comparison
            self.stop(name, ColumnRulesError(exc.cause, remedy=exc.remedy or "", table=name))
            transaction.discard_table(name)
        except Exception as exc:  # noqa: BLE001 - any decode failure belongs to this table alone
            self.stop(name, _decode_error(name, event, exc, self.boundary,
                                          masked=self.by_name[name].shape is not None))
            transaction.discard_table(name)
        else:
            self.check_buffered(name, transaction)

    def compressed_rows(self, stream: BinLogStreamReader, event: Any) -> None:
        raw = raw_event(event, checksum=stream_setting(stream, "use_checksum"))
        table = stream.table_map.get(compressed_table_id(raw))
        name = f"{table.schema}.{table.table}" if table is not None else None
        if name not in self.decoders:
            return  # not a followed table (their table maps are the only ones kept)
        try:
            decoded = rebuilt_rows_event(stream, uncompressed_rows_packet(raw))
        except Exception as exc:  # noqa: BLE001 - an undecodable compressed event stops its table
            self.stop(name, UnreadableEventError(
                f"a compressed rows event (log_bin_compress) at {self.current_file}:{event.packet.log_pos} "
                f"could not be decoded ({exc.__class__.__name__}: {exc})",
                remedy=f"SET GLOBAL log_bin_compress=OFF, then re-snapshot: binlake snapshot --table {name}",
                table=name,
            ))
            return
        if decoded is not None:
            self.rows_event(decoded)

    # -- statements -------------------------------------------------------------------------

    def query(self, statement: str, schema: str, end_pos: int, event_time: int) -> None:
        control = transaction_control(statement)
        if control is None:
            self.statement(statement, schema)
            if not self.begun:
                self.commit(end_pos, event_time)  # a standalone statement is its own group
            return
        kind = control.kind
        if kind in ("begin", "xa_start"):
            self.open().xa = control.xid
            self.begun = True
        elif kind == "commit":
            self.commit(end_pos, event_time)
        elif kind == "savepoint":
            self.open().savepoint(control.name)
        elif kind == "release":
            self.open().release(control.name)
        elif kind in ("rollback_to", "rollback"):
            transaction = self.open()
            engines = self.table_engines() if not transaction.empty else {}
            kind_of = lambda name: engines.get(name, "unknown")  # noqa: E731
            if kind == "rollback":
                unknown = transaction.rollback(kind_of)
            else:
                unknown = transaction.rollback_to(control.name, kind_of)
            for name in unknown:
                self.stop(name, UnreadableEventError(
                    f"a partial rollback ({statement[:80]}) touched the table, whose storage engine binlake "
                    "does not know to be transactional or not",
                    remedy=f"use InnoDB (or MyISAM/Aria) for the table, then re-snapshot: "
                    f"binlake snapshot --table {name}",
                    table=name,
                ))
            if kind == "rollback":
                self.commit(end_pos, event_time)  # what persisted (non-transactional tables) applies
        elif kind == "xa_end":
            pass  # the branch's rows are complete; XA PREPARE (or a one-phase commit) follows
        elif kind == "xa_prepare":
            self.xa_prepare(control.xid, end_pos)
        elif kind in ("xa_commit", "xa_rollback"):
            if control.one_phase and self.transaction is not None and not self.transaction.empty:
                self.commit(end_pos, event_time)  # MySQL may log a one-phase commit as its statement
                return
            self.xa_resolve(control.xid, commit=kind == "xa_commit", end_pos=end_pos, event_time=event_time)

    def statement(self, statement: str, schema: str) -> None:
        """A statement that is not transaction control: what it does to followed tables decides."""
        for effect in table_effects(statement, schema, self.by_name):
            name = effect.table
            if name not in self.by_name or not self.applies_to(name):
                continue
            if self.prepared.holding(name) is not None and effect.kind != "none":
                # A prepared XA branch holds the table's locks, so its DDL cannot run before the branch
                # ends; should one come anyway the table stops rather than lose the branch's rows.
                self.stop(name, SchemaChangeError(
                    f"a statement changed the table while an XA transaction on it was prepared: {statement[:120]}",
                    remedy=f"re-snapshot the table: binlake snapshot --table {name}", table=name,
                ))
                continue
            if effect.kind == "truncate":
                self.open().changes_for(name).truncate()
            elif effect.kind == "schema":
                self.altered.setdefault(name, statement)
            elif effect.kind == "stop":
                self.stop(name, SchemaChangeError(effect.cause, remedy=effect.remedy, table=name))

    # -- XA ---------------------------------------------------------------------------------

    def xa_prepare(self, xid: XaId | None, end_pos: int) -> None:
        """XA PREPARE ends the branch's event group; its rows wait for the XA COMMIT."""
        transaction = self.open()
        xid = xid or transaction.xa or XaId(b"")
        self.prepared.prepare(transaction, xid)
        self.anchored = True
        end = BinlogPosition(self.current_file, end_pos, self.gtid, self.identity)
        # Tables without rows in the branch may move past it; those with rows are held (see `finish`).
        self.result.end = end
        self.end_group(end)

    def xa_resolve(self, xid: XaId | None, *, commit: bool, end_pos: int, event_time: int) -> None:
        prepared = self.prepared.resolve(xid) if xid is not None else None
        if prepared is None:
            # Its PREPARE lies before the read: no followed table still waits for it (a table's offset
            # never moves past an unresolved PREPARE of its rows, and a snapshot starts before one).
            self.commit(end_pos, event_time, {}, rows=0)
            return
        if commit:
            self.commit(end_pos, event_time, prepared.changes, rows=prepared.row_changes, start=prepared.start,
                        gtid=prepared.gtid)
        else:
            self.commit(end_pos, event_time, {}, rows=0)

    # -- engines ----------------------------------------------------------------------------

    def table_engines(self) -> dict[str, Transactional]:
        """Each followed table's engine kind, asked once per read (only when a rollback is logged)."""
        if self.engines is None:
            refs = [cursor.schema.table for cursor in self.by_name.values()]
            placeholders = ", ".join(["(%s, %s)"] * len(refs))
            arguments = [part for ref in refs for part in (ref.database, ref.table)]
            with source_connection(self.source) as connection:
                rows = query(connection, "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES "
                             f"WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({placeholders})", arguments)
            self.engines = {f"{row[0]}.{row[1]}": engine_kind(row[2]) for row in rows}
        return self.engines

    # -- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        """End the connection the row filters' text comparisons were asked on, if one was opened."""
        if self.comparisons is not None:
            self.comparisons.close()

    def finish(self) -> None:
        """Tables with rows in a branch still prepared keep their offset before its PREPARE."""
        result = self.result
        for prepared in self.prepared.by_xid.values():
            for name in prepared.changes:
                if name not in self.by_name or self.behind(name, prepared.start, prepared.gtid):
                    continue
                held = min(result.held.get(name, prepared.start), prepared.start, key=_sort_key)
                failure = result.table_errors.get(name)
                if failure is not None:
                    if held < failure.position:
                        result.table_errors[name] = TableFailure(failure.error, held)
                elif name not in result.schema_changes:
                    result.held[name] = held


@dataclass(frozen=True)
class SpillPlan:
    """Which tables a read spills to Parquet (cdc_lib.changes.spill), past how many row images, and where."""

    tables: frozenset[str] = frozenset()
    limit: int = BatchConfig.max_buffered_changes
    root: Path = field(default_factory=default_spill_root)


class SpillNeeded(Exception):  # noqa: N818 - a signal to read_batch, never raised out of it
    def __init__(self, table: str) -> None:
        super().__init__(table)
        self.table = table


def _decode_error(name: str, event: Any, exc: Exception, boundary: BinlogPosition, *,
                  masked: bool = False) -> RowDecodeError:
    position = f"{boundary.file}:{getattr(event.packet, 'log_pos', '?')}"
    # A decoder's message may quote the value it failed on: for a table with column rules, that value may be one
    # the rules keep out of every message (docs/columns-and-masking.md), so only the error's kind is named.
    detail = exc.__class__.__name__ if masked else f"{exc.__class__.__name__}: {str(exc)[:200]}"
    return RowDecodeError(
        f"a row event of the table at {position} could not be decoded ({detail})",
        remedy=f"check the table's column definitions and data at the source, then re-snapshot: "
        f"binlake snapshot --table {name}",
        table=name,
    )


def _sort_key(position: BinlogPosition) -> tuple[int, str, int]:
    return position.sort_key

