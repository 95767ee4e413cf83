"""Which failures are worth retrying, and what a passing fault is called.

Two questions, asked at two levels:

- A whole run (`classify`): transient are a dropped or refused connection, an object store that answered
  5xx or timed out, another runner holding the pipeline lease, and any unexpected exception (a JVM
  hiccup, an OS error); permanent is everything binlake raises on purpose that a retry cannot fix — bad
  credentials, missing grants, wrong server settings, a purged binlog, a bad config, a table without
  primary key. Orchestrators fail those at once instead of retrying.
- One table's write or read (`passing_fault`): a full disk, an I/O error, an object store's 5xx /
  SlowDown / throttling / timeout, a network error or a commit conflict with another Delta writer is
  the world's fault, not the table's (invariant 14). The table then *retries*: nothing of its batch is
  applied, its offset stays, and a later batch tries again after a back-off (`Retrying`). Anything else
  (a value Delta cannot hold, a schema Delta refuses) stops the table with its remedy.

Exceptions come from Python, boto3, delta-rs (whose errors carry the OS or HTTP error only in their
text: `DeltaError("... No space left on device (os error 28)")`) and Spark (a py4j wrapper around a Java
exception and its causes), so a fault is recognised by errno, by exception class name and by text.
"""

from __future__ import annotations

import datetime as dt
import errno
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from cdc_lib.errors import BinlakeError

FailureKind = Literal["transient", "permanent"]

#: Back-off between a retrying table's attempts: doubling from the first, up to the last.
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 300.0

#: OS errors that pass: a full disk or quota, a failing device, a network that drops or stalls.
_PASSING_ERRNOS = {
    errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EIO: "I/O error",
    errno.ETIMEDOUT: "timed out", errno.ECONNRESET: "connection reset", errno.ECONNREFUSED: "connection refused",
    errno.ECONNABORTED: "connection aborted", errno.EPIPE: "broken pipe", errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable", errno.ENETDOWN: "network down", errno.EAGAIN: "resource busy",
}

#: Class names (Python's, or a Java exception's anywhere in its cause chain) of a commit that lost a race with
#: another writer of the table: Spark's `Concurrent*Exception`s, `MetadataChangedException`,
#: `ProtocolChangedException`, Java's `ConcurrentModificationException`; delta-rs's `CommitFailedError`.
_CONFLICT_NAMES = re.compile(
    r"Concurrent\w*(Exception|Error)|MetadataChangedException|ProtocolChangedException|CommitFailedError"
)

#: Text of a passing fault in a message (delta-rs and Hadoop name the OS or HTTP error only in their text).
_PASSING_TEXT: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("commit conflict", _CONFLICT_NAMES),
    ("commit conflict", re.compile(r"concurrent (transaction|update|append|delete|write)|version \d+ already exists"
                                   r"|Version mismatch", re.IGNORECASE)),
    ("disk full", re.compile(r"No space left on device|os error 28|ENOSPC|Disk quota exceeded|os error 122")),
    ("I/O error", re.compile(r"Input/output error|os error 5\b|EIO\b")),
    ("object store throttled", re.compile(r"SlowDown|Slow Down|Throttl|TooManyRequests|Too Many Requests|"
                                          r"RequestLimitExceeded|status(?: code)?:? 429")),
    ("object store unavailable", re.compile(
        r"ServiceUnavailable|Service Unavailable|InternalError|Internal Server Error|Bad Gateway|Gateway Time-?out|"
        r"status(?: code)?:? 5\d\d|HTTP(?:/\d(?:\.\d)?)? 5\d\d|AWSStatus500|\b50[0234] (?:Service|Internal|Bad)"
    )),
    ("timed out", re.compile(r"timed out|Timeout|RequestTimeout|SocketTimeoutException", re.IGNORECASE)),
    ("network error", re.compile(
        r"Connection reset|Connection refused|Connection aborted|Broken pipe|connection closed|error sending request"
        r"|dns error|UnknownHostException|NoRouteToHost|Network is unreachable|EndpointConnectionError",
        re.IGNORECASE,
    )),
)


def classify(error: BaseException) -> FailureKind:
    """Say whether retrying the same run later can succeed.

    binlake's own errors say so themselves (`BinlakeError.retryable`); anything else is
    unexpected (a JVM hiccup, an OS error) and treated as transient.
    """
    if isinstance(error, BinlakeError):
        return "transient" if error.retryable else "permanent"
    return "transient"


def is_transient(error: BaseException) -> bool:
    return classify(error) == "transient"


def passing_fault(error: BaseException) -> str | None:
    """What passing fault `error` is ("disk full: <first line>", "commit conflict: ..."), or None when it is
    not one (then the failure is about the table itself).

    A BinlakeError is a passing fault when it says it is retryable (a sink that could not be reached); its own
    cause is the text.
    """
    for link in _chain(error):
        if isinstance(link, BinlakeError):
            if link.retryable:
                return f"{_name_of_text(link.cause) or 'unavailable'}: {_first_line(link.cause)}"
            continue
        if isinstance(link, OSError) and link.errno in _PASSING_ERRNOS:
            return f"{_PASSING_ERRNOS[link.errno]}: {_first_line(str(link))}"
        if isinstance(link, (TimeoutError, ConnectionError)):
            return f"{'timed out' if isinstance(link, TimeoutError) else 'network error'}: {_first_line(str(link))}"
    text = describe(error)
    name = _name_of_text(f"{_class_names(error)} {text} {_java_causes(error)}")
    return f"{name}: {_first_line(text)}" if name is not None else None


def is_conflict(error: BaseException) -> bool:
    """Whether `error` is a commit that lost a race with another writer of the table (retried at once, on a fresh
    snapshot of the table: the other commit is then part of what the retry reads)."""
    return any(_CONFLICT_NAMES.search(name) for name in _class_names(error).split())


def describe(error: BaseException) -> str:
    """The error's text; for a Spark failure, the Java exception's (py4j's own says only "An error occurred")."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM may be gone; keep py4j's text
            pass
    return str(error)


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _class_names(error: BaseException) -> str:
    """The class names of the error's chain, the Java exception's and its causes' included."""
    names = [type(link).__name__ for link in _chain(error)]
    java = getattr(error, "java_exception", None)
    depth = 0
    while java is not None and depth < 10:
        try:
            names.append(str(java.getClass().getName()))
            java = java.getCause()
        except Exception:  # noqa: BLE001 - the JVM may be gone: the names found so far are all there is
            break
        depth += 1
    return " ".join(names)


def _java_causes(error: BaseException) -> str:
    """The text of a Java exception's causes (Spark wraps an IOException in a SparkException, and so on)."""
    texts = []
    java = getattr(error, "java_exception", None)
    depth = 0
    while java is not None and depth < 10:
        try:
            java = java.getCause()
            if java is not None:
                texts.append(str(java.toString()))
        except Exception:  # noqa: BLE001 - the JVM may be gone: the texts found so far are all there is
            break
        depth += 1
    return " ".join(texts)


def _name_of_text(text: str) -> str | None:
    for name, pattern in _PASSING_TEXT:
        if pattern.search(text):
            return name
    return None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join((lines[0] if lines else "").split())[:300]


@dataclass(frozen=True, kw_only=True)
class Retrying:
    """A table whose latest write met a passing fault: nothing of it was applied, its offset stayed.

    `since` is the first failed attempt of this run of failures, `next_attempt_at` the earliest time a batch
    tries the table again (a back-off doubling per attempt, `FIRST_BACKOFF_SECONDS` up to
    `MAX_BACKOFF_SECONDS`; `binlake resume` clears it at once).
    """

    cause: str
    since: str
    attempts: int
    next_attempt_at: str

    @classmethod
    def first_or_next(cls, cause: str, previous: Retrying | None, *, now: dt.datetime) -> Retrying:
        """The state after one more failed attempt."""
        attempts = 1 if previous is None else previous.attempts + 1
        since = now.isoformat() if previous is None else previous.since
        return cls(cause=cause, since=since, attempts=attempts,
                   next_attempt_at=(now + dt.timedelta(seconds=backoff_seconds(attempts))).isoformat())

    def due(self, now: dt.datetime) -> bool:
        return dt.datetime.fromisoformat(self.next_attempt_at) <= now

    def describe(self) -> str:
        """`retrying: <cause>, since <time>, <n> attempts` — what status, checks and sensors show."""
        return f"retrying: {self.cause}, since {self.since}, {self.attempts} attempt{'s' if self.attempts != 1 else ''}"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Retrying | None:
        if not data:
            return None
        return cls(cause=str(data["cause"]), since=str(data["since"]), attempts=int(data["attempts"]),
                   next_attempt_at=str(data["next_attempt_at"]))

    def now_due(self, now: dt.datetime) -> Retrying:
        """The same fault, with its next attempt due at once (`binlake resume`)."""
        return replace(self, next_attempt_at=now.isoformat())


def backoff_seconds(attempts: int) -> float:
    """The wait after the `attempts`-th failed attempt in a row."""
    return min(FIRST_BACKOFF_SECONDS * float(2 ** max(attempts - 1, 0)), MAX_BACKOFF_SECONDS)


__all__ = ["Retrying", "backoff_seconds", "classify", "describe", "is_conflict", "is_transient", "passing_fault"]
