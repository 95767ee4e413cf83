"""`assets.resources`: how engine errors reach Dagster (a permanent one fails without retry)."""

from __future__ import annotations

import dagster as dg
import pytest

from assets.resources import engine_errors
from cdc_lib.errors import BinlogPurgedError, ConcurrentRunError


def test_engine_errors_fail_permanent_errors_without_retry_and_pass_transient_ones_on() -> None:
    with pytest.raises(dg.Failure) as failure, engine_errors("sync"):
        raise BinlogPurgedError("binlog mariadb-bin.000001 is gone", remedy="re-snapshot t", table="db.t")
    assert failure.value.allow_retries is False
    assert failure.value.metadata["remedy"].value == "re-snapshot t"
    assert failure.value.metadata["table"].value == "db.t"
    with pytest.raises(ConcurrentRunError), engine_errors("sync"):
        raise ConcurrentRunError("held", remedy="wait")
