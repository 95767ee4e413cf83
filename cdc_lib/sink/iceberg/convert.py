"""One Iceberg snapshot per converted Delta version, listing the version's live Parquet files (no data copied).

Written where Delta UniForm would write it: `<table>/metadata/v<N>.metadata.json`, Avro manifests and manifest
lists beside it, and `metadata/version-hint.text` naming the newest N (Hadoop-catalog readers, pyiceberg's
`StaticTable.from_metadata(<table>)`), on a local disk or on S3 (pyiceberg's FileIO with the sink's endpoint and
credentials; the Iceberg side names S3 locations `s3://`, which every Iceberg reader opens, not Hadoop's `s3a://`).
Each snapshot is a full manifest of the Delta version's files (O(files); maintenance keeps files few) and records
the version in its summary (`binlake.delta-version`): converting a version already converted writes nothing, and a
run that died between its Delta commit and this write is healed by the next conversion of the newest version. Old
metadata files, and the manifests of snapshots no longer kept, are removed.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from cdc_lib.common.s3 import S3Settings, is_s3_uri
from cdc_lib.errors import IcebergMetadataError
from cdc_lib.sink.delta_rs.writer import storage_options, table_uri
from cdc_lib.sink.iceberg.schema import Column, assign_ids, name_mapping
from cdc_lib.sink.storage import S3SinkStorage, SinkStorage, storage_for

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadataV2

log = logging.getLogger(__name__)

#: The snapshot summary key and table property that name the Delta version an Iceberg snapshot lists.
DELTA_VERSION = "binlake.delta-version"
#: Metadata files (and snapshots) kept; older ones are removed (Iceberg's `write.metadata.previous-versions-max`).
#: A kept older snapshot lists files Delta's VACUUM may since have removed: only the current one is the table.
KEEP_VERSIONS = 10
_HINT = "version-hint.text"
_NAME_MAPPING = "schema.name-mapping.default"
_MAPPING_MODES = ("delta.columnMapping.mode",)
#: Column types a partition may have: Delta's partition value (a string in the log, typed by delta-rs) is the same
#: value Iceberg holds. Timestamps are left out: Delta's writers disagree on the zone of a timestamp's string.
_PARTITION_TYPES = ("boolean", "int", "long", "string", "date")


@dataclass(frozen=True)
class Converted:
    """What a conversion did: the Delta version the current Iceberg snapshot lists, and whether it wrote one."""

    delta_version: int
    written: bool
    metadata_file: str | None = None


def location(path: str) -> str:
    """The table's location as Iceberg readers name it: a local folder, or `s3://bucket/key` for any S3 scheme."""
    if is_s3_uri(path):
        return table_uri(path).rstrip("/")
    return str(Path(path.removeprefix("file://")))


def metadata_dir(path: str) -> str:
    return f"{location(path)}/metadata"


def file_io_properties(settings: S3Settings | None) -> dict[str, str]:
    """pyiceberg FileIO properties for the sink's S3 store: the endpoint, region, credentials, addressing style and
    bounded waits binlake's own S3 calls and delta-rs use (empty for AWS defaults). A reader passes the same to
    `StaticTable.from_metadata(..., properties=...)`."""
    if settings is None:
        return {}
    properties = {
        "s3.region": settings.resolved_region(),
        # pyiceberg's PyArrow S3 defaults to virtual-hosted addressing, which MinIO, moto and Ceph do not serve.
        "s3.force-virtual-addressing": "false" if settings.path_style else "true",
        "s3.connect-timeout": str(settings.connect_seconds),
        "s3.request-timeout": str(settings.read_seconds),
    }
    if settings.endpoint_url is not None:
        properties["s3.endpoint"] = settings.endpoint_url
    if settings.credentials is not None:
        properties["s3.access-key-id"] = settings.credentials.access_key_id
        properties["s3.secret-access-key"] = settings.credentials.secret_access_key
        if settings.credentials.session_token:
            properties["s3.session-token"] = settings.credentials.session_token
    return properties


@dataclass(frozen=True)
class _Place:
    """Where the table is, and how to read and write beside it (pyiceberg's FileIO, binlake's sink storage)."""

    path: str
    storage: SinkStorage
    io: FileIO

    @property
    def folder(self) -> str:
        return metadata_dir(self.path)

    def file(self, name: str) -> str:
        return f"{self.folder}/{name}"

    @property
    def delta_options(self) -> dict[str, str] | None:
        return storage_options(self.path, self.storage)


def _place(path: str, storage: SinkStorage | None) -> _Place:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if storage is None:
        storage = storage_for(path)
    settings = storage.settings if isinstance(storage, S3SinkStorage) and is_s3_uri(path) else None
    return _Place(path=path, storage=storage, io=PyArrowFileIO(file_io_properties(settings)))


def current_metadata_file(path: str, storage: SinkStorage | None = None) -> str | None:
    """The newest Iceberg metadata file of the Delta table at `path` (by its version hint), or None."""
    place = _place(path, storage)
    return _current(place)


def _current(place: _Place) -> str | None:
    hint = place.storage.read_bytes(place.file(_HINT))
    if hint is None:
        return None
    return place.file(f"v{int(hint.decode().strip())}.metadata.json")


def _number(metadata_file: str) -> int:
    return int(metadata_file.rsplit("/", 1)[1].split(".")[0][1:])


def refresh(path: str, *, table: str | None = None, storage: SinkStorage | None = None) -> Converted:
    """Make the table's current Iceberg snapshot list the Delta table's newest version (a no-op when it does).

    `storage` is the sink's (its S3 endpoint and credentials); None: the local disk, or AWS defaults on S3.
    Raise IcebergMetadataError when the version cannot be described exactly (a column type Iceberg lacks, column
    mapping or deletion vectors turned on by another writer, partitions); I/O errors pass through (the next run
    converts again).
    """
    from pyiceberg.serializers import FromInputFile

    place = _place(path, storage)
    try:
        delta = DeltaTable(table_uri(path), storage_options=place.delta_options)
    except TableNotFoundError:
        return Converted(delta_version=-1, written=False)  # no Delta table yet: nothing for Iceberg to list
    version = delta.version()
    current_file = _current(place)
    base: TableMetadataV2 | None = None
    if current_file is not None and place.io.new_input(current_file).exists():
        loaded = FromInputFile.table_metadata(place.io.new_input(current_file))
        base = loaded  # type: ignore[assignment]  # binlake writes format version 2 only
        snapshot = loaded.current_snapshot()
        if snapshot is not None and snapshot.summary is not None \
                and snapshot.summary.get(DELTA_VERSION) == str(version):
            return Converted(delta_version=version, written=False, metadata_file=current_file)
    _check_exact(delta, table)
    columns = _columns(delta, base, table)
    partition_columns = list(delta.metadata().partition_columns)
    partitioning = _partition_spec(partition_columns, columns[0], base, table)
    number = 1 if current_file is None else _number(current_file) + 1
    # A metadata file is never overwritten: a number already taken (a run that died before its hint, or another
    # converter that got there first) is skipped, so a file a reader opened never changes under it (on S3 too).
    while place.io.new_input(place.file(f"v{number}.metadata.json")).exists():
        number += 1
    _write(place, delta, version, columns, (partition_columns, *partitioning), base, number, current_file)
    _expire(place, number)
    log.info("%s: Iceberg metadata v%d lists Delta version %d", table or path, number, version)
    return Converted(delta_version=version, written=True, metadata_file=place.file(f"v{number}.metadata.json"))


def _check_exact(delta: DeltaTable, table: str | None) -> None:
    """Refuse a Delta version whose files an Iceberg reader would read differently from a Delta reader."""
    metadata = delta.metadata()
    configuration = metadata.configuration
    for key in _MAPPING_MODES:
        if configuration.get(key, "none") != "none":
            raise IcebergMetadataError(
                f"the Delta table has {key} = {configuration[key]}: its Parquet columns have physical names, which "
                "binlake's Iceberg name mapping does not describe", remedy="drop iceberg for the table", table=table)
    actions = delta.get_add_actions(flatten=True)
    names = set(actions.schema.names)
    if "deletionVector.storageType" in names or any(name.startswith("deletionVector") for name in names):
        import pyarrow as pa

        column = pa.table(actions).column(next(n for n in names if n.startswith("deletionVector")))
        if column.null_count != len(column):
            raise IcebergMetadataError(
                "the Delta table's files carry deletion vectors, which Iceberg readers do not apply",
                remedy="set sink.tables.<t>.deletion_vectors: false and re-snapshot the table (or run OPTIMIZE "
                "with purge), or drop iceberg", table=table)


def _columns(delta: DeltaTable, base: TableMetadataV2 | None, table: str | None) -> tuple[list[Column], int]:
    """The Delta version's columns with field ids kept from every schema the Iceberg metadata has had."""
    fields = []
    for field in delta.schema().fields:
        kind = getattr(field.type, "type", None)
        if not isinstance(kind, str):
            raise IcebergMetadataError(
                f"column {field.name} has a nested Delta type, which binlake does not map to Iceberg",
                remedy="leave the column out (sink.tables.<t>.columns.exclude) or drop iceberg", table=table)
        fields.append((field.name, kind, bool(field.nullable)))
    known: dict[str, tuple[int, str]] = {}
    last_id = 0
    if base is not None:
        last_id = base.last_column_id
        for schema in base.schemas:  # oldest first: the current schema's ids and types win
            for nested in schema.fields:
                known[nested.name] = (nested.field_id, str(nested.field_type))
    return assign_ids(fields, known, last_id, table=table)


def _partition_spec(
    names: list[str], columns: list[Column], base: TableMetadataV2 | None, table: str | None,
) -> tuple[PartitionSpec, list[PartitionSpec], int]:
    """The identity partition spec of Delta's partition columns (one already in the metadata when it is the same),
    every spec the metadata keeps, and the last partition field id. Delta keeps partition values out of its
    Parquet files; Iceberg readers project an identity partition's value from the manifest entry instead."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    specs = list(base.partition_specs) if base is not None else [UNPARTITIONED_PARTITION_SPEC]
    last = base.last_partition_id if base is not None and base.last_partition_id is not None else 999
    known = {field.source_id: field.field_id for spec in specs for field in spec.fields}  # a column keeps its id
    by_name = {column.name: column for column in columns}
    fields = []
    for name in names:
        column = by_name[name]
        if column.type not in _PARTITION_TYPES and not column.type.startswith("decimal("):
            raise IcebergMetadataError(
                f"the Delta table is partitioned by {name} ({column.type}), whose partition values binlake does not "
                "describe to Iceberg", remedy="re-snapshot the table partitioned by another column, or drop iceberg",
                table=table)
        field_id = known.get(column.field_id)
        if field_id is None:
            last += 1
            field_id = last
        fields.append(PartitionField(source_id=column.field_id, field_id=field_id, transform=IdentityTransform(),
                                     name=name))
    same = next((spec for spec in specs if tuple(spec.fields) == tuple(fields)), None)
    if same is not None:
        return same, specs, last
    spec = PartitionSpec(*fields, spec_id=max(spec.spec_id for spec in specs) + 1)
    return spec, [*specs, spec], last


def _iceberg_schema(columns: list[Column], schema_id: int) -> Schema:
    from pyiceberg import types
    from pyiceberg.schema import Schema

    simple: dict[str, types.PrimitiveType] = {
        "boolean": types.BooleanType(), "int": types.IntegerType(), "long": types.LongType(),
        "float": types.FloatType(), "double": types.DoubleType(), "string": types.StringType(),
        "binary": types.BinaryType(), "date": types.DateType(), "timestamp": types.TimestampType(),
        "timestamptz": types.TimestamptzType(),
    }

    def parsed(kind: str) -> types.PrimitiveType:
        if kind in simple:
            return simple[kind]
        precision, scale = kind.removeprefix("decimal(").removesuffix(")").split(",")  # `schema` made it so
        return types.DecimalType(int(precision), int(scale))

    return Schema(
        *[types.NestedField(column.field_id, column.name, parsed(column.type), required=column.required)
          for column in columns],
        schema_id=schema_id,
    )


def _write(
    place: _Place, delta: DeltaTable, version: int, columns_and_last: tuple[list[Column], int],
    partitioning: tuple[list[str], PartitionSpec, list[PartitionSpec], int],
    base: TableMetadataV2 | None, number: int, previous_file: str | None,
) -> set[int]:
    """Write the manifest, manifest list and v<number>.metadata.json, then the hint; the snapshot ids kept."""
    import pyarrow as pa
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        write_manifest,
        write_manifest_list,
    )
    from pyiceberg.partitioning import _to_partition_representation
    from pyiceberg.table.metadata import TableMetadataV2
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
    from pyiceberg.table.snapshots import MetadataLogEntry, Operation, Snapshot, SnapshotLogEntry, Summary
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.typedef import Record

    columns, last_id = columns_and_last
    io = place.io
    root = location(place.path)
    if not is_s3_uri(place.path):  # S3 has no folders; the local rename of the hint needs one
        Path(place.folder).mkdir(parents=True, exist_ok=True)
    schemas = list(base.schemas) if base is not None else []
    schema = _iceberg_schema(columns, schema_id=0)
    same = next((old for old in schemas if old.fields == schema.fields), None)
    if same is None:
        schema = _iceberg_schema(columns, schema_id=max((old.schema_id for old in schemas), default=-1) + 1)
        schemas.append(schema)
    else:
        schema = same
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    sequence = (base.last_sequence_number if base is not None else 0) + 1
    now_ms = int(time.time() * 1000)
    partition_columns, spec, specs, last_partition_id = partitioning
    partition_types = [field.field_type for field in spec.partition_type(schema).fields]
    # delta-rs types each file's partition values (`partition.<column>`) from the strings in the log.
    files = pa.table(delta.get_add_actions(flatten=True)).select(
        ["path", "size_bytes", "num_records", *(f"partition.{name}" for name in partition_columns)]).to_pylist()
    manifest_path = place.file(f"manifest-{snapshot_id}.avro")
    records = 0
    with write_manifest(format_version=2, spec=spec, schema=schema,
                        output_file=io.new_output(manifest_path), snapshot_id=snapshot_id,
                        avro_compression="deflate") as writer:
        for entry in files:
            # The log holds a relative URI (percent-encoded); Iceberg holds the location readers open as is.
            file_path = f"{root}/{unquote(entry['path'])}"
            count = entry["num_records"]
            if count is None:  # a file written without statistics: its footer has the count
                import pyarrow.parquet as pq

                with io.new_input(file_path).open() as stream:
                    count = pq.read_metadata(stream).num_rows
            records += count
            data_file = DataFile.from_args(
                content=DataFileContent.DATA, file_path=file_path, file_format=FileFormat.PARQUET,
                partition=Record(*[_to_partition_representation(kind, entry[f"partition.{name}"])
                                   for name, kind in zip(partition_columns, partition_types, strict=True)]),
                record_count=count, file_size_in_bytes=entry["size_bytes"],
            )
            data_file.spec_id = spec.spec_id
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                               data_file=data_file))
    manifest = writer.to_manifest_file()
    previous = base.current_snapshot() if base is not None else None
    list_path = place.file(f"snap-{snapshot_id}.avro")
    with write_manifest_list(format_version=2, output_file=io.new_output(list_path), snapshot_id=snapshot_id,
                             parent_snapshot_id=previous.snapshot_id if previous is not None else None,
                             sequence_number=sequence, avro_compression="deflate") as list_writer:
        list_writer.add_manifests([manifest])
    summary = Summary(operation=Operation.OVERWRITE, **{
        DELTA_VERSION: str(version), "total-data-files": str(len(files)), "total-records": str(records),
        "total-delete-files": "0", "total-position-deletes": "0", "total-equality-deletes": "0",
    })
    snapshot = Snapshot.model_validate({
        "snapshot-id": snapshot_id, "parent-snapshot-id": previous.snapshot_id if previous is not None else None,
        "sequence-number": sequence, "timestamp-ms": now_ms, "manifest-list": list_path, "summary": summary,
        "schema-id": schema.schema_id,
    })
    snapshots = ([*base.snapshots] if base is not None else [])[-(KEEP_VERSIONS - 1):] + [snapshot]
    kept = {kept_snapshot.snapshot_id for kept_snapshot in snapshots}
    snapshot_log = [entry for entry in (base.snapshot_log if base is not None else []) if entry.snapshot_id in kept]
    metadata_log = list(base.metadata_log) if base is not None else []
    if previous_file is not None and base is not None:
        metadata_log.append(MetadataLogEntry.model_validate({"metadata-file": previous_file,
                                                "timestamp-ms": base.last_updated_ms}))
    metadata = TableMetadataV2.model_validate({
        "location": root,
        "table-uuid": base.table_uuid if base is not None else uuid.uuid4(),
        "last-updated-ms": now_ms, "last-column-id": last_id, "schemas": schemas,
        "current-schema-id": schema.schema_id, "partition-specs": specs,
        "default-spec-id": spec.spec_id, "last-partition-id": last_partition_id,
        "properties": {
            _NAME_MAPPING: json.dumps(name_mapping(columns)), DELTA_VERSION: str(version),
            "write.metadata.previous-versions-max": str(KEEP_VERSIONS), "write.metadata.delete-after-commit.enabled":
            "true", "binlake.writer": "binlake (Iceberg metadata of a Delta table; docs/iceberg.md)",
        },
        "current-snapshot-id": snapshot_id, "snapshots": snapshots,
        "snapshot-log": [*snapshot_log,
                         SnapshotLogEntry.model_validate({"snapshot-id": snapshot_id, "timestamp-ms": now_ms})],
        "metadata-log": metadata_log[-(KEEP_VERSIONS - 1):],
        "sort-orders": [UNSORTED_SORT_ORDER], "default-sort-order-id": 0,
        "refs": {"main": SnapshotRef.model_validate({"snapshot-id": snapshot_id, "type": SnapshotRefType.BRANCH})},
        "last-sequence-number": sequence,
    })
    # The metadata file (a new name) and then the hint, each written whole: renamed over on a local disk, one PUT
    # on S3, where an object is never seen half-written. A reader sees the old table until the hint names the new
    # file, which is complete by then; a crash before the hint leaves v<number> unnamed, and the next run skips it.
    place.storage.replace_bytes(place.file(f"v{number}.metadata.json"),
                                metadata.model_dump_json(exclude_none=True).encode())
    place.storage.replace_bytes(place.file(_HINT), str(number).encode())
    return kept


def _expire(place: _Place, number: int) -> None:
    """Remove metadata files older than the last KEEP_VERSIONS, and the Avro files of snapshots they name that no
    remaining metadata file has as its current snapshot (so each kept file's current snapshot stays readable, and
    KEEP_VERSIONS snapshots' files stay in all).

    Files are chosen from the metadata files themselves, never from what this run's base knew: another converter
    running at the same moment (a sync beside `binlake maintain`) writes its own snapshot from the same base, and
    its metadata file may become current after ours. A snapshot no metadata file names yet (a converter between
    its manifest and its metadata file, or one that died there) is named by no removed file, so it is left alone.
    """
    numbered = sorted((int(name[1:].split(".")[0]), name) for name in place.storage.list_names(place.folder) or []
                      if name.startswith("v") and name.endswith(".metadata.json"))
    removed = [name for version, name in numbered if version <= number - KEEP_VERSIONS]
    if not removed:
        return
    current = {_snapshots(place, name)[0] for version, name in numbered if version > number - KEEP_VERSIONS}
    for name in removed:
        for snapshot_id in _snapshots(place, name)[1] - current:
            for avro in (f"manifest-{snapshot_id}.avro", f"snap-{snapshot_id}.avro"):
                _delete(place, avro)
        _delete(place, name)
        _SNAPSHOTS.pop(place.file(name), None)


def _delete(place: _Place, name: str) -> None:
    """Delete a file of the metadata folder; gone already is fine (an older expiry, or another converter's)."""
    try:
        place.io.delete(place.file(name))
    except FileNotFoundError:
        pass


#: Each metadata file's current snapshot id and every snapshot id it names, by its location. A metadata file is
#: never rewritten (a number is never reused), so this never changes, and a conversion reads only the files
#: written since its last.
_SNAPSHOTS: dict[str, tuple[int | None, frozenset[int]]] = {}


def _snapshots(place: _Place, name: str) -> tuple[int | None, frozenset[int]]:
    where = place.file(name)
    known = _SNAPSHOTS.get(where)
    if known is None:
        document = place.storage.read_bytes(where)
        if document is None:
            return None, frozenset()  # removed meanwhile by another converter
        metadata = json.loads(document)
        current = metadata.get("current-snapshot-id")
        known = (None if current is None else int(current),
                 frozenset(int(snapshot["snapshot-id"]) for snapshot in metadata.get("snapshots") or []))
        if len(_SNAPSHOTS) > 4096:
            _SNAPSHOTS.clear()  # a bound for a process converting many tables for days
        _SNAPSHOTS[where] = known
    return known


__all__ = ["DELTA_VERSION", "KEEP_VERSIONS", "Converted", "current_metadata_file", "file_io_properties", "location",
           "metadata_dir", "refresh"]
