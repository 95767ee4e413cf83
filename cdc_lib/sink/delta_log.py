"""Reading a Delta log without Spark, at a cost bounded by the commits since its last checkpoint.

binlake needs three things from a table's `_delta_log`: whether the table exists, its newest
version, and the newest commit binlake wrote for a `txnAppId` (with its end position in the
commit's `userMetadata`). Listing the whole log for that grows with history: on S3, after months
of minute batches, tens of thousands of keys per call. So a read starts from the checkpoint:

1. `_last_checkpoint` (one GET) names the newest checkpoint version C (when there is one).
2. The listing starts after C's zero-padded name (S3 `StartAfter`): the commits after C, C's own
   checkpoint files and whatever checkpoint came since — at most a checkpoint interval of files.
3. The newest binlake commit among those commits is the answer. If there is none, the checkpoint's
   `txn` actions hold the newest SetTransaction of every appId (Delta keeps them in every checkpoint),
   and that commit's file is fetched by name, counting down from C, without listing.

Checkpoints come in three shapes, and Delta 4.0 writes all of them: classic
(`C.checkpoint.parquet`), multi-part (`C.checkpoint.0000000001.0000000002.parquet`, when
`spark.databricks.delta.checkpoint.partSize` splits it) and v2 (`delta.checkpointPolicy=v2`:
`C.checkpoint.<uuid>.json` or `.parquet`, a manifest whose file actions live in
`_sidecars/`; its `txn` actions are in the manifest itself, so sidecars are never read).

Two engines may write one table (`batch.writer`): delta-spark and delta-rs (`deltalake`). Their logs read
the same here — delta-rs's classic checkpoints and `_last_checkpoint`, its `commitInfo` (no Spark fields;
`userMetadata` as binlake passes it) — except its metric names, which `commit_metrics` gives under Spark's.
Which tables delta-rs writes exactly is `cdc_lib.sink.choice`'s question (tests/integration/test_engine_interplay.py).
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any

from cdc_lib.common.formats import check_format
from cdc_lib.errors import DeltaStateError, FencedCommitError
from cdc_lib.sink.storage import SinkStorage, storage_for

COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_FILE = re.compile(
    r"^(?P<version>\d{20})\.checkpoint(?:\.(?P<part>\d+)\.(?P<parts>\d+))?(?:\.(?P<uuid>[0-9a-f-]{36}))?"
    r"\.(?P<format>parquet|json)$"
)
#: How many commit files one call reads at most, newest first, looking for a binlake commit.
TAIL_SEARCH_LIMIT = 200


@dataclass(frozen=True)
class BinlakeCommit:
    """A binlake commit found in a Delta log."""

    delta_version: int
    txn_version: int
    metadata: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.metadata.get("kind"))


@dataclass(frozen=True)
class LogTail:
    latest_version: int
    last_binlake_commit: BinlakeCommit | None
    #: The newest checkpoint the read started from (None: the log has none, and was listed whole).
    checkpoint_version: int | None = None
    #: The version a fence commit (cdc_lib/sink/fencing.py) set for the application, when one is newer than
    #: `last_binlake_commit`: a commit of the application at or below it is refused (FencedCommitError).
    fence: int | None = None

    def fenced(self, txn_version: int) -> bool:
        """Whether a commit of the application at `txn_version` would land under a newer claim."""
        return self.fence is not None and self.fence >= txn_version


#: `kind` of a fence commit's metadata; its `fences` maps each fenced app id to the version set for it.
FENCE_KIND = "fence"


def log_dir(path: str) -> str:
    return f"{path.rstrip('/')}/_delta_log"


def commit_file(path: str, version: int) -> str:
    return f"{log_dir(path)}/{version:020d}.json"


@dataclass(frozen=True)
class _Checkpoint:
    version: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class _Listing:
    """The log files from the last checkpoint on (or all of them when there is no checkpoint)."""

    commits: list[int]  # newest first
    checkpoint: _Checkpoint | None


def _checkpoint_hint(storage: SinkStorage, directory: str) -> int | None:
    """The version `_last_checkpoint` names; None when it is missing or unreadable (then the log is listed
    whole, which is what a reader without the hint must do anyway)."""
    content = storage.read_bytes(f"{directory}/_last_checkpoint")
    if content is None:
        return None
    try:
        return int(json.loads(content)["version"])
    except (ValueError, KeyError, TypeError):
        return None


def _list_tail(storage: SinkStorage, directory: str) -> _Listing | None:
    hint = _checkpoint_hint(storage, directory)
    # Every name of version ≥ hint sorts after the bare zero-padded version: its commit, its checkpoint files.
    names = storage.list_names(directory, start_after=None if hint is None else f"{hint:020d}")
    if names is None:
        return None
    checkpoint = _newest_complete_checkpoint(names)
    if hint is not None and checkpoint is None:
        # The hint named a checkpoint that is not there (a log copied without it?): read the log as a whole.
        names = storage.list_names(directory) or []
        checkpoint = _newest_complete_checkpoint(names)
    commits = sorted((int(match.group(1)) for name in names if (match := COMMIT_FILE.match(name))), reverse=True)
    return _Listing(commits=commits, checkpoint=checkpoint)


def _listed(path: str, storage: SinkStorage | None) -> tuple[SinkStorage, str, _Listing | None]:
    """How to reach the table at `path`, its log folder, and the log's files from the last checkpoint on."""
    storage = storage or storage_for(path)
    directory = log_dir(path)
    return storage, directory, _list_tail(storage, directory)


def _newest_complete_checkpoint(names: list[str]) -> _Checkpoint | None:
    """The newest checkpoint whose files are all there (a multi-part write cut short leaves some parts only)."""
    by_version: dict[int, dict[str, list[str]]] = {}
    for name in names:
        match = CHECKPOINT_FILE.match(name)
        if match is None:
            continue
        # Parts of one multi-part checkpoint share a count; two v2 manifests of one version are alternatives.
        group = match.group("uuid") or f"parts-{match.group('parts') or 1}"
        by_version.setdefault(int(match.group("version")), {}).setdefault(group, []).append(name)
    for version in sorted(by_version, reverse=True):
        for group, files in sorted(by_version[version].items()):
            expected = int(group.removeprefix("parts-")) if group.startswith("parts-") else 1
            if len(files) == expected:
                return _Checkpoint(version=version, files=tuple(sorted(files)))
    return None


def newest_version(path: str, *, storage: SinkStorage | None = None) -> int | None:
    """The table's newest commit version, listing the log from its last checkpoint; None when there is no table."""
    listing = _list_tail(storage or storage_for(path), log_dir(path))
    if listing is None or not listing.commits:
        return None
    return listing.commits[0]


def table_exists(path: str, *, storage: SinkStorage | None = None) -> bool:
    """Whether `path` holds a Delta table: a log with a commit or a checkpoint in it.

    A `_delta_log` folder alone is not one: a first write killed before its commit leaves the folder (and
    Parquet files no version refers to) behind.
    """
    listing = _list_tail(storage or storage_for(path), log_dir(path))
    return listing is not None and (bool(listing.commits) or listing.checkpoint is not None)


def read_log_tail(path: str, *, application: str, storage: SinkStorage | None = None) -> LogTail | None:
    """Latest Delta version and the newest commit written by `application`, read without Spark.

    Lists only the files from the last checkpoint on (see the module docstring).

    Args:
        path: the table's location, a local folder or s3a://bucket/prefix.
        storage: how to reach it (the sink's S3 settings); inferred from `path` when omitted.
    """
    storage, directory, listing = _listed(path, storage)
    if listing is None:
        return None
    checkpoint = listing.checkpoint
    newest = max([*listing.commits[:1], *([checkpoint.version] if checkpoint else [])], default=None)
    if newest is None:
        return None
    floor = checkpoint.version if checkpoint is not None else -1
    searched = [version for version in listing.commits if version > floor][:TAIL_SEARCH_LIMIT]
    fence: int | None = None
    for version in searched:
        text = storage.read_text(f"{directory}/{version:020d}.json")
        commit = _binlake_commit(text, version, application)
        if commit is not None:
            return LogTail(
                latest_version=newest, last_binlake_commit=commit,
                checkpoint_version=checkpoint.version if checkpoint else None, fence=fence,
            )
        if fence is None:
            fence = fence_in(text, application)
    if checkpoint is None:
        return LogTail(latest_version=newest, last_binlake_commit=None, fence=fence)
    remaining = TAIL_SEARCH_LIMIT - len(searched)
    txn_version = _checkpoint_txn(storage, directory, checkpoint, application)
    found = None if txn_version is None else _commit_at_or_before(
        storage, directory, checkpoint.version, application, txn_version, limit=max(remaining, 1)
    )
    return LogTail(latest_version=newest, last_binlake_commit=found, checkpoint_version=checkpoint.version,
                   fence=fence)


def _checkpoint_txn(storage: SinkStorage, directory: str, checkpoint: _Checkpoint, application: str) -> int | None:
    """The version of `application`'s SetTransaction recorded in the checkpoint, if any."""
    versions: list[int] = []
    for name in checkpoint.files:
        content = storage.read_bytes(f"{directory}/{name}")
        if content is None:
            # Log cleanup removed it between the listing and now: a newer checkpoint exists, the caller retries.
            raise DeltaStateError(
                f"the checkpoint file {directory}/{name} vanished while it was read",
                remedy="retry; if it keeps happening, check what deletes files from the Delta log",
            )
        versions += _txn_versions(content, name.endswith(".json"), application)
    return max(versions, default=None)


def _txn_versions(content: bytes, is_json: bool, application: str) -> list[int]:
    if is_json:
        actions = (json.loads(line) for line in content.decode().split("\n") if line.strip())
        return [int(action["txn"]["version"]) for action in actions
                if "txn" in action and action["txn"].get("appId") == application]
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(io.BytesIO(content))
    if "txn" not in parquet.schema_arrow.names:
        return []
    rows = parquet.read(columns=["txn"]).column("txn").to_pylist()
    return [int(row["version"]) for row in rows if row is not None and row.get("appId") == application]


def _commit_at_or_before(
    storage: SinkStorage, directory: str, start: int, application: str, txn_version: int, *, limit: int
) -> BinlakeCommit | None:
    """The commit carrying `application`'s `txn_version`, fetched by name from version `start` down.

    None when log cleanup already removed it (older than `delta.logRetentionDuration`): its SetTransaction
    still makes Delta skip a replay, but its end position is gone, so the offset store is not corrected
    from it.
    """
    for version in range(start, max(start - limit, -1), -1):
        content = storage.read_bytes(f"{directory}/{version:020d}.json")
        if content is None:
            return None
        commit = _binlake_commit(content.decode(), version, application)
        if commit is not None and commit.txn_version == txn_version:
            return commit
    return None


def _binlake_commit(text: str, version: int, application: str) -> BinlakeCommit | None:
    txn_version: int | None = None
    metadata: dict[str, Any] | None = None
    for line in text.split("\n"):  # not splitlines(): U+0085 and U+2028 occur raw in column statistics
        if not line.strip():
            continue
        action = json.loads(line)
        if "txn" in action and action["txn"].get("appId") == application:
            txn_version = int(action["txn"]["version"])
        elif "commitInfo" in action and action["commitInfo"].get("userMetadata"):
            try:
                candidate = json.loads(action["commitInfo"]["userMetadata"])
            except ValueError:
                continue
            if isinstance(candidate, dict) and candidate.get("app_id") == application:
                # Read before anything acts on its end position: a newer layout is refused, never guessed at.
                check_format(candidate, "commit metadata", where=f"of Delta commit {version} ({application})")
                metadata = candidate
    if txn_version is None or metadata is None:
        return None
    return BinlakeCommit(delta_version=version, txn_version=txn_version, metadata=metadata)


def fence_in(text: str, application: str) -> int | None:
    """The version a fence commit (its JSON `text`) set for `application`; None when it is no fence of it."""
    for line in text.split("\n"):
        if '"commitInfo"' not in line:
            continue
        user_metadata = json.loads(line)["commitInfo"].get("userMetadata")
        try:
            metadata = json.loads(user_metadata) if user_metadata else None
        except ValueError:
            return None
        if isinstance(metadata, dict) and metadata.get("kind") == FENCE_KIND:
            version = (metadata.get("fences") or {}).get(application)
            return None if version is None else int(version)
    return None


def version_of(path: str, application: str, txn_version: int, storage: SinkStorage) -> int:
    """The Delta version of the commit that carries `application`'s `txn_version` (just written, or earlier).

    Raises:
        FencedCommitError: a fence at or above `txn_version` stands where the commit should be: the writer's
            Delta transaction saw it and skipped the commit (Spark skips a SetTransaction version the log holds).
    """
    tail = read_log_tail(path, application=application, storage=storage)
    found = tail.last_binlake_commit if tail is not None else None
    if tail is not None and tail.fenced(txn_version) and (found is None or found.txn_version != txn_version):
        raise FencedCommitError(
            f"the commit {txn_version} of {application} was not made: the table was fenced at {tail.fence} "
            f"(a re-snapshot began, or this snapshot was taken over)",
            remedy="nothing to do: the newer snapshot owns the table; nothing of this commit was written",
        )
    if tail is None or tail.last_binlake_commit is None or tail.last_binlake_commit.txn_version != txn_version:
        raise DeltaStateError(
            f"the Delta commit for batch {txn_version} was not found in {path}/_delta_log",
            remedy="another writer may be changing the table; make binlake its only writer",
        )
    return tail.last_binlake_commit.delta_version


@dataclass(frozen=True)
class TableDetail:
    """A table's newest `metaData` and `protocol` actions, as `DESCRIBE DETAIL` reports them: its properties
    (`metaData.configuration`), protocol versions and features, and columns. (Not `config.model.TableSettings`,
    a table's settings in the config file.)"""

    properties: dict[str, str]
    features: frozenset[str]
    #: The protocol's `minReaderVersion` / `minWriterVersion` (a legacy protocol names no features).
    reader_version: int = 1
    writer_version: int = 2
    #: The table's top-level columns and their Delta types (`metaData.schemaString`), in order.
    column_types: tuple[tuple[str, str], ...] = ()
    #: The metadata keys its columns carry (`delta.generationExpression`, `delta.identity.start` …).
    column_metadata_keys: frozenset[str] = frozenset()
    #: The table's partition columns (`metaData.partitionColumns`; empty: none).
    partition_columns: tuple[str, ...] = ()


def table_detail(path: str, *, storage: SinkStorage | None = None) -> TableDetail | None:
    """The table's properties and protocol features as of its newest version, read without Spark.

    The newest `metaData` and `protocol` actions win: the commits after the last checkpoint are read newest
    first, then the checkpoint (every checkpoint carries both). What `DESCRIBE DETAIL` reports, at the cost of
    a listing and a few small reads instead of a Spark job that rebuilds the table's whole state. None when
    there is no table or its log holds no readable pair (then the caller asks Spark).
    """
    storage, directory, listing = _listed(path, storage)
    if listing is None:
        return None
    checkpoint = listing.checkpoint
    floor = checkpoint.version if checkpoint is not None else -1
    found: dict[str, dict[str, Any]] = {}
    for version in listing.commits:
        if version <= floor or len(found) == 2:
            break
        for line in storage.read_text(f"{directory}/{version:020d}.json").split("\n"):
            if '"metaData"' in line or '"protocol"' in line:
                action = json.loads(line)
                for kind in ("metaData", "protocol"):
                    if kind in action:
                        found.setdefault(kind, action[kind])
    if len(found) < 2 and checkpoint is not None:
        for name in checkpoint.files:
            content = storage.read_bytes(f"{directory}/{name}")
            for kind, action in _checkpoint_actions(content or b"", name.endswith(".json")).items():
                found.setdefault(kind, action)
    if len(found) < 2:
        return None
    configuration = found["metaData"].get("configuration") or {}
    if isinstance(configuration, list):  # a Parquet map comes back as (key, value) pairs
        configuration = dict(configuration)
    protocol = found["protocol"]
    features = [*(protocol.get("readerFeatures") or []), *(protocol.get("writerFeatures") or [])]
    fields = _schema_fields(found["metaData"])
    return TableDetail(properties={str(key): str(value) for key, value in configuration.items()},
                         features=frozenset(features), reader_version=int(protocol.get("minReaderVersion", 1)),
                         writer_version=int(protocol.get("minWriterVersion", 2)),
                         column_types=_column_types(fields),
                         column_metadata_keys=frozenset(key for field in fields for key in field.get("metadata") or {}),
                         partition_columns=tuple(str(name) for name in found["metaData"].get("partitionColumns") or ()))


def _schema_fields(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        fields = json.loads(metadata.get("schemaString") or "{}").get("fields")
    except ValueError:
        return []
    return list(fields) if isinstance(fields, list) else []


def _column_types(fields: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(name, Delta type) of each top-level column; a nested type is named by its kind (`struct`, `array` …)."""
    return tuple((str(field["name"]), kind if isinstance(kind := field["type"], str) else str(kind.get("type")))
                 for field in fields)


def _checkpoint_actions(content: bytes, is_json: bool) -> dict[str, dict[str, Any]]:
    """The `metaData` and `protocol` actions of one checkpoint file (a v2 manifest holds them itself)."""
    found: dict[str, dict[str, Any]] = {}
    if is_json:
        for line in content.decode().split("\n"):
            if line.strip():
                action = json.loads(line)
                found.update({kind: action[kind] for kind in ("metaData", "protocol") if kind in action})
        return found
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(io.BytesIO(content))
    kinds = [kind for kind in ("metaData", "protocol") if kind in parquet.schema_arrow.names]
    if not kinds:
        return found
    table = parquet.read(columns=kinds)
    for kind in kinds:
        rows = [row for row in table.column(kind).to_pylist() if row is not None]
        if rows:
            found[kind] = rows[-1]
    return found


def commit_metrics(path: str, version: int, *, storage: SinkStorage | None = None) -> dict[str, int]:
    """A commit's `operationMetrics`, read from the Delta log (one file, no listing), under Spark's names.

    delta-rs names its metrics in snake case (`num_target_rows_inserted`) and counts an append's rows as
    `num_added_rows`; they are given here as Spark names them (`numTargetRowsInserted`, `numOutputRows`), so a
    caller reads one set of names whichever engine wrote the commit.
    """
    text = (storage or storage_for(path)).read_text(commit_file(path, version))
    for line in text.split("\n"):  # not splitlines(): U+0085 and U+2028 occur raw in column statistics
        if '"commitInfo"' in line:
            metrics = json.loads(line)["commitInfo"].get("operationMetrics", {})
            return _spark_metric_names(
                {name: int(value) for name, value in metrics.items() if str(value).lstrip("-").isdigit()}
            )
    return {}


#: delta-rs metrics whose Spark counterpart is not just the camel-case spelling of their name.
_DELTA_RS_METRIC_ALIASES = {"numAddedRows": "numOutputRows", "numAddedFiles": "numFiles"}


def _spark_metric_names(metrics: dict[str, int]) -> dict[str, int]:
    named: dict[str, int] = {}
    for name, value in metrics.items():
        if "_" in name:
            head, *rest = name.split("_")
            name = head + "".join(part[:1].upper() + part[1:] for part in rest)
            name = _DELTA_RS_METRIC_ALIASES.get(name, name)
        named.setdefault(name, value)
    return named


def written_rows(path: str, version: int, *, storage: SinkStorage | None = None) -> int:
    """Rows a commit wrote (its `numOutputRows` metric)."""
    return commit_metrics(path, version, storage=storage).get("numOutputRows", 0)


#: `commitInfo.engineInfo` of a delta-rs commit starts with this (`delta-rs:py-1.6.6`); Spark's with
#: `Apache-Spark/`.
DELTA_RS_ENGINE = "delta-rs"
SPARK_ENGINE = "Apache-Spark"


def commit_engine(path: str, version: int, *, storage: SinkStorage | None = None) -> str:
    """Which engine wrote a commit: "delta-rs", "spark", or its `engineInfo` as written ("" when it has none)."""
    text = (storage or storage_for(path)).read_text(commit_file(path, version))
    for line in text.split("\n"):
        if '"commitInfo"' in line:
            return engine_of(json.loads(line)["commitInfo"].get("engineInfo"))
    return ""


def engine_of(engine_info: object) -> str:
    """"delta-rs" or "spark" for a commit's `engineInfo` (as `DeltaTable.history()` also reports it)."""
    text = str(engine_info or "")
    if text.startswith(DELTA_RS_ENGINE):
        return "delta-rs"
    if text.startswith(SPARK_ENGINE):
        return "spark"
    return text


__all__ = [
    "DELTA_RS_ENGINE", "BinlakeCommit", "LogTail", "TableDetail", "commit_engine", "commit_file", "commit_metrics",
    "engine_of", "log_dir", "newest_version", "read_log_tail", "table_exists", "table_detail", "version_of",
    "written_rows",
]
