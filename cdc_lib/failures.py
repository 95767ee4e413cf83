"""Which failures are worth retrying.

Transient: a dropped or refused connection, an object store that answered
5xx or timed out, another runner holding the pipeline lease, and any
unexpected exception (a JVM hiccup, an OS error). Permanent: everything
binlake raises on purpose that a retry cannot fix — bad credentials, missing
grants, wrong server settings, a purged binlog, a schema change, a bad
config, a table without primary key, a Delta table that disagrees with the
offsets. Those need a person (or a re-snapshot), so orchestrators must fail
them at once instead of retrying.
"""

from __future__ import annotations

import re
from typing import Literal

from cdc_lib.errors import BinlakeError, ConcurrentRunError, OffsetStoreError, SourceConnectionError

FailureKind = Literal["transient", "permanent"]

# SourceConnectionError covers both a dropped connection and a refusal; these causes are refusals.
_PERMANENT_CONNECTION_CAUSES = ("refused the credentials", "may not read", "unknown database")
# OffsetStoreError ends its S3 causes with "(<exception class>: <S3 error code>)".
_STORE_FAILURE = re.compile(r"\((\w+): ([\w.-]*)\)\s*$")
_TRANSIENT_STORE_CLASSES = {
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ConnectionError", "HTTPClientError",
}
_TRANSIENT_STORE_CODES = {
    "InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "Throttling", "ThrottlingException",
    "RequestTimeTooSkewed",
}


def classify(error: BaseException) -> FailureKind:
    """Say whether retrying the same call later can succeed."""
    if isinstance(error, ConcurrentRunError):
        return "transient"
    if isinstance(error, SourceConnectionError):
        cause = error.cause.lower()
        return "permanent" if any(marker in cause for marker in _PERMANENT_CONNECTION_CAUSES) else "transient"
    if isinstance(error, OffsetStoreError):
        return "transient" if _store_failure_is_transient(error.cause) else "permanent"
    if isinstance(error, BinlakeError):
        return "permanent"
    return "transient"


def _store_failure_is_transient(cause: str) -> bool:
    match = _STORE_FAILURE.search(cause)
    if match is None:
        return False
    exception_class, code = match.groups()
    return exception_class in _TRANSIENT_STORE_CLASSES or code in _TRANSIENT_STORE_CODES or code.startswith("5")


def is_transient(error: BaseException) -> bool:
    return classify(error) == "transient"
