"""Follow mode's pure parts: the CLI refuses option mixes that mean nothing, and the lease is renewed only when due."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cdc_lib.cli import main
from cdc_lib.state.offset_store import LocalOffsetStore, StateHandle
from cdc_lib.state.offsets import utc_now


@pytest.mark.parametrize(
    "arguments",
    [
        ["sync", "--budget", "12.25"],
        ["sync", "--poll", "0.75"],
        ["sync", "--follow", "--until-caught-up"],
        ["sync", "--follow", "--poll", "0"],
        ["sync", "--follow", "--budget", "-3"],
    ],
)
def test_follow_options_that_mean_nothing_are_refused(arguments: list[str], capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--config", "/nonexistent.yaml", *arguments])
    assert stopped.value.code == 2
    assert "--" in capsys.readouterr().err


def test_the_lease_is_renewed_once_half_of_it_is_spent(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    handle = StateHandle(store, "p_follow", lease_seconds=40)
    handle.acquire()
    _, revision = store.read("p_follow")
    assert handle.renew_if_due() is False, "fresh lease: nothing written"
    assert store.read("p_follow")[1] == revision

    assert handle.state.lease is not None
    handle.state.lease.expires_at = (utc_now() + dt.timedelta(seconds=19)).isoformat()
    assert handle.renew_if_due() is True
    stored, renewed = store.read("p_follow")
    assert renewed != revision and stored is not None and stored.lease is not None
    left = dt.datetime.fromisoformat(stored.lease.expires_at) - utc_now()
    assert dt.timedelta(seconds=35) < left <= dt.timedelta(seconds=40)


def test_an_idle_follower_stays_idle_while_the_binlog_end_is_not_past_what_it_covered() -> None:
    """A catch-up may cover more than the end it first saw (the source wrote meanwhile): the follower then idles
    while the server's end is at or before that point, on the same server only."""
    from cdc_lib.model.positions import BinlogPosition, ServerIdentity
    from cdc_lib.pipeline.follow import _covered

    primary, other = ServerIdentity(server_id=11), ServerIdentity(server_id=23)
    covered = BinlogPosition("mariadb-bin.000004", 9_125, server=primary)
    assert _covered(BinlogPosition("mariadb-bin.000004", 9_125, gtid="0-11-870", server=primary), covered)
    assert _covered(BinlogPosition("mariadb-bin.000004", 4_375, server=primary), covered)
    assert not _covered(BinlogPosition("mariadb-bin.000004", 9_126, server=primary), covered)
    assert not _covered(BinlogPosition("mariadb-bin.000005", 256, server=primary), covered)
    assert not _covered(BinlogPosition("mariadb-bin.000004", 4_375, server=other), covered), "another server"
