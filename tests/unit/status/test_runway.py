"""`cdc_lib.status.runway` without a server: the time left before the needed binlog expires, the probe's server id."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_lib.status.runway import ExpirySettings, probe_server_id, runway_seconds

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("variables", "rotated_at", "expected"),
    [
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.000000"}, None, None),
        ({"binlog_expire_logs_seconds": "86400"}, None, 86400.0),
        ({"binlog_expire_logs_seconds": "86400"}, NOW - dt.timedelta(hours=20), 4 * 3600.0),
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "2.000000"}, NOW - dt.timedelta(days=3), -86400.0),
        ({"expire_logs_days": "0.5"}, NOW, 43200.0),
    ],
)
def test_runway_counts_from_when_the_needed_file_was_closed(
    variables: dict[str, str], rotated_at: dt.datetime | None, expected: float | None
) -> None:
    expiry = ExpirySettings.from_variables(variables)
    assert runway_seconds(expiry=expiry, rotated_at=rotated_at, now=NOW) == expected


def test_expiry_notes_a_size_limit() -> None:
    assert ExpirySettings.from_variables({"max_binlog_total_size": "1073741824"}).size_limit_bytes == 2**30
    assert ExpirySettings.from_variables({"binlog_space_limit": "0"}).size_limit_bytes is None


def test_probe_server_id_differs_from_the_pipelines() -> None:
    for server_id in (1, 5701, 2**32 - 2):
        probe = probe_server_id(server_id)
        assert probe != server_id and 1 <= probe < 2**32
