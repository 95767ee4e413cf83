"""`cdc_lib.failures.classify`: which engine errors a retry can cure (transient) and which it cannot."""

from __future__ import annotations

import pytest

from cdc_lib.errors import (
    BinlogPurgedError,
    ConcurrentRunError,
    ConfigError,
    OffsetStoreError,
    SchemaChangeError,
    ServerSettingsError,
    SourceConnectionError,
)
from cdc_lib.failures import classify


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (SourceConnectionError("cannot reach the MySQL server at h:3306", remedy="r"), "transient"),
        (SourceConnectionError("reading the binlog failed (MySQL error 2013: lost)", remedy="r"), "transient"),
        (SourceConnectionError("the server refused the credentials", remedy="r", retryable=False), "permanent"),
        (SourceConnectionError("the user may not read the binlog", remedy="r", retryable=False), "permanent"),
        (ConcurrentRunError("pipeline 'p' is held by runner pid 1", remedy="r"), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: 503)", remedy="r", retryable=True), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: AccessDenied)", remedy="r"), "permanent"),
        (OffsetStoreError("offset folder /x is not writable (Permission denied)", remedy="r"), "permanent"),
        (BinlogPurgedError("binlog gone", remedy="re-snapshot"), "permanent"),
        (SchemaChangeError("columns changed", remedy="re-snapshot"), "permanent"),
        (ServerSettingsError("binlog_format", "STATEMENT", "ROW"), "permanent"),
        (ConfigError("source.port", "bad"), "permanent"),
        (OSError("connection reset"), "transient"),
    ],
)
def test_failures_are_classified(error: BaseException, kind: str) -> None:
    assert classify(error) == kind
