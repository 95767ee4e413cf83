"""Offset store: the pipeline's state document (`offsets`), written compare-and-swap.

One JSON document per pipeline, and named documents beside it. Writes are conditional (S3 If-Match /
If-None-Match; a local folder uses a lock file and an atomic rename), so two runners can never both move the
offsets. `StateHandle` holds a pipeline's document under the runner's lease.
"""

from __future__ import annotations

import copy
import datetime as dt
import fcntl
import json
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cdc_lib.common.s3 import S3Credentials, S3Settings, describe_s3_failure, s3_client, split_s3_uri
from cdc_lib.common.s3 import s3_error_code as _s3_code
from cdc_lib.common.s3 import transient_s3_failure as _transient_s3_failure
from cdc_lib.config.model import OffsetsConfig
from cdc_lib.errors import ConcurrentRunError, OffsetStoreError
from cdc_lib.state.heartbeat import Heartbeat, LeaseLostError
from cdc_lib.state.offsets import Lease, PipelineState, document_bytes, utc_now

STATE_FILE = "state.json"


class OffsetStore(ABC):
    """A place for one state document per pipeline, with conditional writes."""

    # The state is one named document (`STATE_FILE`), read and written like the others.

    def read(self, pipeline: str) -> tuple[PipelineState | None, str | None]:
        """Return the state and a token for the next conditional write (None, None if absent)."""
        document, token = self.read_document(pipeline, STATE_FILE)
        return (None, None) if document is None else (PipelineState.from_json(document), token)

    def write(self, state: PipelineState, token: str | None) -> str:
        """Write if the stored document still carries `token`; return the new token.

        Raises:
            ConcurrentRunError: another writer changed the document since `token`.
        """
        return self.write_document(state.pipeline, STATE_FILE, state.to_json(), token)

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


#: How long a write waits for the local store's folder lock. A write holds it for milliseconds (read, write, fsync,
#: rename); a holder past this bound is a process frozen inside its write (SIGSTOP, a debugger, a frozen cgroup),
#: and waiting on would hang this runner for as long as that one stays frozen.
LOCK_WAIT_SECONDS = 60.0


def _lock_folder(handle: Any, path: Path) -> None:
    """Take the folder's lock, or raise OffsetStoreError naming its holder once LOCK_WAIT_SECONDS have passed."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.005
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _lock_holder(path)
                raise OffsetStoreError(
                    f"the offset folder's lock {path} has been held for over {LOCK_WAIT_SECONDS:.0f} s"
                    + (f" by process {holder}" if holder else "")
                    + ", which a write holds for milliseconds: that process is stopped or frozen inside a write",
                    remedy="resume the frozen process (kill -CONT) or end it, then run again",
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


def _lock_holder(path: Path) -> str | None:
    """The process holding a flock on `path`, from /proc/locks (None: not found, or no /proc)."""
    try:
        inode = path.stat().st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "FLOCK" in fields and "->" not in fields and len(fields) >= 6 \
                    and fields[5].rsplit(":", 1)[-1] == str(inode):
                return fields[4]
    except OSError:
        return None
    return None


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
            _lock_folder(lock_handle, folder / ".lock")
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
        #: The document as last written: what a renewal writes again, with a new expiry.
        self._saved: dict[str, Any] | None = None

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
            document = self.state.to_json()
            self.token = self.store.write_document(self.pipeline, STATE_FILE, document, self.token)
            # The document as written, not a deep copy of the state: a 100-table state's deep copy (each table's
            # schema) cost ~25 ms of every save, its document 0.4 ms (bench/NOTES.md "Many tables in one batch",
            # 2026-11-27). `to_json` builds new containers down to each table's entry; what it shares (a schema,
            # a DDL log) the engine replaces, never changes in place (TableState is updated with `replace`).
            self._saved = document
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
            self.token = self.store.write_document(self.pipeline, STATE_FILE, {**saved, "lease": dict(lease.__dict__)},
                                                   self.token)
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
