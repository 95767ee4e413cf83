"""The pipeline's state document: every table's applied position and snapshot watermarks, the runner's lease
and the recent batches' costs, as dataclasses and their JSON. `offset_store` keeps it, written compare-and-swap.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from cdc_lib.common.failures import Retrying
from cdc_lib.common.formats import STATE_FORMAT, check_format
from cdc_lib.model.positions import BinlogPosition


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class TableState:
    """What the pipeline knows of one table."""

    position: BinlogPosition
    snapshot_low: BinlogPosition
    snapshot_high: BinlogPosition
    snapshot_at: str
    schema: dict[str, Any]
    applied_seq: int = 0
    delta_version: int | None = None
    consistent: bool = False
    rows_snapshotted: int = 0
    error: str | None = None
    last_change_at: str | None = None
    ddl_log: list[dict[str, Any]] = field(default_factory=list)
    #: The latest write met a passing fault (disk full, S3 503, a commit conflict): a later batch retries it.
    retrying: Retrying | None = None
    #: Rows the batches applied to the table since its snapshot, per operation ("insert", "update", "delete"):
    #: counted when the batch's offsets are saved, so a counter that only grows while this snapshot lasts
    #: (docs/production.md "Metrics"; a new snapshot of the table starts it again).
    rows_applied: dict[str, int] = field(default_factory=dict)
    #: A schema change held by `schema_policy: approve` (`pipeline/schema_policy.py`): its statement, the
    #: position before it, when it was met, and whether a person approved it. Durable, so an approval given
    #: after any number of restarts applies to exactly that change.
    schema_change: dict[str, Any] | None = None
    #: The landing rules (`SinkConfig.landing_rules_for`) the table's snapshot was taken under; None: not recorded
    #: (a state of before they were), and the first sync records the rules it runs with.
    landing: dict[str, Any] | None = None
    #: Columns added on the source under `schema_policy: ignore_new_columns`: left out like an excluded column
    #: (in state, not config, so they are not part of `landing`); a new snapshot lands all columns and clears it.
    ignored_columns: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position.to_json(),
            "snapshot_low": self.snapshot_low.to_json(),
            "snapshot_high": self.snapshot_high.to_json(),
            "snapshot_at": self.snapshot_at,
            "schema": self.schema,
            "applied_seq": self.applied_seq,
            "delta_version": self.delta_version,
            "consistent": self.consistent,
            "rows_snapshotted": self.rows_snapshotted,
            "error": self.error,
            "last_change_at": self.last_change_at,
            "ddl_log": self.ddl_log,
            "retrying": self.retrying.to_json() if self.retrying is not None else None,
            "rows_applied": dict(self.rows_applied),
            "schema_change": self.schema_change,
            "landing": self.landing,
            "ignored_columns": list(self.ignored_columns),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableState:
        return cls(
            position=BinlogPosition.from_json(data["position"]),
            snapshot_low=BinlogPosition.from_json(data["snapshot_low"]),
            snapshot_high=BinlogPosition.from_json(data["snapshot_high"]),
            snapshot_at=data["snapshot_at"],
            schema=data["schema"],
            applied_seq=int(data.get("applied_seq", 0)),
            delta_version=data.get("delta_version"),
            consistent=bool(data.get("consistent", False)),
            rows_snapshotted=int(data.get("rows_snapshotted", 0)),
            error=data.get("error"),
            last_change_at=data.get("last_change_at"),
            ddl_log=list(data.get("ddl_log", [])),
            retrying=Retrying.from_json(data.get("retrying")),
            rows_applied={str(name): int(count) for name, count in (data.get("rows_applied") or {}).items()},
            schema_change=data.get("schema_change"),
            landing=data.get("landing"),
            ignored_columns=tuple(str(name) for name in data.get("ignored_columns") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class ProcessIdentity:
    """What tells this process apart from every other one that may share its hostname and PID number.

    Containers often share both (the hostname of the pod or of a `--network host` container; PIDs that
    restart at 1 in each PID namespace), so a hostname + PID proves nothing. The kernel's boot id names one
    boot of one machine; the PID namespace (its inode in /proc/self/ns/pid) names the set of processes a PID
    is unique in; the start time (clock ticks since boot, /proc/<pid>/stat) tells a process from a later one
    that reused its PID. All three are Linux facts; elsewhere they are None and nothing is concluded from them.
    """

    boot_id: str | None
    pid_namespace: str | None
    started_ticks: int | None

    @classmethod
    def of_process(cls, pid: int) -> ProcessIdentity:
        return cls(boot_id=_boot_id(), pid_namespace=_pid_namespace(), started_ticks=_start_ticks(pid))

    @property
    def complete(self) -> bool:
        return None not in (self.boot_id, self.pid_namespace, self.started_ticks)


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _boot_id() -> str | None:
    return _read_text("/proc/sys/kernel/random/boot_id")


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat); None if no such process."""
    text = _read_text(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    fields = text[text.rindex(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


@dataclass
class Lease:
    """Who holds a pipeline, until when.

    `owner` is the holder's identity: a random id drawn by each `StateHandle`, so two runners never
    mistake each other for themselves, whatever hosts, containers or PIDs they share. `host` and `pid`
    are for people reading messages; the process identity (boot id, PID namespace, start time) is what
    lets `holder_is_dead` conclude anything.
    """

    owner: str
    host: str
    pid: int
    expires_at: str
    boot_id: str | None = None
    pid_namespace: str | None = None
    started_ticks: int | None = None

    @classmethod
    def for_this_process(cls, owner: str, *, seconds: float) -> Self:
        me = ProcessIdentity.of_process(os.getpid())
        return cls(
            owner=owner, host=socket.gethostname(), pid=os.getpid(),
            expires_at=(utc_now() + dt.timedelta(seconds=seconds)).isoformat(),
            boot_id=me.boot_id, pid_namespace=me.pid_namespace, started_ticks=me.started_ticks,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)

    def expired(self, now: dt.datetime) -> bool:
        return dt.datetime.fromisoformat(self.expires_at) <= now

    def describe(self) -> str:
        """The holder, for messages: its runner id first (the identity), then where it ran."""
        return f"runner {self.owner[:12]} (pid {self.pid} on host {self.host})"

    def holder_is_dead(self) -> bool:
        """True only when the holder surely no longer runs: a process of this very kernel boot and PID namespace
        whose PID is gone or now belongs to a process started at another time.

        Anything less certain (another machine or container, a lease written without the process identity,
        a system without /proc) is False: the lease then runs out on its own (`offsets.lease_seconds`).
        """
        if self.boot_id is None or self.pid_namespace is None or self.started_ticks is None:
            return False
        me = ProcessIdentity.of_process(os.getpid())
        if not me.complete or (me.boot_id, me.pid_namespace) != (self.boot_id, self.pid_namespace):
            return False
        return _start_ticks(self.pid) != self.started_ticks


@dataclass(frozen=True, kw_only=True)
class BatchRecord:
    """What one micro-batch cost, kept for the catch-up estimate (cdc_lib.status.catch_up)."""

    started_at: str
    #: Wall time of the whole batch: binlog read, MERGEs, offset write.
    seconds: float
    #: Binlog bytes the batch advanced over (from the smallest table offset to the batch end).
    binlog_bytes: int
    #: The batch stopped at its size or time limit, not at the end of the binlog: it measured capacity.
    limited: bool
    #: The server's binlog end when the batch started: a sample of the source's write rate.
    server_end: BinlogPosition | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at, "seconds": self.seconds, "binlog_bytes": self.binlog_bytes,
            "limited": self.limited, "server_end": None if self.server_end is None else self.server_end.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchRecord:
        end = data.get("server_end")
        return cls(
            started_at=data["started_at"], seconds=float(data["seconds"]), binlog_bytes=int(data["binlog_bytes"]),
            limited=bool(data["limited"]), server_end=None if end is None else BinlogPosition.from_json(end),
        )


#: How many batches the state document remembers (a few KB at most, whatever the table count).
RECENT_BATCHES = 20
RECENT_LIMITED_BATCHES = 5

# The state document's layout version lives in cdc_lib/common/formats.py with the others (and the rule for reading
# them).
# (`recent_batches` was added without a bump: a reader that ignores it loses nothing but the estimate.)


@dataclass
class PipelineState:
    pipeline: str
    batch_seq: int = 0
    tables: dict[str, TableState] = field(default_factory=dict)
    lease: Lease | None = None
    server_id: int | None = None
    server_uuid: str | None = None
    recent_batches: list[BatchRecord] = field(default_factory=list)

    def record_batch(self, record: BatchRecord) -> None:
        """Remember a batch's cost (the newest `RECENT_BATCHES`); saved with the batch's offsets, no extra write.

        A few older batches that hit their limit stay too: idle minutes would otherwise push out the only
        batches that measured what binlake can apply.
        """
        records = [*self.recent_batches, record]
        older_limited = [kept for kept in records[:-RECENT_BATCHES] if kept.limited][-RECENT_LIMITED_BATCHES:]
        self.recent_batches = older_limited + records[-RECENT_BATCHES:]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "recent_batches": [record.to_json() for record in self.recent_batches],
            "pipeline": self.pipeline,
            "batch_seq": self.batch_seq,
            "server_id": self.server_id,
            "server_uuid": self.server_uuid,
            "lease": None if self.lease is None else self.lease.__dict__,
            "tables": {name: state.to_json() for name, state in sorted(self.tables.items())},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PipelineState:
        # Guessing at a newer layout could move offsets backwards or drop tables: refuse instead.
        check_format(data, "state document", where=f"of pipeline '{data.get('pipeline')}'")
        lease = data.get("lease")
        return cls(
            pipeline=data["pipeline"],
            batch_seq=int(data.get("batch_seq", 0)),
            tables={name: TableState.from_json(value) for name, value in data.get("tables", {}).items()},
            lease=Lease.from_json(lease) if lease else None,
            server_id=data.get("server_id"),
            server_uuid=data.get("server_uuid"),
            recent_batches=[BatchRecord.from_json(record) for record in data.get("recent_batches", [])],
        )


def document_bytes(document: dict[str, Any]) -> bytes:
    """A stored document as JSON with one line per key, and per entry of a mapping of objects (`tables`).

    Readable like an indented dump, at the C encoder's speed: `indent` switches `json` to its pure-Python
    encoder, 9 ms of a 100-table state's 19 ms save (three saves a batch).
    """

    def line(key: str, value: Any, margin: str) -> str:
        return f"{margin}{json.dumps(key)}: {json.dumps(value, sort_keys=True)}"

    lines = []
    for key, value in sorted(document.items()):
        if isinstance(value, dict) and value and all(isinstance(entry, dict) for entry in value.values()):
            entries = ",\n".join(line(name, entry, "  ") for name, entry in sorted(value.items()))
            lines.append(f" {json.dumps(key)}: {{\n{entries}\n }}")
        else:
            lines.append(line(key, value, " "))
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode()
