"""Jars binlake puts on Spark's classpath, fetched once from Maven Central and cached outside git.

An engine module, not a development helper: every local Spark session the engine builds (`cdc_lib.sink.spark.session`)
resolves its classpath here, and the production image fetches them with `python -m cdc_lib.sink.spark.jars`.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
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
    packaging: str = "jar"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.{self.packaging}"

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def url(self, repository: str = MAVEN_CENTRAL) -> str:
        return f"{repository}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


DELTA_VERSION = "4.0.1"
MARIADB_JDBC_VERSION = "3.5.6"

CORE_ARTIFACTS: tuple[MavenArtifact, ...] = (
    MavenArtifact("io.delta", "delta-spark_2.13", DELTA_VERSION),
    MavenArtifact("io.delta", "delta-storage", DELTA_VERSION),
    MavenArtifact("org.mariadb.jdbc", "mariadb-java-client", MARIADB_JDBC_VERSION),
)

#: Delta UniForm's Iceberg converter (`org.apache.spark.sql.delta.icebergShaded.IcebergConverter`). Not fetched:
#: Maven Central answered 404 for this coordinate (pom and jar) on 2026-11-27, so binlake cannot keep Iceberg
#: metadata current and refuses `sink.tables.<t>.iceberg: true` (docs/iceberg.md). Named here so every message
#: about it names the same coordinate.
DELTA_ICEBERG = MavenArtifact("io.delta", "delta-iceberg_2.13", DELTA_VERSION)

#: Hadoop version inside pyspark 4.0.x, used only when the pyspark jars folder cannot be found.
FALLBACK_HADOOP_VERSION = "3.4.1"
_HADOOP_CLIENT_JAR = re.compile(r"^hadoop-client-api-(\d+\.\d+\.\d+)\.jar$")
_SDK_V2_PROPERTY = re.compile(r"<aws-java-sdk-v2\.version>([^<]+)</aws-java-sdk-v2\.version>")


def pyspark_hadoop_version() -> str:
    """The Hadoop version pyspark ships (from its `hadoop-client-api-<v>.jar`); hadoop-aws must match it exactly."""
    try:
        import pyspark
    except ImportError:
        return FALLBACK_HADOOP_VERSION
    jars = Path(pyspark.__file__).parent / "jars"
    for entry in sorted(jars.glob("hadoop-client-api-*.jar")):
        if match := _HADOOP_CLIENT_JAR.match(entry.name):
            return match.group(1)
    return FALLBACK_HADOOP_VERSION


def aws_sdk_version(hadoop_version: str, *, cache_dir: Path | None = None) -> str:
    """The AWS SDK v2 bundle version hadoop-aws was built against, read from Hadoop's parent pom (cached)."""
    pom = MavenArtifact("org.apache.hadoop", "hadoop-project", hadoop_version, packaging="pom")
    path = ensure_jars((pom,), cache_dir=cache_dir)[0]
    match = _SDK_V2_PROPERTY.search(path.read_text())
    if match is None:
        raise BinlakeError(
            f"{pom.file_name} names no aws-java-sdk-v2.version",
            remedy="this Hadoop version predates SDK v2; use pyspark 4.x (Hadoop 3.4+)",
        )
    return match.group(1)


def s3a_artifacts(*, cache_dir: Path | None = None) -> tuple[MavenArtifact, ...]:
    """hadoop-aws matching pyspark's Hadoop, plus the AWS SDK v2 bundle it depends on."""
    hadoop = pyspark_hadoop_version()
    return (
        MavenArtifact("org.apache.hadoop", "hadoop-aws", hadoop),
        MavenArtifact("software.amazon.awssdk", "bundle", aws_sdk_version(hadoop, cache_dir=cache_dir)),
    )


def s3a_jars_cached(*, cache_dir: Path | None = None) -> bool:
    """Whether hadoop-aws and its SDK bundle are already in the cache (checked without the network)."""
    cache = cache_dir or jar_cache_dir()
    hadoop = pyspark_hadoop_version()
    pom = cache / MavenArtifact("org.apache.hadoop", "hadoop-project", hadoop, packaging="pom").file_name
    if not pom.is_file() or (match := _SDK_V2_PROPERTY.search(pom.read_text())) is None:
        return False
    wanted = (
        MavenArtifact("org.apache.hadoop", "hadoop-aws", hadoop),
        MavenArtifact("software.amazon.awssdk", "bundle", match.group(1)),
    )
    return all((cache / artifact.file_name).is_file() for artifact in wanted)


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
    partial = target.with_suffix(f".part{os.getpid()}")
    digest = hashlib.sha1()
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
            expected_sha1 = response.read().decode().split()[0].strip()
        # Streamed to disk: the AWS SDK bundle is over 500 MB.
        with urllib.request.urlopen(url, timeout=120) as response, open(partial, "wb") as handle:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                handle.write(chunk)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise BinlakeError(
            f"cannot download {artifact.file_name} from Maven Central ({exc})",
            remedy=f"check network access to {MAVEN_CENTRAL}, or place the file in {target.parent} "
            "(BINLAKE_JAR_CACHE overrides the folder)",
        ) from None
    actual_sha1 = digest.hexdigest()
    if actual_sha1 != expected_sha1:
        partial.unlink(missing_ok=True)
        raise BinlakeError(
            f"{artifact.file_name} failed its SHA-1 check ({actual_sha1} != {expected_sha1})",
            remedy="retry; if it persists, a proxy is corrupting downloads",
        )
    partial.replace(target)


if __name__ == "__main__":
    # `./run setup` pre-fetches the s3a jars too, so CI downloads them once; `--core` skips them.
    wanted = CORE_ARTIFACTS if "--core" in sys.argv[1:] else CORE_ARTIFACTS + s3a_artifacts()
    for path in ensure_jars(wanted):
        print(path)
