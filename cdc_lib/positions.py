"""Binlog positions: a file and offset, with the GTID the server reported beside them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_SEQUENCE = re.compile(r"\.(\d+)$")


@dataclass(frozen=True, order=False)
class BinlogPosition:
    """A point in the server's binlog at a transaction boundary."""

    file: str
    pos: int
    gtid: str | None = None

    @property
    def sort_key(self) -> tuple[int, str, int]:
        match = _SEQUENCE.search(self.file)
        return (int(match.group(1)) if match else -1, self.file, self.pos)

    def __lt__(self, other: BinlogPosition) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: BinlogPosition) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: BinlogPosition) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: BinlogPosition) -> bool:
        return self.sort_key >= other.sort_key

    def same_point(self, other: BinlogPosition) -> bool:
        return self.file == other.file and self.pos == other.pos

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid})" if self.gtid else "")

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BinlogPosition:
        return cls(file=str(data["file"]), pos=int(data["pos"]), gtid=data.get("gtid"))


def earliest(positions: list[BinlogPosition]) -> BinlogPosition:
    return min(positions, key=lambda position: position.sort_key)
