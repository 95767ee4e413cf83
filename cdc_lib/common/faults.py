"""Named failpoints, so fault tests can stop a real run at the exact step under test.

- `BINLAKE_FAILPOINT=<name>` makes the process SIGKILL itself there.
- `BINLAKE_FAILPOINT_PAUSE=<name>` makes it pause there while the test breaks something (stops a
  server, cuts a proxy). With `BINLAKE_FAILPOINT_PAUSE_FILE=<path>` the process creates that file
  on arrival and waits until the test deletes it (at most `BINLAKE_FAILPOINT_PAUSE_SECONDS`, 120 by
  default); without a file it sleeps `BINLAKE_FAILPOINT_PAUSE_SECONDS` (default 5).

With `BINLAKE_FAILPOINT_AT=<n>` either acts only at the n-th arrival at the named failpoint (a snapshot's
n-th wave, say); the earlier arrivals pass.

Nothing happens unless one of these variables names the failpoint.

An engine module, not a development helper: the failpoints are compiled into the commit path (snapshot,
binlog, pipeline), inert unless a variable names one, and they are how the crash-safety contract is tested
against the very code that runs in production.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

KILL_VARIABLE = "BINLAKE_FAILPOINT"
PAUSE_VARIABLE = "BINLAKE_FAILPOINT_PAUSE"
PAUSE_FILE_VARIABLE = "BINLAKE_FAILPOINT_PAUSE_FILE"
PAUSE_SECONDS_VARIABLE = "BINLAKE_FAILPOINT_PAUSE_SECONDS"
AT_VARIABLE = "BINLAKE_FAILPOINT_AT"

_arrivals: dict[str, int] = {}


def failpoint(name: str) -> None:
    named = name in (os.environ.get(KILL_VARIABLE), os.environ.get(PAUSE_VARIABLE))
    if not named:
        return
    _arrivals[name] = _arrivals.get(name, 0) + 1
    wanted = os.environ.get(AT_VARIABLE)
    if wanted is not None and _arrivals[name] != int(wanted):
        return
    if os.environ.get(KILL_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_VARIABLE) == name:
        _pause()


def _pause() -> None:
    flag = os.environ.get(PAUSE_FILE_VARIABLE)
    if not flag:
        time.sleep(float(os.environ.get(PAUSE_SECONDS_VARIABLE, "5")))
        return
    path = Path(flag)
    path.write_text(str(os.getpid()))
    deadline = time.monotonic() + float(os.environ.get(PAUSE_SECONDS_VARIABLE, "120"))
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
