"""Offset store: the pipeline's state document, written compare-and-swap.

One JSON document per pipeline holds every table's applied position, its
snapshot watermarks and the runner's lease. Writes are conditional (S3
If-Match / If-None-Match; a local folder uses a lock file and an atomic
rename), so two runners can never both move the offsets.
"""

from __future__ import annotations

import copy
import datetime as dt
import fcntl
import json
import os
import socket
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from cdc_lib.common.failures import Retrying
from cdc_lib.common.formats import STATE_FORMAT, check_format
from cdc_lib.common.s3 import S3Credentials, S3Settings, describe_s3_failure, s3_client, split_s3_uri
from cdc_lib.common.s3 import s3_error_code as _s3_code
from cdc_lib.common.s3 import transient_s3_failure as _transient_s3_failure
from cdc_lib.config.model import OffsetsConfig
from cdc_lib.errors import ConcurrentRunError, OffsetStoreError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.state.heartbeat import Heartbeat, LeaseLostError

STATE_FILE = "state.json"


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


class OffsetStore(ABC):
    """A place for one state document per pipeline, with conditional writes."""

    @abstractmethod
    def read(self, pipeline: str) -> tuple[PipelineState | None, str | None]:
        """Return the state and a token for the next conditional write (None, None if absent)."""

    @abstractmethod
    def write(self, state: PipelineState, token: str | None) -> str:
        """Write if the stored document still carries `token`; return the new token.

        Raises:
            ConcurrentRunError: another writer changed the document since `token`.
        """

    @abstractmethod
    def describe(self) -> str:
        """Where the store lives, for messages."""

    # Named documents beside the state (e.g. `snapshots/<table>.json`), written compare-and-swap like it.

    @abstractmethod
    def read_document(self, pipeline: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """The JSON document `name` (a relative path such as `snapshots/db.t.json`) and its write token."""

    @abstractmethod
    def write_document(self, pipeline: str, name: str, document: dict[str, Any], token: str | None) -> str:
        """Write `document` if the stored one still carries `token` (None: only if absent); return the new token.

        Raises:
            ConcurrentRunError: another writer changed (or created) the document since `token`.
        """

    @abstractmethod
    def list_documents(self, pipeline: str, folder: str) -> list[str]:
        """The names of the documents in `folder` (e.g. `snapshots`), one listing call, no document read."""

    @abstractmethod
    def delete_document(self, pipeline: str, name: str) -> None:
        """Remove the document `name` (nothing happens when it is absent)."""

    def check_writable(self, pipeline: str) -> None:
        """Raise OffsetStoreError unless the store can be read (and written)."""
        self.read(pipeline)


class LocalOffsetStore(OffsetStore):
    """A folder on local disk; CAS via an exclusive lock file and an atomic rename."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        return str(self.root)

    def _folder(self, pipeline: str) -> Path:
        return self.root / pipeline

    def _ensure_folder(self, pipeline: str) -> Path:
        folder = self._folder(pipeline)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OffsetStoreError(
                f"cannot create the offset folder {folder} ({exc.strerror})",
                remedy="make offsets.uri point at a writable folder",
            ) from None
        return folder

    def read(self, pipeline: str) -> tuple[PipelineState | None, str | None]:
        document, token = self.read_document(pipeline, STATE_FILE)
        return (None, None) if document is None else (PipelineState.from_json(document), token)

    def write(self, state: PipelineState, token: str | None) -> str:
        return self.write_document(state.pipeline, STATE_FILE, state.to_json(), token)

    def read_document(self, pipeline: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
        path = self._folder(pipeline) / name
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise OffsetStoreError(
                f"cannot read {path} ({exc.strerror})", remedy="check the permissions of offsets.uri"
            ) from None
        document = json.loads(raw)
        return document, str(document.get("_revision", 0))

    def write_document(self, pipeline: str, name: str, document: dict[str, Any], token: str | None) -> str:
        folder = self._ensure_folder(pipeline)
        target = folder / name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            lock_handle = open(folder / ".lock", "a+")
        except OSError as exc:
            raise OffsetStoreError(
                f"cannot open the lock file in {folder} ({exc.strerror})", remedy="make offsets.uri writable"
            ) from None
        with lock_handle:
            fcntl.flock(lock_handle, fcntl.LOCK_EX)
            _, current = self.read_document(pipeline, name)
            if current != token:
                raise ConcurrentRunError(
                    f"{target} was changed by another runner (revision {current}, expected {token})",
                    remedy="only one binlake runner per pipeline (or per snapshotted table) may run; wait for the "
                    "other to finish and retry",
                )
            revision = str(int(current or 0) + 1)
            document = {**document, "_revision": int(revision)}
            partial = target.parent / f".{target.name}.{uuid.uuid4().hex}"
            try:
                with open(partial, "wb") as handle:
                    handle.write(document_bytes(document))
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(partial, target)
            except OSError as exc:
                partial.unlink(missing_ok=True)
                raise OffsetStoreError(
                    f"cannot write {target} ({exc.strerror})", remedy="make offsets.uri writable"
                ) from None
            return revision

    def list_documents(self, pipeline: str, folder: str) -> list[str]:
        try:
            names = os.listdir(self._folder(pipeline) / folder)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise OffsetStoreError(
                f"cannot list {self._folder(pipeline) / folder} ({exc.strerror})",
                remedy="check the permissions of offsets.uri",
            ) from None
        return sorted(f"{folder}/{name}" for name in names if name.endswith(".json") and not name.startswith("."))

    def delete_document(self, pipeline: str, name: str) -> None:
        (self._folder(pipeline) / name).unlink(missing_ok=True)

    def check_writable(self, pipeline: str) -> None:
        folder = self._ensure_folder(pipeline)
        probe = folder / f".probe-{uuid.uuid4().hex}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise OffsetStoreError(
                f"offset folder {folder} is not writable ({exc.strerror})", remedy="make offsets.uri writable"
            ) from None
        self.read(pipeline)


class S3OffsetStore(OffsetStore):
    """An S3 (or S3-compatible) prefix; CAS via conditional PUT with If-Match / If-None-Match."""

    def __init__(
        self,
        uri: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        path_style_access: bool | None = None,
        credentials: S3Credentials | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        self.bucket, self.prefix = split_s3_uri(uri)
        self.uri = uri
        self.client = s3_client(
            S3Settings(
                endpoint_url=endpoint_url, region=region, path_style_access=path_style_access, credentials=credentials,
                timeout_seconds=timeout_seconds,
            )
        )

    def describe(self) -> str:
        return self.uri

    def _key(self, pipeline: str, name: str = STATE_FILE) -> str:
        return "/".join(part for part in (self.prefix, pipeline, name) if part)

    def _store_error(self, action: str, exc: Exception) -> OffsetStoreError:
        code = _s3_code(exc)
        if code == "NoSuchBucket" or (action == "reach" and code == "404"):
            return OffsetStoreError(
                f"bucket '{self.bucket}' of {self.uri} does not exist",
                remedy="create the bucket, or fix offsets.uri and offsets.endpoint_url",
            )
        return OffsetStoreError(
            f"cannot {action} s3://{self.bucket}/{self.prefix} ({describe_s3_failure(exc)})",
            remedy="check offsets.uri, offsets.endpoint_url, the bucket and the AWS credentials",
            retryable=_transient_s3_failure(exc, code),
        )

    def read(self, pipeline: str) -> tuple[PipelineState | None, str | None]:
        document, token = self.read_document(pipeline, STATE_FILE)
        return (None, None) if document is None else (PipelineState.from_json(document), token)

    def write(self, state: PipelineState, token: str | None) -> str:
        return self.write_document(state.pipeline, STATE_FILE, state.to_json(), token)

    def read_document(self, pipeline: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(pipeline, name))
        except ClientError as exc:
            if _s3_code(exc) in ("NoSuchKey", "404"):
                return None, None
            raise self._store_error("read", exc) from None
        except BotoCoreError as exc:
            raise self._store_error("read", exc) from None
        return json.loads(response["Body"].read()), str(response["ETag"])

    def write_document(self, pipeline: str, name: str, document: dict[str, Any], token: str | None) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        condition = {"IfMatch": token} if token else {"IfNoneMatch": "*"}
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(pipeline, name),
                Body=document_bytes(document),
                ContentType="application/json",
                **condition,
            )
        except ClientError as exc:
            if _s3_code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise ConcurrentRunError(
                    f"{self.uri} ({pipeline}/{name}) was changed by another runner (conditional PUT refused)",
                    remedy="only one binlake runner per pipeline (or per snapshotted table) may run; wait for the "
                    "other to finish and retry",
                ) from None
            raise self._store_error("write", exc) from None
        except BotoCoreError as exc:
            raise self._store_error("write", exc) from None
        return str(response["ETag"])

    def list_documents(self, pipeline: str, folder: str) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = self._key(pipeline, folder) + "/"
        names: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                names += [item["Key"][len(prefix):] for item in page.get("Contents", [])]
        except (ClientError, BotoCoreError) as exc:
            raise self._store_error("list", exc) from None
        return sorted(f"{folder}/{name}" for name in names if name.endswith(".json") and "/" not in name)

    def delete_document(self, pipeline: str, name: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(pipeline, name))
        except (ClientError, BotoCoreError) as exc:
            raise self._store_error("write", exc) from None

    def check_writable(self, pipeline: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._store_error("reach", exc) from None
        # Reading is not enough: a read-only credential would only fail at the first offset write.
        probe = "/".join(part for part in (self.prefix, pipeline, f".probe-{uuid.uuid4().hex}") if part)
        try:
            self.client.put_object(Bucket=self.bucket, Key=probe, Body=b"")
            self.client.delete_object(Bucket=self.bucket, Key=probe)
        except (ClientError, BotoCoreError) as exc:
            raise self._store_error("write", exc) from None
        self.read(pipeline)


def open_offset_store(config: OffsetsConfig) -> OffsetStore:
    if config.uri.startswith("s3://") or config.uri.startswith("s3a://"):
        return S3OffsetStore(
            config.uri,
            endpoint_url=config.endpoint_url,
            region=config.region,
            path_style_access=config.path_style_access,
            credentials=config.credentials,
            timeout_seconds=config.timeout_seconds,
        )
    if "://" in config.uri and not config.uri.startswith("file://"):
        raise OffsetStoreError(
            f"offsets.uri scheme of '{config.uri}' is not supported", remedy="use a local folder or s3://bucket/prefix"
        )
    return LocalOffsetStore(config.uri.removeprefix("file://"))


class StateHandle:
    """The state of one pipeline held by this runner under a lease.

    `acquire` fails fast when another live runner holds the lease; every later `save` is conditional on the
    token of the previous one. With a heartbeat (`acquire(heartbeat=True)`) a daemon thread keeps the lease
    alive however long a batch or a snapshot runs: it rewrites the last *saved* document with a new expiry
    (never the state the work is changing, which may be half updated), under the lock every save takes, so
    the two never interleave and share one compare-and-swap token. Before each Delta commit the work calls
    `check_lease()`, which raises `LeaseLostError` once the lease is lost or may be.
    """

    def __init__(self, store: OffsetStore, pipeline: str, *, lease_seconds: int) -> None:
        self.store = store
        self.pipeline = pipeline
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex
        self.token: str | None = None
        self.state = PipelineState(pipeline=pipeline)
        self.heartbeat: Heartbeat | None = None
        self._lock = threading.Lock()
        #: A copy of the document as last written: what a renewal writes again, with a new expiry.
        self._saved: PipelineState | None = None

    def acquire(self, *, heartbeat: bool = False, stall_seconds: float | None = None) -> PipelineState:
        """Take the lease (and with `heartbeat`, keep renewing it until `release`).

        With `stall_seconds` the heartbeat renews only while the work reports progress (`progress`, `working`)
        at least that often: a runner stuck on a wait lets its lease run out (cdc_lib.state.heartbeat).
        """
        state, token = self.store.read(self.pipeline)
        state = state or PipelineState(pipeline=self.pipeline)
        now = utc_now()
        lease = state.lease
        if lease is not None and lease.owner != self.owner and not lease.expired(now) and not lease.holder_is_dead():
            raise ConcurrentRunError(
                f"pipeline '{self.pipeline}' is held by {lease.describe()} until {lease.expires_at}",
                remedy="wait for that run to finish (one runner per pipeline); a runner that died is taken over "
                "once its lease expires (offsets.lease_seconds; a live runner's heartbeat keeps renewing it)",
            )
        self.state, self.token = state, token
        self.save()
        if heartbeat:
            self.heartbeat = Heartbeat(self.renew, lease_seconds=self.lease_seconds, what=f"pipeline {self.pipeline}",
                                       stall_seconds=stall_seconds)
            self.heartbeat.start()
        return self.state

    def progress(self) -> None:
        """The work under the lease moved on (see `acquire`'s `stall_seconds`); nothing without a heartbeat."""
        if self.heartbeat is not None:
            self.heartbeat.progress()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Long work whose waits are bounded elsewhere (Spark, delta-rs): the lease is renewed throughout."""
        if self.heartbeat is None:
            yield
            return
        with self.heartbeat.working():
            yield

    def save(self) -> None:
        with self._lock:
            self.state.lease = Lease.for_this_process(self.owner, seconds=self.lease_seconds)
            self.token = self.store.write(self.state, self.token)
            self._saved = copy.deepcopy(self.state)
        if self.heartbeat is not None:
            self.heartbeat.mark_renewed()

    def renew(self) -> None:
        """Extend the lease: the last saved document written again with a new expiry (the heartbeat's step).

        Raises:
            ConcurrentRunError: another runner wrote the document since: the lease is lost.
        """
        with self._lock:
            saved = self._saved
            if saved is None:
                raise ConcurrentRunError(
                    f"pipeline '{self.pipeline}' was never acquired by this runner", remedy="call acquire() first"
                )
            lease = Lease.for_this_process(self.owner, seconds=self.lease_seconds)
            saved.lease = lease
            self.token = self.store.write(saved, self.token)
            self.state.lease = copy.copy(lease)

    def check_lease(self) -> None:
        """Raise LeaseLostError unless this runner surely still holds the lease; call it before each Delta commit.

        With a heartbeat this is its check (a refused renewal, or none for most of a lease); without one,
        the lease of the last save must not have run out.
        """
        if self.heartbeat is not None:
            self.heartbeat.check()
            return
        lease = self.state.lease
        left = 0.0 if lease is None else (dt.datetime.fromisoformat(lease.expires_at) - utc_now()).total_seconds()
        if left <= self.lease_seconds * 0.2:
            raise LeaseLostError(
                f"the lease of pipeline '{self.pipeline}' runs out in {left:.0f}s and was not renewed; "
                "another runner may take it, so nothing more is written",
                remedy="retry the run; raise offsets.lease_seconds if single steps take longer than it",
            )

    def renew_if_due(self) -> bool:
        """Save (and so extend the lease) when less than half of it is left; True if it saved.

        For a long-lived runner without a heartbeat; with one, the heartbeat renews on its own.
        """
        lease = self.state.lease
        if lease is not None and lease.owner == self.owner:
            left = (dt.datetime.fromisoformat(lease.expires_at) - utc_now()).total_seconds()
            if left > self.lease_seconds / 2:
                return False
        self.save()
        return True

    def release(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
        with self._lock:
            self.state.lease = None
            try:
                self.token = self.store.write(self.state, self.token)
            except ConcurrentRunError:
                pass  # another runner holds the document now: it is theirs, and so is the lease
