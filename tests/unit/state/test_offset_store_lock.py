"""The local offset store's folder lock: a holder frozen inside a write (SIGSTOP) ends a waiting write in a bounded,
named OffsetStoreError instead of hanging it for as long as the holder stays frozen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_lib.errors import OffsetStoreError
from cdc_lib.state import offset_store
from cdc_lib.state.offset_store import LocalOffsetStore


def test_a_write_waits_a_bounded_time_for_a_frozen_holder_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalOffsetStore(tmp_path)
    store.write_document("p", "state.json", {"n": 1}, None)
    lock = next(tmp_path.rglob(".lock"))
    # Another process takes the lock and is stopped holding it, as a runner frozen inside its write would be.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"handle = open({str(lock)!r}, 'a+')\n"
        "fcntl.flock(handle, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGSTOP)
        monkeypatch.setattr(offset_store, "LOCK_WAIT_SECONDS", 1.5)
        started = time.monotonic()
        with pytest.raises(OffsetStoreError) as raised:
            store.write_document("p", "state.json", {"n": 2}, "1")
        waited = time.monotonic() - started
        assert 1.4 <= waited < 10, waited
        assert f"by process {holder.pid}" in str(raised.value) and "kill -CONT" in raised.value.remedy
        assert store.read_document("p", "state.json")[0] == {"n": 1, "_revision": 1}  # nothing written
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # The holder gone, the lock is free again and the write goes through.
    store.write_document("p", "state.json", {"n": 2}, "1")
    assert store.read_document("p", "state.json")[0] == {"n": 2, "_revision": 2}


def test_a_lock_held_for_a_moment_is_waited_for(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.write_document("p", "state.json", {"n": 1}, None)
    lock = next(tmp_path.rglob(".lock"))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, time\n"
        f"handle = open({str(lock)!r}, 'a+')\n"
        "fcntl.flock(handle, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(0.5)\n"
    )], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    store.write_document("p", "state.json", {"n": 2}, "1")  # waits for the holder's release, then writes
    assert time.monotonic() - started >= 0.2
    holder.wait()
    assert store.read_document("p", "state.json")[0] == {"n": 2, "_revision": 2}
