"""Errors keep their message and fields across processes (Dagster pickles them between the run and the UI)."""

from __future__ import annotations

import pickle

import pytest

from cdc_lib import errors

EXAMPLES = [
    errors.ConfigError("source.port", "must be a number", remedy="fix it"),
    errors.ServerSettingsError("binlog_format", "MIXED", "ROW"),
    errors.SourceConnectionError("down", remedy="retry", retryable=False),
    errors.ZeroDateError("shop.orders", "placed", "0000-00-00"),
    errors.DeltaWriteError("refused", remedy="re-snapshot", table="shop.orders"),
    errors.RowDecodeError("bad bytes", remedy="re-snapshot", table="shop.orders"),
    errors.ConcurrentRunError("held", remedy="wait"),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda error: type(error).__name__)
def test_errors_survive_pickling_with_their_fields(error: errors.BinlakeError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__
    assert copy.retryable == error.retryable and copy.exit_code == error.exit_code
