"""Format versions of what binlake stores, and the one rule for reading them (docs/production.md#upgrades).

Three kinds of document outlive the binlake that wrote them: the pipeline's state document in the offset store
(`offsets.py`: every table's offset, and the pipeline lease), a table's snapshot document beside it
(`snapshot_documents.py`: plan, waves, table lease), and the `userMetadata` of each binlake commit in a Delta log
(built by `sink/commits.py` for both engines; read back by `sink/delta_log.py`). Each carries a
`format` number. A document without one is format 1 (commit metadata before formats were written).

The rule: a binlake reads every format up to its own and refuses a newer one, before acting on it, because
guessing at a layout it does not know could move an offset backwards or apply a batch twice. A format is bumped
only when an older binlake would misread the new layout; a key an older reader may ignore is added without one.
"""

from __future__ import annotations

from typing import Any, Literal

from cdc_lib.errors import BinlakeError

#: The pipeline state document (`<pipeline>/state.json`) and its lease.
STATE_FORMAT = 1
#: A table's snapshot document (`<pipeline>/snapshots/<table>.json`) and its table lease.
SNAPSHOT_DOCUMENT_FORMAT = 1
#: The `userMetadata` JSON of binlake's Delta commits (batches, snapshot waves, rewrites, corrections).
COMMIT_FORMAT = 1

Kind = Literal["state document", "snapshot document", "commit metadata"]

_CURRENT: dict[Kind, int] = {
    "state document": STATE_FORMAT,
    "snapshot document": SNAPSHOT_DOCUMENT_FORMAT,
    "commit metadata": COMMIT_FORMAT,
}

UPGRADE_REMEDY = (
    "upgrade binlake to the version that wrote it (or newer) on every runner of this pipeline — the CLI, the "
    "Dagster code location and its run workers; a newer format is never read by an older binlake "
    "(docs/production.md#upgrades)"
)


class NewerFormatError(BinlakeError):
    """A stored document was written by a newer binlake, in a format this one does not read."""

    def __init__(self, kind: Kind, found: object, where: str) -> None:
        self.kind = kind
        self.found = found
        self.supported = _CURRENT[kind]
        self.where = where
        super().__init__(
            f"the {kind} {where} was written by a newer binlake ({kind} format {found}; this binlake reads "
            f"formats 1 to {self.supported}); nothing was changed",
            remedy=UPGRADE_REMEDY,
        )


def check_format(document: dict[str, Any], kind: Kind, *, where: str) -> int:
    """The document's format (1 when it has none) if this binlake reads it.

    Raises:
        NewerFormatError: the document was written by a newer binlake (or names a format that is no number,
            which no binlake writes: never guessed at either).
    """
    found = document.get("format", 1)
    if isinstance(found, bool) or not isinstance(found, int) or found > _CURRENT[kind]:
        raise NewerFormatError(kind, found, where)
    return found
