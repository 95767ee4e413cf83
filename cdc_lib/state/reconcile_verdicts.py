"""Each table's last reconcile verdict, kept beside the pipeline state so that `binlake status` can show it.

One document per pipeline (`reconcile.json` in the offset store: table → verdict), so status reads every
table's verdict with one GET. Reconcile holds no lease and never writes the state document: it rewrites this
document compare-and-swap, and two reconciles that race retry on the conflict (the later one wins, which is
what "last verdict" means). A verdict that cannot be stored is logged and the reconcile still reports.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Literal

from cdc_lib.errors import BinlakeError, ConcurrentRunError
from cdc_lib.state.offset_store import OffsetStore

VERDICTS_DOCUMENT = "reconcile.json"
#: Format of the stored document. A newer one (a newer binlake's) is neither read nor written over: status shows
#: no verdict rather than a misread one (the rule of cdc_lib/common/formats.py, without stopping anything: the verdicts
#: are a convenience).
VERDICTS_FORMAT = 1
_ATTEMPTS = 30

#: match: equal; drift: confirmed difference; unconfirmed: differences that may be changes still in flight.
VerdictKind = Literal["match", "drift", "unconfirmed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What one reconcile of one table concluded, and when (ISO 8601, UTC)."""

    at: str
    verdict: VerdictKind
    source_rows: int
    delta_rows: int
    mismatched_chunks: int
    #: Rows named by the row comparison (missing + extra + differing + duplicated); None when none was made.
    drifting_rows: int | None = None
    #: Keys held by more than one Delta row (a primary key in Delta must be unique).
    duplicated_keys: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            at=str(data["at"]), verdict=data["verdict"], source_rows=int(data["source_rows"]),
            delta_rows=int(data["delta_rows"]), mismatched_chunks=int(data["mismatched_chunks"]),
            drifting_rows=None if data.get("drifting_rows") is None else int(data["drifting_rows"]),
            duplicated_keys=int(data.get("duplicated_keys", 0)),
        )


def read_verdicts(store: OffsetStore, pipeline: str) -> dict[str, Verdict]:
    """Every table's last verdict: one read of one document (empty before the first reconcile)."""
    document, _ = store.read_document(pipeline, VERDICTS_DOCUMENT)
    if _newer(document):
        return {}
    verdicts: dict[str, Verdict] = {}
    for table, entry in ((document or {}).get("tables") or {}).items():
        try:
            verdicts[table] = Verdict.from_json(entry)
        except (KeyError, TypeError, ValueError):
            log.warning("the stored reconcile verdict of %s cannot be read; it is ignored", table)
    return verdicts


def record_verdict(store: OffsetStore, pipeline: str, table: str, verdict: Verdict) -> bool:
    """Store `verdict` as `table`'s last one; False (logged) when the store refused it.

    Never raises: the verdict is a convenience for `status`, and a reconcile that compared the data must still
    report it.
    """
    for _ in range(_ATTEMPTS):
        try:
            document, token = store.read_document(pipeline, VERDICTS_DOCUMENT)
            if _newer(document):
                return False
            tables = dict((document or {}).get("tables") or {})
            tables[table] = verdict.to_json()
            store.write_document(
                pipeline, VERDICTS_DOCUMENT, {"format": VERDICTS_FORMAT, "tables": tables}, token
            )
            return True
        except ConcurrentRunError:
            # Another reconcile stored its verdict in between: read it again and add ours, after a pause of a
            # random length so that racing writers do not meet again at once.
            time.sleep(random.uniform(0.005, 0.05))
            continue
        except BinlakeError as error:
            log.warning("the reconcile verdict of %s was not stored: %s", table, error)
            return False
    log.warning("the reconcile verdict of %s was not stored: the document kept changing", table)
    return False


def _newer(document: dict[str, Any] | None) -> bool:
    found = (document or {}).get("format", 1)
    if isinstance(found, int) and found <= VERDICTS_FORMAT:
        return False
    log.warning("%s has format %r, newer than this binlake's %d: its verdicts are not shown or replaced",
                VERDICTS_DOCUMENT, found, VERDICTS_FORMAT)
    return True


__all__ = ["VERDICTS_DOCUMENT", "Verdict", "VerdictKind", "read_verdicts", "record_verdict"]
