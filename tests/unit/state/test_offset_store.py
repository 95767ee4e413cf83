import os
import subprocess
from pathlib import Path

import pytest

from cdc_lib.common.formats import NewerFormatError
from cdc_lib.errors import ConcurrentRunError, OffsetStoreError
from cdc_lib.state.offset_store import LocalOffsetStore, StateHandle
from cdc_lib.state.offsets import Lease, PipelineState


def test_local_store_round_trip_and_cas(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    assert store.read("p") == (None, None)
    token = store.write(PipelineState(pipeline="p", batch_seq=3), None)
    state, read_token = store.read("p")
    assert state is not None and state.batch_seq == 3 and read_token == token
    store.write(PipelineState(pipeline="p", batch_seq=4), token)
    with pytest.raises(ConcurrentRunError, match="another runner"):
        store.write(PipelineState(pipeline="p", batch_seq=5), token)


def test_second_runner_fails_fast_while_lease_is_held(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    first = StateHandle(store, "p", lease_seconds=60)
    first.acquire()
    with pytest.raises(ConcurrentRunError, match="one runner per pipeline"):
        StateHandle(store, "p", lease_seconds=60).acquire()
    first.release()
    StateHandle(store, "p", lease_seconds=60).acquire()


def test_lease_of_dead_local_process_is_taken_over(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    state = PipelineState(pipeline="p")
    # A process of this boot and PID namespace that has exited: its PID no longer answers.
    exited = subprocess.Popen(["true"])
    exited.wait()
    dead = Lease.for_this_process("x", seconds=3600)
    dead.pid, dead.started_ticks = exited.pid, 123
    assert dead.holder_is_dead()
    state.lease = dead
    store.write(state, None)
    StateHandle(store, "p", lease_seconds=60).acquire()


@pytest.mark.parametrize(
    "change",
    [
        {"pid_namespace": "pid:[4026531999]"},  # another container on this kernel: its PID says nothing here
        {"boot_id": "3f1c2a9e-0000-4000-8000-000000000007"},  # another machine (or boot) with the same hostname
        {"boot_id": None, "pid_namespace": None, "started_ticks": None},  # written by an older binlake
    ],
)
def test_a_holder_that_may_run_elsewhere_is_never_called_dead(tmp_path: Path, change: dict[str, object]) -> None:
    exited = subprocess.Popen(["true"])
    exited.wait()
    lease = Lease.for_this_process("x", seconds=3600)
    lease.pid = exited.pid
    for name, value in change.items():
        setattr(lease, name, value)
    assert not lease.holder_is_dead()
    store = LocalOffsetStore(tmp_path)
    store.write(PipelineState(pipeline="p", lease=lease), None)
    with pytest.raises(ConcurrentRunError, match=r"runner x \(pid \d+ on host"):
        StateHandle(store, "p", lease_seconds=60).acquire()


def test_unwritable_store_is_reported(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = Path("/proc/binlake-offsets")
    else:
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    with pytest.raises(OffsetStoreError, match="offsets.uri"):
        LocalOffsetStore(target).check_writable("p")


def test_s3_failures_say_whether_a_retry_can_help() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError

    from cdc_lib.common.s3 import transient_s3_failure as _transient_s3_failure

    def client_error(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": ""}}, "PutObject")

    assert _transient_s3_failure(client_error("503"), "503")
    assert _transient_s3_failure(client_error("SlowDown"), "SlowDown")
    assert not _transient_s3_failure(client_error("AccessDenied"), "AccessDenied")
    assert not _transient_s3_failure(client_error("NoSuchBucket"), "NoSuchBucket")
    assert _transient_s3_failure(EndpointConnectionError(endpoint_url="http://x"), "")


def test_offsets_from_a_newer_binlake_are_refused_and_left_alone(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    store.write(PipelineState(pipeline="p", batch_seq=9), None)
    document = next(tmp_path.rglob("*.json"))
    written = document.read_text().replace('"format": 1', '"format": 2')
    document.write_text(written)
    with pytest.raises(NewerFormatError, match=r"newer binlake \(state document format 2"):
        store.read("p")
    assert document.read_text() == written
