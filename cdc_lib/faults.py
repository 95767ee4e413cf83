"""Named failpoints: `BINLAKE_FAILPOINT=<name>` makes the process SIGKILL itself there.

They exist so crash-safety tests can stop a real run at the exact step under test.
"""

from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    if os.environ.get("BINLAKE_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
