"""Variants of the delta-rs snapshot write against the shipped one, alternated in one warm process (issue 30).

Each variant snapshots the same table into a lake of its own; every round runs mysqldump and then each variant,
the order rotated from round to round (the first snapshot of a round tends to be faster, whichever it is:
bench/NOTES.md "Pipelining the wave"). A variant changes only what delta-rs is handed (`write_deltalake`'s
Parquet writer properties, or the table's file size or statistics columns, given at the table's creation); the
read is the same. For each: median wall seconds, the ratio to mysqldump's median, the seconds inside
`write_deltalake` (the write the variant touches) and the CPU seconds of the JVM, `mariadbd` and this process
from /proc.

    python -m bench.snapshot.snapshot_variants --rows 2000000 --repeat 3
    python -m bench.snapshot.snapshot_variants --rows 500000 --variants shipped zstd
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER, create_table, pipeline_config
from bench.snapshot.snapshot_profile import _cpu_snapshot, _dump_seconds
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline


@dataclass(frozen=True)
class Variant:
    """What one variant adds to `write_deltalake`'s keywords, and table properties set once before it is timed."""

    name: str
    writer_properties: dict[str, Any] = field(default_factory=dict)
    table_properties: dict[str, str] = field(default_factory=dict)


VARIANTS = {
    "shipped": Variant("shipped"),
    "lz4": Variant("lz4", {"compression": "LZ4_RAW"}),
    "zstd": Variant("zstd", {"compression": "ZSTD", "compression_level": 1}),
    "uncompressed": Variant("uncompressed", {"compression": "UNCOMPRESSED"}),
    "key-stats": Variant("key-stats", table_properties={"delta.dataSkippingNumIndexedCols": "1"}),
    "lz4+key-stats": Variant("lz4+key-stats", {"compression": "LZ4_RAW"},
                             {"delta.dataSkippingNumIndexedCols": "1"}),
    "8mib-files": Variant("8mib-files", table_properties={"delta.targetFileSize": str(8 * 1024 * 1024)}),
}


@contextmanager
def _writing(variant: Variant, spent: list[float]) -> Iterator[None]:
    """`deltalake.write_deltalake` with the variant's writer properties, its seconds added to `spent`."""
    import deltalake
    from deltalake import WriterProperties

    original: Callable[..., Any] = deltalake.write_deltalake

    def timed(*args: Any, **kwargs: Any) -> Any:
        if variant.writer_properties:
            kwargs["writer_properties"] = WriterProperties(**variant.writer_properties)
        if kwargs.get("configuration") is not None:
            # The table's creation (an overwrite keeps the properties after it). Set later, by delta-rs's
            # ALTER, they would add writer features (`variantType`) that binlake's writer choice refuses.
            kwargs["configuration"] = {**kwargs["configuration"], **variant.table_properties}
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    deltalake.write_deltalake = timed  # write_wave imports it from the package at each call
    try:
        yield
    finally:
        deltalake.write_deltalake = original


def measure(server: LocalMariaDB, work: Path, *, rows: int, repeat: int, names: list[str],
            settings: str) -> dict[str, Any]:
    table = f"variants_{rows}"
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, table, rows)
    finally:
        connection.close()
    variants = [VARIANTS[name] for name in names]
    pipelines: dict[str, Pipeline] = {}
    for index, variant in enumerate(variants):
        config = pipeline_config(work, server.port, f"variant_{index}", [f"keepup.{table}"], 7800 + index)
        config.write_text(config.read_text() + "snapshot: {writer: delta-rs}\n"
                          + settings.replace(";", "\n") + "\n")
        pipeline = Pipeline(load_config(config))
        with _writing(variant, []):
            pipeline.snapshot()  # creates the table (and warms the JVM): not counted
        with _writing(variant, []):
            pipeline.snapshot()  # the JIT's second pass over the same paths: not counted either
        pipelines[variant.name] = pipeline
    dumps: list[float] = []
    walls: dict[str, list[float]] = {variant.name: [] for variant in variants}
    writes: dict[str, list[float]] = {variant.name: [] for variant in variants}
    cpu: dict[str, list[dict[str, float]]] = {variant.name: [] for variant in variants}
    loads: list[str] = []
    for round_number in range(repeat):
        loads.append(Path("/proc/loadavg").read_text().split()[0])
        dumps.append(_dump_seconds(server, "keepup", table))
        shift = round_number % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            spent: list[float] = []
            with _writing(variant, spent):
                before = _cpu_snapshot(server.pid)
                started = time.perf_counter()
                result = pipelines[variant.name].snapshot()[0]
                walls[variant.name].append(time.perf_counter() - started)
                after = _cpu_snapshot(server.pid)
            assert result.rows == rows, (variant.name, result.rows)
            writes[variant.name].append(sum(spent))
            cpu[variant.name].append({name: after[name] - before[name] for name in after if name in before})
    loads.append(Path("/proc/loadavg").read_text().split()[0])
    dump_s = statistics.median(dumps)
    figures: dict[str, Any] = {"rows": rows, "mysqldump_s": dump_s, "mysqldump_runs": dumps, "load_1min": loads,
                               "variants": {}}
    for name in walls:
        wall = statistics.median(walls[name])
        figures["variants"][name] = {
            "snapshot_s": wall, "runs": walls[name], "vs_mysqldump": dump_s / wall,
            "write_deltalake_s": statistics.median(writes[name]),
            "cpu_s": {key: statistics.median(run[key] for run in cpu[name]) for key in cpu[name][0]},
        }
    return figures


def print_figures(figures: dict[str, Any]) -> None:
    print(f"\n{figures['rows']:,} rows; mysqldump {figures['mysqldump_s']:.2f} s "
          f"(runs {', '.join(f'{value:.2f}' for value in figures['mysqldump_runs'])}); "
          f"load average (1 min) by round: {' '.join(figures['load_1min'])}")
    for name, figured in figures["variants"].items():
        cpu = ", ".join(f"{key} {value:.2f}" for key, value in figured["cpu_s"].items())
        print(f"  {name:<14} {figured['snapshot_s']:6.2f} s  {figured['vs_mysqldump']:5.2f}× mysqldump  "
              f"write_deltalake {figured['write_deltalake_s']:5.2f} s  "
              f"runs {', '.join(f'{value:.2f}' for value in figured['runs'])}  CPU s: {cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--settings", default="", help="YAML lines added to every pipeline config, split on ';'")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="binlake-snapshot-variants-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        server.execute("CREATE DATABASE keepup")
        figures = measure(server, work, rows=arguments.rows, repeat=arguments.repeat, names=arguments.variants,
                          settings=arguments.settings)
        print_figures(figures)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if arguments.json:
        arguments.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
