"""The peer: pipelinewise-tap-mysql in LOG_BASED mode over the same binlog range, records to /dev/null.

It pins old python-mysql-replication and PyMySQL versions, so it lives in its own virtualenv
(`bench/.peer-venv`, created on first use from PyPI) and runs as a separate process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PEER_PACKAGE = "pipelinewise-tap-mysql==1.6.0"
VENV = Path(__file__).with_name(".peer-venv")


def tap_executable() -> Path:
    tap = VENV / "bin" / "tap-mysql"
    if not tap.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", PEER_PACKAGE], check=True)
    return tap


def run_peer(port: int, user: str, password: str, start: dict[str, Any], work: Path) -> tuple[int, float]:
    """Rows the tap emitted and its wall seconds, reading the binlog from `start` to the current end."""
    tap = tap_executable()
    config = {"host": "127.0.0.1", "port": port, "user": user, "password": password, "server_id": 7703}
    (work / "peer-config.json").write_text(json.dumps(config))
    catalog = json.loads(
        subprocess.run([str(tap), "--config", str(work / "peer-config.json"), "--discover"],
                       capture_output=True, text=True, check=True).stdout
    )
    streams = [stream for stream in catalog["streams"] if stream["tap_stream_id"] == "bench-orders"]
    for entry in streams[0]["metadata"]:
        entry["metadata"]["selected"] = True
        if not entry["breadcrumb"]:
            entry["metadata"]["replication-method"] = "LOG_BASED"
    (work / "peer-catalog.json").write_text(json.dumps({"streams": streams}))
    state = {"bookmarks": {"bench-orders": {"log_file": start["file"], "log_pos": start["pos"], "version": 1}}}
    (work / "peer-state.json").write_text(json.dumps(state))
    started = time.perf_counter()
    tap_run = subprocess.Popen(
        [str(tap), "--config", str(work / "peer-config.json"), "--catalog", str(work / "peer-catalog.json"),
         "--state", str(work / "peer-state.json")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert tap_run.stdout is not None
    records = 0
    for line in tap_run.stdout:  # counting RECORD messages is the only work done on them
        if line.startswith(b'{"type": "RECORD"') or line.startswith(b'{"type":"RECORD"'):
            records += 1
    tap_run.wait()
    return records, time.perf_counter() - started
