"""Binlog files decoded offline as the sync reads them (`binlake binlog decode`): a troubleshooting view.

The files' events reach python-mysql-replication through `binlog_file.FileConnection` (no server, no socket), and
from there the sync's own code reads them: `stream.PayloadsOpened` opens MySQL compressed transactions,
`event_types.handling_of` classifies every event in the closed world, `table_rows.TableDecoder` and `fold_rows`
decode rows events into binlake's values (`model.types`; PARTIAL_UPDATE_ROWS through `json_diff`), and
`ddl.table_effects` judges each statement. What differs from the sync is only where a table's schema comes from:
without a server, from the TABLE_MAP itself (`table_map_schema.table_schema`): column names from its COLUMN_NAME
metadata, or by position (`@1`, `@2`, … as mysqlbinlog numbers them) where the server logged MINIMAL metadata;
signedness and charsets from its SIGNEDNESS and charset metadata (numbers decode as signed when it has none, as
mysqlbinlog does, and text of unknown charset is shown as bytes). Every table the files' TABLE_MAPs name is treated
as followed.

Each event becomes one `DecodedEvent`: where it is, its transaction and GTID, what the sync does with it
(`verdict`) and why, and for rows events the row images in binlake's values.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, PreviousGtidsEvent

from cdc_lib.binlog.binlog_file import HEADER_BYTES, FileConnection, FileEvent, FileEvents, previous_gtids
from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.decode_rows import RowChange, json_diffs, library_rows, redacted
from cdc_lib.binlog.event_types import (
    COMPRESSED_ROWS,
    QUERY_COMPRESSED_EVENT,
    compressed_table_id,
    handling_of,
    query_text,
    raw_event,
    uncompressed_query,
    uncompressed_rows_packet,
)
from cdc_lib.binlog.gtid_events import GTID_TAGGED_LOG_EVENT, tagged_gtid
from cdc_lib.binlog.payload import PayloadError
from cdc_lib.binlog.replication_library import (
    caching_table_maps,
    check_version,
    rebuilt_rows_event,
    stream_setting,
)
from cdc_lib.binlog.stream import PayloadsOpened
from cdc_lib.binlog.table_map_schema import shown_type, table_schema
from cdc_lib.binlog.table_rows import PARTIAL_UPDATE_ROWS_EVENT, TableDecoder, fold_rows
from cdc_lib.binlog.transaction import transaction_control
from cdc_lib.changes.events import Row, TableChanges
from cdc_lib.config.model import BatchConfig, ZeroDatePolicy
from cdc_lib.errors import BinlakeError, BinlogFileError, RowDecodeError
from cdc_lib.model.gtid_sets import GtidSetError
from cdc_lib.model.tables import TableSchema

#: applied: binlake reads and uses it (rows applied, a group opened or committed, a table map kept) · harmless: it
#: cannot change a row · schema_change: a DDL the table pauses at (Delta evolves, or the table stops) ·
#: stops_table: the table it touches stops with an error · stops_all: every followed table stops.
Verdict = Literal["applied", "harmless", "schema_change", "stops_table", "stops_all"]

TRANSACTION_PAYLOAD_EVENT = 40
_FL_STANDALONE = 1  # MariaDB GTID flag: a statement outside BEGIN … COMMIT


@dataclass
class DecodedEvent:
    """One event as the sync reads it. `pos` and `end` are byte positions in `file`; an event inside a compressed
    transaction has the TRANSACTION_PAYLOAD's (and `in_payload`, its 1-based place in it)."""

    file: str
    pos: int
    end: int
    code: int
    type: str
    verdict: Verdict
    why: str = ""
    in_payload: int | None = None
    transaction: int | None = None
    gtid: str | None = None
    table: str | None = None
    operation: str | None = None
    rows: list[RowChange] = field(default_factory=list)
    columns: list[dict[str, Any]] = field(default_factory=list)
    metadata: str | None = None
    statement: str | None = None
    error: str | None = None
    remedy: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class _Recorded(TableChanges):
    """A fold that keeps every row image in order instead of the last change per key."""

    images: list[tuple[str, Row | None, Row | None]] = field(default_factory=list)

    def insert(self, row: Row) -> None:
        self.images.append(("insert", None, row))

    def update(self, before: Row, after: Row) -> None:
        self.images.append(("update", before, after))

    def delete(self, row: Row) -> None:
        self.images.append(("delete", row, None))

    def truncate(self) -> None:
        self.images.append(("truncate", None, None))


@dataclass
class _Table:
    """A TABLE_MAP as the decode knows it: the library's table (by identity), the schema, the decoder or why none."""

    library_table: Any
    schema: TableSchema
    decoder: TableDecoder | None
    error: BinlakeError | None


def decode_files(
    paths: Sequence[Path], *, start: int | None = None, stop: int | None = None, zero_dates: ZeroDatePolicy = "null",
    max_payload_event_bytes: int = BatchConfig.max_payload_event_bytes,
) -> Iterator[DecodedEvent]:
    """The events of `paths` (read in order as one stream, from `start` in the first file to before `stop` in the
    last), each as the sync reads it; see the module docstring.

    Raises:
        BinlogFileError: a file is not a binlog, ends inside an event, or `start` is not an event's start (the events
            before it have been yielded).
    """
    check_version()
    events = FileEvents(paths, start=start, stop=stop)
    yield from _Decoder(events, zero_dates, max_payload_event_bytes).run()


class _Decoder:
    def __init__(self, events: FileEvents, zero_dates: ZeroDatePolicy, max_payload_event_bytes: int) -> None:
        self.events, self.zero_dates = events, zero_dates
        self.max_payload_event_bytes = max_payload_event_bytes
        self.tables: dict[int, _Table] = {}
        self.decoders: dict[TableSchema, TableDecoder | BinlakeError] = {}
        self.schemas: dict[int, tuple[Any, tuple[TableSchema, str, list[str]]]] = {}
        self.names: set[str] = set(_table_map_names(events))
        self.transactions = 0
        self.transaction: int | None = None
        self.gtid: str | None = None
        self.begun = False
        self.payload_at: tuple[str, int] | None = None
        self.payload_index = 0
        self.pending: list[DecodedEvent] = []

    def run(self) -> Iterator[DecodedEvent]:
        events = self.events
        stream = BinLogStreamReader(
            connection_settings={}, server_id=1,
            # As the sync's connections: a TABLE_MAP repeated byte for byte is parsed once (`caching_table_maps`).
            pymysql_wrapper=caching_table_maps(lambda **settings: FileConnection(events, **settings)),
            resume_stream=True, log_file=events.paths[0].name, log_pos=events.start or 4, blocking=False,
            only_events=None, filter_non_implemented_events=False, enable_logging=False,
            # The sync passes PREVIOUS_GTIDS as harmless; the decode shows its set from its bytes (`_headers`),
            # with the same decoder as the replication adapter's (`MysqlGtidSet.decode`).
            ignored_events=[PreviousGtidsEvent],
        )
        self.stream = stream
        payloads = PayloadsOpened(
            stream, self.max_payload_event_bytes,
            current_file=lambda: events.current.file if events.current is not None else "?",
            on_error=self._payload_error,
        )
        try:
            for event in self._library_read(payloads):
                yield from self._flush()
                yield from self._headers()
                decoded = self.event(event)
                if decoded is not None and events.shown:
                    yield decoded
            yield from self._flush()
            yield from self._headers()
        finally:
            stream.close()

    def _library_read(self, payloads: PayloadsOpened) -> Iterator[Any]:
        """The events as the library parses them; an event it cannot parse ends the decode with its place."""
        try:
            yield from payloads.events()
        except BinlakeError:
            raise
        except Exception as exc:  # noqa: BLE001 - the library's own failure on bytes it cannot read
            current = self.events.current
            where = f"{current.file}:{current.pos}" if current is not None else "the end"
            following = f": --start {current.end}" if current is not None else ""
            raise BinlogFileError(
                f"the event at {where} could not be read by python-mysql-replication "
                f"({exc.__class__.__name__}: {str(exc)[:200]}); the sync would fail on it too",
                remedy=f"check that the file is a byte-exact copy; to see what follows, decode past it{following}",
            ) from None

    def _flush(self) -> Iterator[DecodedEvent]:
        while self.pending:
            yield self.pending.pop(0)

    def _headers(self) -> Iterator[DecodedEvent]:
        """The PREVIOUS_GTIDS events read before the current event (see `run`)."""
        skipped = self.events.skipped
        while skipped and skipped[0] is not self.events.current:
            yield self._previous_gtids(skipped.pop(0))
        if skipped and self.events.current is None:
            yield self._previous_gtids(skipped.pop(0))

    def _previous_gtids(self, event: FileEvent) -> DecodedEvent:
        kind = handling_of(event.type_code, 0)
        decoded = DecodedEvent(file=event.file, pos=event.pos, end=event.end, code=event.type_code, type=kind.name,
                               verdict="harmless", why=kind.why)
        gtids = previous_gtids(event, checksum=self.events.format.checksum)
        if gtids is None:
            decoded.notes.append("the GTID set does not decode")
        else:
            decoded.gtid = gtids
        return decoded

    def _payload_error(self, where: str, exc: PayloadError) -> None:
        current = self.events.current
        self.pending.append(DecodedEvent(
            file=current.file if current else "?", pos=current.pos if current else 0, end=current.end if current else 0,
            code=TRANSACTION_PAYLOAD_EVENT, type="TRANSACTION_PAYLOAD_EVENT", verdict="stops_all",
            transaction=self.transaction, gtid=self.gtid,
            error=f"the compressed transaction (binlog_transaction_compression) ending at {where} could not be read "
            f"({exc})",
            remedy="SET GLOBAL binlog_transaction_compression=OFF (MySQL then writes transactions uncompressed), then "
            "re-snapshot the tables: binlake snapshot",
        ))

    # -- one event ------------------------------------------------------------------------------

    def event(self, event: Any) -> DecodedEvent | None:
        current = self.events.current
        if current is None:
            return None
        code = event.event_type
        kind = handling_of(code, event.packet.flags)
        decoded = DecodedEvent(file=current.file, pos=current.pos, end=current.end, code=code, type=kind.name,
                               verdict="applied", why=kind.why)
        if current.type_code == TRANSACTION_PAYLOAD_EVENT:
            at = (current.file, current.pos)
            self.payload_index = self.payload_index + 1 if self.payload_at == at else 1
            self.payload_at = at
            decoded.in_payload = self.payload_index
        handling = kind.handling
        if handling == "gtid":
            self.transactions += 1
            self.transaction = self.transactions
            self.gtid = getattr(event, "gtid", None)
            flags = getattr(event, "flags", 0) if isinstance(event, MariadbGtidEvent) else None
            self.begun = flags is not None and not flags & _FL_STANDALONE
            if code == GTID_TAGGED_LOG_EVENT:
                # python-mysql-replication 1.0.17 does not parse it; the sync reads it with the same decoder.
                body = current.raw[HEADER_BYTES:len(current.raw) - (4 if self.events.format.checksum else 0)]
                try:
                    self.gtid = tagged_gtid(body)
                except GtidSetError as exc:
                    decoded.notes.append(str(exc))
        decoded.transaction, decoded.gtid = self.transaction, self.gtid
        if handling == "rows":
            self.rows(event, decoded)
        elif handling == "context":
            self.table_map(event, decoded)
        elif handling == "query":
            self.query(event, decoded)
        elif handling in ("xid", "xa_prepare"):
            if handling == "xid":
                decoded.why = f"commits the transaction (xid {getattr(event, 'xid', '?')})"
            else:
                decoded.why = "XA PREPARE: its rows wait for the XA COMMIT"
            self.end_group()
        elif handling == "rotate":
            decoded.why = f"the next file is {event.next_binlog} (position {event.position})"
        elif handling == "harmless":
            decoded.verdict = "harmless"
            # The statement behind the rows events that follow (MySQL binlog_rows_query_log_events, MariaDB
            # binlog_annotate_row_events), shown as mysqlbinlog shows it.
            annotation = getattr(event, "sql_statement", None) if code == 160 else (
                getattr(event, "query", None) if code == 29 else None)
            if annotation is not None:
                decoded.statement = redacted(query_text(annotation))
        elif handling == "stop_table":
            decoded.verdict = "stops_table"
            decoded.table = self.table_name(event)
            decoded.error = f"{kind.name} ({kind.why}): binlake cannot apply it exactly"
            decoded.remedy = ("log full row images (binlog_row_image=FULL, binlog_row_value_options='' on MySQL), "
                              "then re-snapshot: binlake snapshot --table db.t")
        elif handling == "stop_all":
            decoded.verdict = "stops_all"
            decoded.error = f"{kind.name} ({kind.why}): binlake cannot turn it into row changes"
            decoded.remedy = "re-snapshot the tables: binlake snapshot --table db.t"
        return decoded

    def end_group(self) -> None:
        self.transaction, self.gtid, self.begun = None, None, False

    def table_name(self, event: Any) -> str | None:
        table_id = getattr(event, "table_id", None)
        if table_id is None:
            table_id = compressed_table_id(raw_event(event, checksum=stream_setting(self.stream, "use_checksum")))
        known = self.tables.get(table_id)
        return known.schema.table.name if known is not None else None

    # -- statements -----------------------------------------------------------------------------

    def query(self, event: Any, decoded: DecodedEvent) -> None:
        if event.event_type == QUERY_COMPRESSED_EVENT:
            try:
                text = uncompressed_query(raw_event(event, checksum=stream_setting(self.stream, "use_checksum")))
            except Exception as exc:  # noqa: BLE001 - the sync stops every table on it; so does the view
                decoded.verdict = "stops_all"
                decoded.error = f"a compressed statement (log_bin_compress) could not be decoded ({exc})"
                decoded.remedy = "SET GLOBAL log_bin_compress=OFF, then re-snapshot the tables: binlake snapshot"
                return
            statement, schema = text.statement, text.schema
        else:
            statement, schema = query_text(event.query), query_text(event.schema)
        decoded.statement = redacted(statement)
        control = transaction_control(statement)
        if control is not None:
            decoded.why = f"transaction control ({control.kind})"
            if control.kind in ("begin", "xa_start"):
                if self.transaction is None:
                    self.transactions += 1
                    decoded.transaction = self.transaction = self.transactions
                self.begun = True
            elif control.kind in ("commit", "rollback", "xa_prepare", "xa_commit", "xa_rollback"):
                self.end_group()
            return
        effects = [effect for effect in table_effects(statement, schema, self.names) if effect.kind != "none"]
        if not effects:
            decoded.verdict = "harmless"
            decoded.why = "changes no row of a table the files' TABLE_MAPs name"
        for effect in effects:
            decoded.table = effect.table
            if effect.kind == "truncate":
                decoded.why = "empties the table (TRUNCATE)"
            elif effect.kind == "schema":
                decoded.verdict = "schema_change"
                decoded.why = "changes the table's columns: the sync pauses the table here, evolves Delta or stops it"
            elif effect.kind == "stop":
                decoded.verdict = "stops_table"
                decoded.error, decoded.remedy = effect.cause, effect.remedy
                break
        if not self.begun:
            self.end_group()  # a statement outside BEGIN … COMMIT is its own group

    # -- table maps -----------------------------------------------------------------------------

    def table_map(self, event: Any, decoded: DecodedEvent) -> None:
        library_table = self.stream.table_map.get(event.table_id)
        # A TABLE_MAP repeated byte for byte is the library's same table (`caching_table_maps`): read it once.
        cached = self.schemas.get(id(library_table))
        if cached is None or cached[0] is not library_table:
            cached = self.schemas[id(library_table)] = (library_table, table_schema(event))
        schema, metadata, notes = cached[1]
        name = schema.table.name
        self.names.add(name)
        decoded.table, decoded.metadata, decoded.notes = name, metadata, decoded.notes + notes
        decoded.why = "the columns of the rows events that follow"
        decoded.columns = [
            {"name": info.name, "type": shown_type(info, column), "nullable": info.nullable,
             "charset": info.character_set, "key": info.name in schema.primary_key}
            for info, column in zip(schema.columns, event.columns, strict=True)
        ]
        # One decoder per schema, as the sync keeps one per table: its generated row reader is built once.
        known = self.decoders.get(schema)
        if known is None:
            try:
                known = self.decoders[schema] = TableDecoder.for_schema(schema, zero_dates=self.zero_dates)
            except BinlakeError as exc:  # a column binlake cannot map: the table's rows stop it
                known = self.decoders[schema] = exc
        if isinstance(known, BinlakeError):
            decoded.notes.append(f"binlake cannot map the table: {known.cause}")
        decoder, error = (None, known) if isinstance(known, BinlakeError) else (known, None)
        self.tables[event.table_id] = _Table(library_table, schema, decoder, error)

    # -- rows -----------------------------------------------------------------------------------

    def rows(self, event: Any, decoded: DecodedEvent) -> None:
        if event.event_type in COMPRESSED_ROWS:
            try:
                rebuilt = rebuilt_rows_event(self.stream, uncompressed_rows_packet(
                    raw_event(event, checksum=stream_setting(self.stream, "use_checksum"))))
            except Exception as exc:  # noqa: BLE001 - an undecodable compressed event stops its table
                decoded.verdict, decoded.table = "stops_table", self.table_name(event)
                decoded.error = f"a compressed rows event (log_bin_compress) could not be decoded ({exc})"
                decoded.remedy = "SET GLOBAL log_bin_compress=OFF, then re-snapshot: binlake snapshot --table db.t"
                return
            if rebuilt is None:
                return
            event = rebuilt
        table = self.tables.get(event.table_id)
        decoded.table = f"{event.schema}.{event.table}"
        decoded.operation = _OPERATIONS.get(event.event_type, "rows")
        if table is None or table.library_table is not self.stream.table_map.get(event.table_id):
            decoded.verdict = "stops_table"
            decoded.error = "a rows event without its TABLE_MAP before it in what was read"
            decoded.remedy = "decode from the start of its transaction (its GTID or BEGIN event): --start POS"
            return
        recorded = _Recorded(key_positions=(0,))
        try:
            if table.decoder is None:
                raise table.error or RowDecodeError("no decoder", remedy="report this as a binlake bug",
                                                    table=decoded.table)
            fold_rows(event, table.decoder, recorded)
        except BinlakeError as exc:
            self.stopped(decoded, exc)
        except Exception as exc:  # noqa: BLE001 - any decode failure belongs to this table alone, as in the sync
            self.stopped(decoded, RowDecodeError(
                f"a row event of the table could not be decoded ({exc.__class__.__name__}: {str(exc)[:200]})",
                remedy=f"check the table's column definitions and data at the source, then re-snapshot: "
                f"binlake snapshot --table {decoded.table}",
                table=decoded.table,
            ))
        else:
            names = table.schema.column_names
            decoded.rows = [
                RowChange(dict(zip(names, before, strict=True)) if before is not None else None,
                          dict(zip(names, after, strict=True)) if after is not None else None)
                for _, before, after in recorded.images
            ]
            if event.event_type == PARTIAL_UPDATE_ROWS_EVENT:
                for change, row in zip(decoded.rows, event.rows, strict=True):
                    change.diffs = json_diffs(row["after_values"])
            return
        decoded.rows = library_rows(event, table.schema)
        if decoded.rows:
            decoded.notes.append("the rows as python-mysql-replication reads them (absent columns left out); the "
                                 "sync applies none of them")

    def stopped(self, decoded: DecodedEvent, error: BinlakeError) -> None:
        decoded.verdict = "stops_table"
        decoded.why = "the sync stops the table at this event's transaction"
        decoded.error = getattr(error, "cause", str(error))
        decoded.remedy = error.remedy


_OPERATIONS = {23: "insert", 30: "insert", 24: "update", 31: "update", 39: "update", 25: "delete", 32: "delete"}
def _table_map_names(events: FileEvents) -> list[str]:
    """The tables the files' TABLE_MAPs name (outside compressed transactions), so a statement is judged against
    every table the files touch, also before its first TABLE_MAP."""
    names = []
    for path in events.paths:
        try:
            scan = FileEvents([path])
            for event, _ in scan:
                if event.type_code == 19:
                    body = event.raw[19:]
                    schema_length = body[8]
                    schema = body[9:9 + schema_length].decode("utf-8", errors="replace")
                    table_length = body[10 + schema_length]
                    table = body[11 + schema_length:11 + schema_length + table_length].decode("utf-8",
                                                                                           errors="replace")
                    names.append(f"{schema}.{table}")
        except (BinlakeError, IndexError, struct.error):
            continue  # the decode itself reports a bad file where it meets it
    return names

