"""Jars binlake puts on Spark's classpath, fetched once from Maven Central and cached outside git."""

from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cdc_lib.errors import BinlakeError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class MavenArtifact:
    group: str
    artifact: str
    version: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str = MAVEN_CENTRAL) -> str:
        return f"{repository}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


DELTA_VERSION = "4.0.0"
MARIADB_JDBC_VERSION = "3.5.6"

CORE_ARTIFACTS: tuple[MavenArtifact, ...] = (
    MavenArtifact("io.delta", "delta-spark_2.13", DELTA_VERSION),
    MavenArtifact("io.delta", "delta-storage", DELTA_VERSION),
    MavenArtifact("org.mariadb.jdbc", "mariadb-java-client", MARIADB_JDBC_VERSION),
)


def jar_cache_dir() -> Path:
    configured = os.environ.get("BINLAKE_JAR_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "binlake" / "jars"


def ensure_jars(artifacts: tuple[MavenArtifact, ...] = CORE_ARTIFACTS, *, cache_dir: Path | None = None) -> list[Path]:
    """Return local paths of the artifacts, downloading (and SHA-1 checking) any not yet cached."""
    cache = cache_dir or jar_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    paths = []
    for artifact in artifacts:
        target = cache / artifact.file_name
        if not target.exists():
            _download(artifact, target)
        paths.append(target)
    return paths


def _download(artifact: MavenArtifact, target: Path) -> None:
    url = artifact.url()
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            payload = response.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
            expected_sha1 = response.read().decode().split()[0].strip()
    except OSError as exc:
        raise BinlakeError(
            f"cannot download {artifact.file_name} from Maven Central ({exc})",
            remedy=f"check network access to {MAVEN_CENTRAL}, or place the jar in {target.parent} "
            "(BINLAKE_JAR_CACHE overrides the folder)",
        ) from None
    actual_sha1 = hashlib.sha1(payload).hexdigest()
    if actual_sha1 != expected_sha1:
        raise BinlakeError(
            f"{artifact.file_name} failed its SHA-1 check ({actual_sha1} != {expected_sha1})",
            remedy="retry; if it persists, a proxy is corrupting downloads",
        )
    partial = target.with_suffix(f".part{os.getpid()}")
    partial.write_bytes(payload)
    partial.replace(target)


if __name__ == "__main__":
    for path in ensure_jars():
        print(path)
