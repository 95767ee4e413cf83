"""The lines only the JVM writes, which a user must never see in binlake's or Dagster's output."""

from __future__ import annotations

import re

# Lines only the JVM writes: launcher and SLF4J notices, log4j's own warnings, Spark's pattern layout
# ("25/11/02 10:00:00 WARN NativeCodeLoader: ...") and its structured JSON layout ({"ts": ...}).
JVM_NOISE = re.compile(
    r"SLF4J|log4j|incubator|NativeCodeLoader|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR) "
    r"|^(WARN|INFO|ERROR) |Using Spark's default|^\{\"ts\":",
    re.MULTILINE,
)
