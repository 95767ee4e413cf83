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
            reason = next((line for line in result.stdout.splitlines() if "Could not" in line or "find" in line),
                          "see mvn dependency:get")
            return f"refused {artifact}: {reason.split(': ', 1)[-1][:160]}"
    return f"resolved {', '.join(ARTIFACTS)} (the Flink job itself is not built yet)"
