"""The Debezium peer: its embedded engine (debezium-embedded + debezium-connector-mysql) with a consumer that only
counts records (bench/peers/debezium/, a small Java program), against the bench's MariaDB.

Built with Maven at bench time into ~/.cache/binlake/peers/debezium (beside binlake's jar cache, outside git);
rebuilt only when its sources change. Each phase is its own JVM; its CPU seconds come from wait4's rusage.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("debezium")
MAIN_CLASS = "binlake.peer.CountingPeer"
#: The table whose inserts tell the snapshot phase that the engine streams (its offsets are past the snapshot).
MARKER = "peer_marker"


def build_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "binlake" / "peers" / "debezium"


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted([SOURCE / "pom.xml", *SOURCE.rglob("*.java")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build() -> str:
    """Compile the peer and copy its runtime jars (Maven Central, once); return the Java classpath."""
    target = build_dir()
    stamp = target / "source.sha256"
    digest = _source_digest()
    if not (stamp.is_file() and stamp.read_text() == digest and (target / "dependency").is_dir()):
        maven = shutil.which("mvn")
        if maven is None:
            raise RuntimeError("the Debezium peer needs Maven (apt-get install maven)")
        result = subprocess.run(
            [maven, "-q", "-B", "-f", str(SOURCE / "pom.xml"), f"-Dpeer.build={target}", "compile",
             "dependency:copy-dependencies", "-DincludeScope=runtime"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:5]
            raise RuntimeError("building the Debezium peer failed: " + " | ".join(errors))
        stamp.write_text(digest)
    return f"{target / 'classes'}:{target / 'dependency'}/*"


@dataclass(frozen=True)
class Source:
    """The MariaDB the peer reads and the table it counts."""

    port: int
    user: str
    password: str
    server_id: int
    database: str = "bench"
    table: str = "orders"


@dataclass(frozen=True)
class PhaseResult:
    records: int
    #: From the engine's start to the last expected record (connector start included, JVM start excluded).
    seconds: float
    #: From the first counted record to the last (the connector's start-up excluded).
    seconds_from_first: float
    #: The JVM's CPU seconds over its whole life (its start included).
    cpu_seconds: float


def run_phase(phase: str, expected: int, source: Source, work: Path, *,
              after_result: Callable[[], None] | None = None, timeout: float = 1800.0) -> PhaseResult:
    """Run one phase (`snapshot` or `stream`) in its own JVM on the offsets and schema history in `work`."""
    work.mkdir(parents=True, exist_ok=True)
    command = [
        shutil.which("java") or "java", "-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        f"-Dpeer.timeout.s={int(timeout)}", "-cp", build(), MAIN_CLASS,
        phase, str(expected), str(source.port), source.user, source.password, str(work), source.database,
        source.table, MARKER, str(source.server_id),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    result_line = ""
    for line in process.stdout:
        if line.startswith("RESULT "):
            result_line = line
            if after_result is not None:
                after_result()
    stderr = process.stderr.read()
    # wait4, not Popen.wait: its rusage is the JVM's CPU (every thread) once it has ended.
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or not result_line:
        raise RuntimeError(f"Debezium peer {phase} exited {process.returncode}: {stderr.strip()[-800:]}")
    _, _, records, seconds, from_first = result_line.split()
    return PhaseResult(int(records), float(seconds), float(from_first), usage.ru_utime + usage.ru_stime)


def prepare(execute: Callable[..., None], source: Source) -> None:
    """The marker table the snapshot phase waits on; it is in the peer's table list from the start."""
    execute(f"CREATE TABLE IF NOT EXISTS {source.database}.{MARKER} (id INT AUTO_INCREMENT PRIMARY KEY)")


def snapshot(execute: Callable[..., None], source: Source, work: Path, expected: int, *,
             timeout: float = 1800.0) -> PhaseResult:
    """Snapshot `expected` rows into fresh offsets in `work`, leaving them past the snapshot for `stream`."""
    return run_phase("snapshot", expected, source, work,
                     after_result=lambda: execute(f"INSERT INTO {source.database}.{MARKER} VALUES ()"),
                     timeout=timeout)


def stream(source: Source, work: Path, expected: int, *, timeout: float = 1800.0) -> PhaseResult:
    """Resume from the offsets in `work` and count `expected` inserts, updates and deletes from the binlog."""
    return run_phase("stream", expected, source, work, timeout=timeout)
