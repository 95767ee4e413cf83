"""Events read a window ahead, so that a row filter's text comparisons go to the server once per window.

A row filter comparing text asks the server how each distinct (value, literal) compares under the column's
collation (docs/row-filters.md, `cdc_lib.model.collated`). Asking rows event by rows event would cost a round trip
per small transaction; `FilterWindow` instead pulls events ahead of the reader (up to `max_images` row images of
such tables, or `max_events` events), decodes those tables' rows events once (`BinlogRead.decode_ahead`, the images
kept for their turn), asks every comparison the window lacks in one call, then hands the events out in order.

Nothing but timing changes: events are handled in the order read, each with the `inside` flag its payload had when
it was read (a batch never ends inside a MySQL compressed transaction), and an event whose handling consults the
stream's table map (a compressed rows event, a table-scoped stop) closes the window, so no event read after it has
changed that map by its turn. A rows event the window could not decode is decoded at its turn as before, and asks
for its own answers there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cdc_lib.binlog.batch import BinlogRead
from cdc_lib.binlog.event_types import COMPRESSED_ROWS, handling_of

#: A window holds at most this many row images of filtered tables, and this many events.
MAX_IMAGES = 20_000
MAX_EVENTS = 5_000


class FilterWindow:
    """`events`, read a window ahead; `inside` is the payload flag of the event last handed out."""

    def __init__(self, events: Iterator[Any], read: BinlogRead, payload_inside: Any, *,
                 max_images: int = MAX_IMAGES, max_events: int = MAX_EVENTS) -> None:
        self.events, self.read, self.payload_inside = events, read, payload_inside
        self.max_images, self.max_events = max_images, max_events
        self.inside = False
        #: Windows whose comparisons were asked (for tests and measurements).
        self.windows = 0

    def __iter__(self) -> Iterator[Any]:
        window: list[tuple[Any, bool]] = []
        images = 0
        for event in self.events:
            window.append((event, bool(self.payload_inside())))
            handling = handling_of(event.event_type, event.packet.flags).handling
            closes = handling == "stop_table" or (handling == "rows" and event.event_type in COMPRESSED_ROWS)
            if handling == "rows" and not closes:
                images += self.read.decode_ahead(event)
            if closes or images >= self.max_images or len(window) >= self.max_events:
                yield from self._hand_out(window)
                window, images = [], 0
        yield from self._hand_out(window)

    def _hand_out(self, window: list[tuple[Any, bool]]) -> Iterator[Any]:
        if self.read.ask_ahead():
            self.windows += 1
        for event, inside in window:
            self.inside = inside
            yield event


__all__ = ["FilterWindow"]
