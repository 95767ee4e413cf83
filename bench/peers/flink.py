"""Flink CDC's MySQL source as a peer: only if Maven Central serves its artifact.

On this workplace's Maven Central mirror `org.apache.flink:flink-connector-mysql-cdc` is refused (3.5.0 and 3.4.0
tried), so the bench reports which artifact was refused instead of a figure; no Flink job is built until it resolves.
"""

from __future__ import annotations

import shutil
import subprocess

ARTIFACTS = ("org.apache.flink:flink-connector-mysql-cdc:3.5.0",)


def resolve() -> str:
    """'resolved <artifact>' or 'refused <artifact>: <Maven's reason>' for the first artifact Flink CDC needs."""
    maven = shutil.which("mvn")
    if maven is None:
        return "not tried: no Maven"
    for artifact in ARTIFACTS:
        result = subprocess.run(
            [maven, "-B", "dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"],
            capture_output=True, text=True, timeout=300,
        )
        if result.returncode != 0:
            errors = [line for line in result.stdout.splitlines() if line.startswith("[ERROR]")]
            reason = errors[0].rsplit(": ", 1)[-1].split(" during ")[0] if errors else "see mvn dependency:get"
            return f"refused {artifact} ({reason[:200]})"
    return f"resolved {', '.join(ARTIFACTS)} (the Flink job itself is not built yet)"
