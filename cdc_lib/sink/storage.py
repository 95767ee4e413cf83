"""Reading the sink without Spark: list and read Delta log files in a local folder or on S3.

Spark writes the Delta tables; binlake itself only needs to list the tail of a `_delta_log` folder,
read a few commit and checkpoint files and prove up front that the sink is writable. Paths are the
same strings Spark gets (`/lake/db/t` or `s3a://bucket/prefix/db/t`); on S3 they are read through boto3.

A listing can start after a name (S3 ListObjectsV2 `StartAfter`): Delta names its log files by a
zero-padded version, so "the files from version N on" costs a few keys, not the whole history.
Every storage counts what it lists and reads (`StorageCounters`), which is how tests and
`bench/log_costs.py` prove that the cost per call stays bounded.
"""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_lib.common.s3 import (
    S3Settings,
    describe_s3_failure,
    is_s3_uri,
    s3_client,
    s3_error_code,
    split_s3_uri,
    transient_s3_failure,
)
from cdc_lib.config.model import SinkConfig
from cdc_lib.errors import SinkError


@dataclass
class StorageCounters:
    """What a storage has listed and read since it was made (or since `reset`)."""

    list_calls: int = 0
    #: Names the listings returned: on S3 the keys transferred, the cost that grows with a log's history.
    names_listed: int = 0
    files_read: int = 0

    def reset(self) -> None:
        self.list_calls = self.names_listed = self.files_read = 0


class SinkStorage(ABC):
    def __init__(self) -> None:
        self.counters = StorageCounters()

    def list_names(self, folder: str, *, start_after: str | None = None) -> list[str] | None:
        """Names of the files directly in `folder` (only those sorting after `start_after` when given), or None
        when there is no such folder."""
        names = self._list(folder, start_after)
        self.counters.list_calls += 1
        self.counters.names_listed += len(names or [])
        return names

    def read_text(self, file: str) -> str:
        """The file's content; raises SinkError when it cannot be read."""
        content = self.read_bytes(file)
        if content is None:
            raise SinkError(f"cannot read {file} (no such file)", remedy="check that the Delta table is intact")
        return content.decode()

    def read_bytes(self, file: str) -> bytes | None:
        """The file's content, or None when there is no such file; raises SinkError when it cannot be read."""
        self.counters.files_read += 1
        return self._read(file)

    @abstractmethod
    def _list(self, folder: str, start_after: str | None) -> list[str] | None:
        """The listing itself (see `list_names`)."""

    @abstractmethod
    def _read(self, file: str) -> bytes | None:
        """The read itself (see `read_bytes`)."""

    @abstractmethod
    def replace_bytes(self, file: str, content: bytes) -> None:
        """Write `file` whole, in one step a reader sees either side of (maintenance's checkpoints)."""

    @abstractmethod
    def check_writable(self, root: str) -> None:
        """Raise SinkError unless binlake (and Spark with the same settings) can write under `root`."""


class LocalSinkStorage(SinkStorage):
    def _list(self, folder: str, start_after: str | None) -> list[str] | None:
        local = _local(folder)
        if not local.is_dir():
            return None
        # A directory has no "start after": the OS reads every entry (cheap on a local disk), and the same
        # name comparison as S3's keeps what callers see, and what is counted, the same on both.
        return sorted(
            entry.name for entry in os.scandir(local) if start_after is None or entry.name > start_after
        )

    def _read(self, file: str) -> bytes | None:
        try:
            return _local(file).read_bytes()
        except FileNotFoundError:
            return None

    def replace_bytes(self, file: str, content: bytes) -> None:
        target = _local(file)
        # Written beside it under a name no Delta reader takes for a log file, then renamed over it (atomic).
        staged = target.with_name(f".binlake-{uuid.uuid4().hex}.tmp")
        staged.write_bytes(content)
        os.replace(staged, target)

    def check_writable(self, root: str) -> None:
        folder = _local(root)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise SinkError(
                f"sink.path {root} is not writable (checked {folder})",
                remedy="point sink.path at a folder binlake may write, or fix its permissions",
            )


class S3SinkStorage(SinkStorage):
    def __init__(self, settings: S3Settings) -> None:
        super().__init__()
        self.settings = settings
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client(self.settings)
        return self._client

    def _list(self, folder: str, start_after: str | None) -> list[str] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_uri(folder)
        prefix = f"{key}/" if key else ""
        names: list[str] = []
        after = {"StartAfter": prefix + start_after} if start_after is not None else {}
        try:
            # Delimiter keeps it to the folder's own files (Delta's _delta_log/_commits etc. are skipped).
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/", **after
            ):
                names.extend(item["Key"][len(prefix):] for item in page.get("Contents", []))
        except (ClientError, BotoCoreError) as exc:
            raise self._error("list", folder, exc) from None
        # S3 has no folders: a prefix without objects is a folder that does not exist.
        return names or None

    def _read(self, file: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_uri(file)
        try:
            return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if s3_error_code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._error("read", file, exc) from None
        except BotoCoreError as exc:
            raise self._error("read", file, exc) from None

    def replace_bytes(self, file: str, content: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_uri(file)
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=content)  # one PUT: atomic on S3
        except (ClientError, BotoCoreError) as exc:
            raise self._error("write", file, exc) from None

    def check_writable(self, root: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_uri(root)
        try:
            self.client.head_bucket(Bucket=bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._error("reach", root, exc) from None
        # Reading is not enough: read-only credentials would fail only in Spark, after the work is done.
        probe = "/".join(part for part in (key, f".binlake-probe-{uuid.uuid4().hex}") if part)
        try:
            self.client.put_object(Bucket=bucket, Key=probe, Body=b"")
            self.client.delete_object(Bucket=bucket, Key=probe)
        except (ClientError, BotoCoreError) as exc:
            raise self._error("write", root, exc) from None

    def _error(self, action: str, location: str, exc: Exception) -> SinkError:
        code = s3_error_code(exc)
        bucket, _ = split_s3_uri(location)
        if code == "NoSuchBucket" or (action == "reach" and code == "404"):
            return SinkError(
                f"bucket '{bucket}' of sink.path does not exist",
                remedy="create the bucket, or fix sink.path and sink.endpoint_url",
            )
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
            return SinkError(
                f"the sink's S3 credentials cannot {action} {location} ({code})",
                remedy="fix sink.access_key_id / sink.secret_access_key (or AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY) and the bucket policy",
            )
        return SinkError(
            f"cannot {action} {location} ({describe_s3_failure(exc)})",
            remedy="check that the S3 endpoint is up and sink.endpoint_url, sink.region and the bucket are right",
            retryable=transient_s3_failure(exc, code),
        )


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def storage_for(path: str, settings: S3Settings | None = None) -> SinkStorage:
    """Storage that can read `path`: boto3 for s3a:// (AWS defaults unless `settings`), else the local disk."""
    if is_s3_uri(path):
        return S3SinkStorage(settings or S3Settings())
    if "://" in path and not path.startswith("file://"):
        raise SinkError(
            f"binlake cannot read the Delta log at {path}",
            remedy="use a local folder or s3a://bucket/prefix as sink.path",
        )
    return LocalSinkStorage()


def sink_storage(sink: SinkConfig) -> SinkStorage:
    return storage_for(sink.path, sink.s3)
