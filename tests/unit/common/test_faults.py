"""Failpoints: inert by default; the pause variant hands control to the test and waits for it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cdc_lib.common.faults import failpoint


def test_failpoints_do_nothing_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_FAILPOINT", "somewhere_else")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "somewhere_else")
    started = time.monotonic()
    failpoint("before_offset_write")
    assert time.monotonic() - started < 0.5


def test_pause_waits_until_the_test_removes_the_flag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    flag = tmp_path / "paused"
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "before_offset_write")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
    done = threading.Event()

    def pass_the_failpoint() -> None:
        failpoint("before_offset_write")
        done.set()

    worker = threading.Thread(target=pass_the_failpoint)
    worker.start()
    deadline = time.monotonic() + 10
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flag.exists() and not done.wait(0.3), "the failpoint holds while the flag exists"
    flag.unlink()
    assert done.wait(5), "and goes on once it is gone"
    worker.join()


def test_pause_without_flag_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "after_delta_commit")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_SECONDS", "0.2")
    started = time.monotonic()
    failpoint("after_delta_commit")
    assert time.monotonic() - started >= 0.2
