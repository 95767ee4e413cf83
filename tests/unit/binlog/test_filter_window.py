"""The window a read decodes ahead for a row filter comparing text (cdc_lib.binlog.filter_window): events come out
in order with their payload flag, the comparisons go out once per window, and a compressed rows event closes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from cdc_lib.binlog.batch import BinlogRead
from cdc_lib.binlog.filter_window import FilterWindow

WRITE_ROWS, XID, COMPRESSED_WRITE_ROWS = 30, 16, 169


@dataclass
class Packet:
    flags: int = 0


@dataclass
class Event:
    event_type: int
    number: int
    packet: Packet = field(default_factory=Packet)


@dataclass
class FakeRead:
    """Records what the window asks of the read: each decoded event, each ask."""

    log: list[str] = field(default_factory=list)

    def decode_ahead(self, event: Any) -> int:
        self.log.append(f"decode {event.number}")
        return 2

    def ask_ahead(self) -> bool:
        self.log.append("ask")
        return True


def run(events: list[Event], *, max_images: int = 100, inside: list[bool] | None = None) -> tuple[list[str], list[Any]]:
    read = FakeRead()
    flags = iter(inside or [False] * len(events))
    current = {"inside": False}

    def pulled() -> Any:
        for event in events:
            current["inside"] = next(flags)
            yield event

    window = FilterWindow(pulled(), cast(BinlogRead, read), lambda: current["inside"], max_images=max_images)
    handed = []
    for event in window:
        read.log.append(f"handle {event.number}")
        handed.append((event.number, window.inside))
    return read.log, handed


def test_a_window_is_decoded_and_asked_once_before_its_events_are_handled_in_order() -> None:
    events = [Event(WRITE_ROWS, 1), Event(XID, 2), Event(WRITE_ROWS, 3), Event(XID, 4)]
    log, handed = run(events, inside=[True, True, False, False])
    assert log == ["decode 1", "decode 3", "ask", "handle 1", "handle 2", "handle 3", "handle 4"]
    assert handed == [(1, True), (2, True), (3, False), (4, False)]  # each event keeps its own payload flag


def test_a_full_window_is_asked_and_handed_out_before_reading_further() -> None:
    events = [Event(WRITE_ROWS, n) for n in range(1, 6)]
    log, _ = run(events, max_images=4)  # two images per event: a window holds two events
    assert log[:5] == ["decode 1", "decode 2", "ask", "handle 1", "handle 2"]
    assert log.count("ask") == 3


def test_a_compressed_rows_event_closes_the_window_before_anything_after_it_is_read() -> None:
    events = [Event(WRITE_ROWS, 1), Event(COMPRESSED_WRITE_ROWS, 2), Event(WRITE_ROWS, 3)]
    log, _ = run(events)
    assert log == ["decode 1", "ask", "handle 1", "handle 2", "decode 3", "ask", "handle 3"]
