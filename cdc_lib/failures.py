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

from typing import Literal

from cdc_lib.errors import BinlakeError

FailureKind = Literal["transient", "permanent"]


def classify(error: BaseException) -> FailureKind:
    """Say whether retrying the same call later can succeed.

    binlake's own errors say so themselves (`BinlakeError.retryable`); anything else is
    unexpected (a JVM hiccup, an OS error) and treated as transient.
    """
    if isinstance(error, BinlakeError):
        return "transient" if error.retryable else "permanent"
    return "transient"


def is_transient(error: BaseException) -> bool:
    return classify(error) == "transient"
