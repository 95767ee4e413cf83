"""A table's snapshot on record: its plan, its finished waves and its lease, one JSON document per table.

The document lives in the offset store beside the pipeline's state (`<pipeline>/snapshots/<table>.json`)
and is written compare-and-swap like it. It exists from a snapshot's start until its result is installed
into the pipeline state (then it is deleted): so the sync finds every snapshot in flight with one listing,
and an idle sync with none in flight pays that one listing only.

Its lease is the table's, not the pipeline's: a snapshot holds it (renewed by `cdc_lib.state.heartbeat`) while
the sync keeps the pipeline's lease and goes on with the other tables (docs/snapshots.md).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import pymysql

from cdc_lib.common.formats import SNAPSHOT_DOCUMENT_FORMAT, check_format
from cdc_lib.errors import ConcurrentRunError, DeltaStateError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.sink import delta_log, fencing
from cdc_lib.source import binlog_status
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offset_store import OffsetStore, StateHandle
from cdc_lib.state.offsets import Lease, PipelineState, TableState, utc_now

log = logging.getLogger("binlake")

SNAPSHOTS_FOLDER = "snapshots"
#: Layout version of a snapshot document (cdc_lib/common/formats.py); a newer one is refused rather than guessed at.
DOCUMENT_FORMAT = SNAPSHOT_DOCUMENT_FORMAT

#: running: waves are being written (or were, by a runner that died); complete: every chunk is in Delta and
#: the result waits to be installed; abandoned: it died before its first commit and the sync let the table go
#: on from its old offset (a later snapshot of the table starts over).
Status = Literal["running", "complete", "abandoned"]


class SnapshotInProgressError(ConcurrentRunError):
    """Another live runner is snapshotting the table."""


def snapshot_application(context: PipelineContext, table: str, snapshot_id: str) -> str:
    """The SetTransaction app id of one snapshot's wave commits (txnVersion = wave number).

    Not the table's own app id: the sync's reconciliation (`table_offsets.reconcile_with_delta`) reads only
    that one, so it never adopts a wave of an unfinished snapshot as the table's offset.
    """
    return f"{context.application(table)}:snapshot:{snapshot_id}"


def document_name(table: str) -> str:
    return f"{SNAPSHOTS_FOLDER}/{table}.json"


def table_of(name: str) -> str:
    return name.removeprefix(f"{SNAPSHOTS_FOLDER}/").removesuffix(".json")


@dataclass
class TableLease(Lease):
    """Who snapshots the table, until when: the pipeline lease's identity (a random owner id per runner, and the
    process identity that alone lets `holder_is_dead` conclude anything: hosts and PIDs repeat across containers)."""

    def free_for(self, owner: str, now: dt.datetime) -> bool:
        return self.owner == owner or self.expired(now) or self.holder_is_dead()


@dataclass(frozen=True, kw_only=True)
class Wave:
    """Chunks [first_chunk, end_chunk) of the plan, read by one Spark job and written in one Delta commit."""

    number: int
    first_chunk: int
    end_chunk: int
    rows: int
    low: BinlogPosition
    high: BinlogPosition
    delta_version: int
    #: Taken back from the Delta log after a crash between the commit and the document's write: its high
    #: watermark is the position seen then (later than the real one: consistency is declared later, never early).
    adopted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number, "first_chunk": self.first_chunk, "end_chunk": self.end_chunk, "rows": self.rows,
            "low": self.low.to_json(), "high": self.high.to_json(), "delta_version": self.delta_version,
            "adopted": self.adopted,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Wave:
        return cls(
            number=int(data["number"]), first_chunk=int(data["first_chunk"]), end_chunk=int(data["end_chunk"]),
            rows=int(data["rows"]), low=BinlogPosition.from_json(data["low"]),
            high=BinlogPosition.from_json(data["high"]), delta_version=int(data["delta_version"]),
            adopted=bool(data.get("adopted", False)),
        )


@dataclass(kw_only=True)
class Correction:
    """The step after the last wave of a soft-delete or history table (`cdc_lib.snapshot.correction`): the binlog
    between the first low and the last high watermark is checked (and, for history, each key it changed is put
    back to its row as of the first low watermark in one Delta commit). On record before that commit is made, so a
    run that dies after the commit finds it in the Delta log by `txn_version` and does not make it twice."""

    #: SetTransaction version of the correction commit (the snapshot's app id), right after the last wave's.
    txn_version: int
    #: Keys changed between the watermarks (history: put back to their row at the first low watermark).
    keys: int = 0
    delta_version: int | None = None
    #: Rows the correction commit added to the table (inserted minus deleted; history only).
    rows_change: int = 0
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Correction:
        version = data.get("delta_version")
        return cls(txn_version=int(data["txn_version"]), keys=int(data.get("keys", 0)),
                   delta_version=None if version is None else int(version),
                   rows_change=int(data.get("rows_change", 0)), done=bool(data.get("done", False)))


@dataclass(kw_only=True)
class SnapshotDocument:
    table: str
    snapshot_id: str
    status: Status
    #: The first low watermark (moved back before any prepared XA branch): the table's offset starts here.
    low: BinlogPosition
    #: The table's schema as of `low`; a resume under another schema starts over.
    schema: dict[str, Any]
    #: Chunk predicates (over `cdc_lib.snapshot.jdbc_read.key_alias` columns), in key order; a resume reads the same
    #: ones.
    plan: list[str]
    plan_method: str
    rows_estimated: int
    mode: str
    started_at: str
    lease: TableLease | None = None
    waves: list[Wave] = field(default_factory=list)
    finished_at: str | None = None
    #: Chunks read by a wave that was written more than once (a resume after a crash before the document
    #: recorded it): the bound on re-reads, for tests and the bench.
    chunks_read: int = 0
    #: Soft-delete and history tables: the server's clock at `low` (ISO, UTC), a history row's first valid_from.
    snapshot_time: str | None = None
    #: Soft-delete and history tables: the step between the last wave and `complete` (None until it begins).
    correction: Correction | None = None
    #: Why the snapshot cannot complete (a TRUNCATE or DDL between its watermarks); only a restart helps.
    refused: str | None = None
    #: Whether its rows carry binlake's metadata columns (`sink.metadata_columns`, fixed when it began: every
    #: wave writes the same columns; source ts `snapshot_time`, applied ts `started_at`).
    metadata_columns: bool = False
    #: The landing rules it was read under (`SinkConfig.landing_rules_for`); the installed table keeps them.
    landing: dict[str, Any] | None = None

    @property
    def needs_correction(self) -> bool:
        """Whether the last wave leaves the snapshot running until `cdc_lib.snapshot.correction` has run."""
        return self.mode != "mirror"

    @property
    def chunks_done(self) -> int:
        return self.waves[-1].end_chunk if self.waves else 0

    @property
    def rows_done(self) -> int:
        """Rows the waves read and wrote."""
        return sum(wave.rows for wave in self.waves)

    @property
    def rows_in_table(self) -> int:
        """Rows the snapshot left in Delta: the waves', give or take a history correction's."""
        return self.rows_done + (self.correction.rows_change if self.correction else 0)

    @property
    def delta_version(self) -> int | None:
        """The snapshot's last Delta commit: the history correction's when it made one, else the last wave's."""
        if self.correction is not None and self.correction.delta_version is not None:
            return self.correction.delta_version
        return self.waves[-1].delta_version if self.waves else None

    @property
    def high(self) -> BinlogPosition:
        """The last high watermark: the table is exact once its offset passes it."""
        return self.waves[-1].high if self.waves else self.low

    def to_json(self) -> dict[str, Any]:
        return {
            "format": DOCUMENT_FORMAT, "table": self.table, "snapshot_id": self.snapshot_id, "status": self.status,
            "low": self.low.to_json(), "schema": self.schema, "plan": self.plan, "plan_method": self.plan_method,
            "rows_estimated": self.rows_estimated, "mode": self.mode, "started_at": self.started_at,
            "lease": None if self.lease is None else self.lease.__dict__,
            "waves": [wave.to_json() for wave in self.waves], "finished_at": self.finished_at,
            "chunks_read": self.chunks_read, "snapshot_time": self.snapshot_time,
            "correction": None if self.correction is None else self.correction.to_json(), "refused": self.refused,
            "metadata_columns": self.metadata_columns, "landing": self.landing,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SnapshotDocument:
        check_format(data, "snapshot document", where=f"of table {data.get('table')}")
        lease = data.get("lease")
        return cls(
            table=data["table"], snapshot_id=data["snapshot_id"], status=data["status"],
            low=BinlogPosition.from_json(data["low"]), schema=data["schema"], plan=list(data["plan"]),
            plan_method=data.get("plan_method", "?"), rows_estimated=int(data.get("rows_estimated", 0)),
            mode=data.get("mode", "mirror"), started_at=data["started_at"],
            lease=TableLease.from_json(lease) if lease else None,
            waves=[Wave.from_json(wave) for wave in data.get("waves", [])],
            finished_at=data.get("finished_at"), chunks_read=int(data.get("chunks_read", 0)),
            snapshot_time=data.get("snapshot_time"),
            correction=Correction.from_json(data["correction"]) if data.get("correction") else None,
            refused=data.get("refused"), metadata_columns=bool(data.get("metadata_columns", False)),
            landing=data.get("landing"),
        )


def read_document(store: OffsetStore, pipeline: str, table: str) -> tuple[SnapshotDocument | None, str | None]:
    raw, token = store.read_document(pipeline, document_name(table))
    return (None, None) if raw is None else (SnapshotDocument.from_json(raw), token)


def documents_in_flight(store: OffsetStore, pipeline: str) -> dict[str, SnapshotDocument]:
    """Every table's snapshot document (running, or complete and not yet installed): one listing, and a read
    per document found, so none when no snapshot is in flight."""
    found = {}
    for name in store.list_documents(pipeline, SNAPSHOTS_FOLDER):
        document, _ = read_document(store, pipeline, table_of(name))
        if document is not None:
            found[document.table] = document
    return found


def snapshot_begun(context: PipelineContext, table: str) -> bool:
    """Whether a snapshot of `table` is in flight now (one read of its document; the sync asks right before it
    MERGEs a changed table, so a snapshot that began after the batch's listing is not written over)."""
    document, _ = read_document(context.store, context.config.pipeline, table)
    return document is not None and document.status != "abandoned"


def delete_document(store: OffsetStore, pipeline: str, table: str) -> None:
    store.delete_document(pipeline, document_name(table))


class DocumentHandle:
    """This runner's hold on one table's snapshot document: every write is conditional on the previous one, and
    extends the table lease. `renew` is what the heartbeat thread calls, hence the lock."""

    def __init__(self, store: OffsetStore, pipeline: str, *, lease_seconds: float) -> None:
        self.store = store
        self.pipeline = pipeline
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex
        self.token: str | None = None
        self.document: SnapshotDocument | None = None
        self._lock = threading.Lock()

    def take(self, document: SnapshotDocument, token: str | None) -> None:
        """Make `document` ours (as read with `token`, or new with None); ConcurrentRunError when another writer
        got there first."""
        with self._lock:
            self.document, self.token = document, token
            self._write()

    def save(self) -> None:
        with self._lock:
            self._write()

    def renew(self) -> None:
        self.save()

    def _write(self) -> None:
        assert self.document is not None
        self.document.lease = TableLease.for_this_process(self.owner, seconds=self.lease_seconds)
        self.token = self.store.write_document(
            self.pipeline, document_name(self.document.table), self.document.to_json(), self.token
        )

    def release(self) -> None:
        """Give the table lease up (the document stays: a later run resumes or installs it)."""
        with self._lock:
            if self.document is None:
                return
            self.document.lease = None
            try:
                self.token = self.store.write_document(
                    self.pipeline, document_name(self.document.table), self.document.to_json(), self.token
                )
            except ConcurrentRunError:
                pass  # taken over meanwhile: the lease is not ours to release


def adopt_committed_waves(
    context: PipelineContext, connection: pymysql.connections.Connection, document: SnapshotDocument
) -> bool:
    """Record the wave the Delta log has and the document lacks (a crash between the commit and the document's
    write: at most one, since a wave starts only after the previous one is recorded); True if one was adopted.

    Its high watermark is the position now: later than the real one, so consistency is declared late, never early.
    """
    path = context.table_path(document.table)
    tail = delta_log.read_log_tail(
        path, application=snapshot_application(context, document.table, document.snapshot_id), storage=context.sink
    )
    commit = tail.last_binlake_commit if tail is not None else None
    if commit is None or commit.txn_version <= len(document.waves):
        return False
    if commit.metadata.get("step") == "correction":
        return False  # not a wave: the correction step finds its own commit (cdc_lib.snapshot.correction)
    if commit.txn_version != len(document.waves) + 1:
        raise DeltaStateError(
            f"the Delta log of {document.table} has wave {commit.txn_version} of snapshot {document.snapshot_id}, "
            f"its document only {len(document.waves)}",
            remedy=f"start the snapshot over: binlake snapshot --restart --table {document.table}",
            table=document.table,
        )
    metadata = commit.metadata
    document.waves.append(Wave(
        number=commit.txn_version, first_chunk=int(metadata["first_chunk"]), end_chunk=int(metadata["end_chunk"]),
        rows=delta_log.written_rows(path, commit.delta_version, storage=context.sink),
        low=BinlogPosition.from_json(metadata["wave_low"]), high=binlog_status.current_position(connection),
        delta_version=commit.delta_version, adopted=True,
    ))
    if document.chunks_done >= len(document.plan) and not document.needs_correction:
        document.status = "complete"
        document.finished_at = utc_now().isoformat()
    log.warning("snapshot of %s: wave %d taken from the Delta log", document.table, commit.txn_version)
    return True


def install(state: PipelineState, document: SnapshotDocument) -> bool:
    """Put a complete snapshot into the pipeline state, as a one-shot snapshot leaves it; False when it is there.

    The offset starts at the first low watermark and the table is consistent once it passes the last high one.
    `applied_seq` is the pipeline's batch sequence: the table's own app id may carry commits of before this
    snapshot (a re-snapshot), which must never be taken for newer ones; the next MERGE takes a higher sequence.
    """
    current = state.tables.get(document.table)
    if current is not None and current.snapshot_low == document.low and current.snapshot_high == document.high:
        return False
    state.tables[document.table] = TableState(
        position=document.low,
        snapshot_low=document.low,
        snapshot_high=document.high,
        snapshot_at=document.finished_at or utc_now().isoformat(),
        schema=document.schema,
        applied_seq=state.batch_seq,
        delta_version=document.delta_version,
        consistent=document.high <= document.low,
        rows_snapshotted=document.rows_in_table,
        ddl_log=current.ddl_log if current else [],
        landing=document.landing,
    )
    log.info("snapshot of %s installed: offset %s, consistent past %s", document.table, document.low, document.high)
    return True


def keep_record(store: OffsetStore, pipeline: str, document: SnapshotDocument) -> None:
    """Keep an installed snapshot's document under `snapshots-done/` (what it read, for status and tests)."""
    name = f"{SNAPSHOTS_FOLDER}-done/{document.table}.json"
    _, token = store.read_document(pipeline, name)
    try:
        store.write_document(pipeline, name, document.to_json(), token)
    except ConcurrentRunError:
        pass  # two installers raced to keep the same record


def settle_snapshots(
    context: PipelineContext, handle: StateHandle, connection: pymysql.connections.Connection
) -> dict[str, str]:
    """What the holder of the pipeline lease does with the snapshots in flight, at the start of each batch.

    Complete ones are installed (state saved, then the document removed); running ones are left alone and
    their tables skipped this batch (returned with the reason) — unless the runner died: then the waves it
    committed are taken from the Delta log (a snapshot whose every chunk is there is complete), and one that
    died before its first commit is abandoned, so the table goes on from its old offset.
    """
    store, pipeline = context.store, context.config.pipeline
    names = store.list_documents(pipeline, SNAPSHOTS_FOLDER)
    if not names:
        return {}
    in_flight: dict[str, str] = {}
    complete: list[SnapshotDocument] = []
    now = utc_now()
    for name in names:
        document, token = read_document(store, pipeline, table_of(name))
        if document is None or document.status == "abandoned":
            continue
        if document.status == "running" and (document.lease is None or document.lease.free_for("", now)):
            if _settle_orphan(context, connection, document, token):
                continue
        if document.status == "complete":
            complete.append(document)
            continue
        if document.refused:
            in_flight[document.table] = f"snapshot {document.snapshot_id} refused: {document.refused}"
            continue
        in_flight[document.table] = (
            f"snapshot {document.snapshot_id} in flight: {document.chunks_done}/{len(document.plan)} chunks"
            + ("" if document.lease is not None and not document.lease.free_for("", now)
               else f" (interrupted; resume it: binlake snapshot --table {document.table})")
        )
    changed = [document for document in complete if install(handle.state, document)]
    if changed:
        handle.save()
    for document in complete:
        keep_record(store, pipeline, document)
        delete_document(store, pipeline, document.table)
    return in_flight


def _settle_orphan(
    context: PipelineContext, connection: pymysql.connections.Connection, document: SnapshotDocument,
    token: str | None,
) -> bool:
    """A running snapshot whose runner is gone: complete it from the Delta log, or abandon it when it wrote
    nothing; True when the document was changed (a write conditional on `token`: a runner resuming it wins)."""
    adopted = adopt_committed_waves(context, connection, document)
    if not document.waves:
        # The runner may only be paused (SIGSTOP, a VM, a GC): before the table goes on without its snapshot, a
        # fence makes any wave it still commits fail in the Delta log (cdc_lib/sink/fencing.py); a wave that landed
        # before the fence is in the log now, and is adopted instead.
        application = snapshot_application(context, document.table, document.snapshot_id)
        fencing.fence_table(
            context.table_path(document.table), fences={application: fencing.SUPERSEDED}, storage=context.sink,
            spark=context.spark, spark_conf=context.config.spark.conf,
            metadata={"pipeline": context.config.pipeline, "table": document.table, "by": "sync: abandoned"},
        )
        adopted = adopt_committed_waves(context, connection, document)
    if not document.waves:
        document.status = "abandoned"
    elif not adopted or document.status != "complete":
        return False
    try:
        context.store.write_document(context.config.pipeline, document_name(document.table), document.to_json(),
                                     token)
    except ConcurrentRunError:
        document.status = "running"  # a runner took it over meanwhile: it is in flight again
        return False
    return document.status == "abandoned"


__all__ = [
    "Correction",
    "SnapshotInProgressError", "adopt_committed_waves", "install", "settle_snapshots", "snapshot_application",
    "snapshot_begun",
    "DocumentHandle", "SnapshotDocument", "TableLease", "Wave", "delete_document", "document_name",
    "documents_in_flight", "read_document",
]
