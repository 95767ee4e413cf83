"""Keeping a lease alive while long work runs, and noticing in time when it was lost.

A snapshot of a big table or a long batch outlives any fixed lease. `Heartbeat` renews the lease
from a daemon thread; the work calls `check()` before each Delta commit, so a runner whose lease
ran out or was taken over stops before it writes anything more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from cdc_lib.errors import BinlakeError, ConcurrentRunError

log = logging.getLogger("binlake")


class LeaseLostError(BinlakeError):
    """This runner no longer holds the lease it works under: another runner took it, or it could not be renewed."""

    retryable = True


class Heartbeat:
    """Calls `renew()` every `interval_seconds` (a third of the lease by default) until stopped.

    `renew` extends the lease in the store; it raises `ConcurrentRunError` when another runner holds
    the lease now (lost for good) and any other error for a failure that may pass (kept trying until
    the lease would have run out).
    """

    def __init__(
        self,
        renew: Callable[[], None],
        *,
        lease_seconds: float,
        what: str,
        interval_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.renew = renew
        self.lease_seconds = lease_seconds
        self.what = what
        self.interval_seconds = interval_seconds if interval_seconds is not None else lease_seconds / 3
        self.clock = clock
        self.last_renewed = clock()
        self.lost_because: str | None = None
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        self.last_renewed = self.clock()
        self._thread = threading.Thread(target=self._run, name=f"binlake-heartbeat:{self.what}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def beat(self) -> None:
        """Renew once now (the thread's step; also for a caller that just saved and so renewed)."""
        if self.lost_because is not None:
            return
        try:
            self.renew()
        except ConcurrentRunError as exc:
            self.lost_because = f"another runner holds it now ({exc.cause})"
            log.error("lease of %s lost: %s", self.what, self.lost_because)
            return
        except Exception as exc:  # a store that fails for a while: the lease may still hold, try again
            log.warning("lease of %s not renewed (%s: %s); retrying", self.what, type(exc).__name__, exc)
            return
        self.last_renewed = self.clock()
        self.renewals += 1

    def mark_renewed(self) -> None:
        """The work itself just extended the lease (its own save)."""
        self.last_renewed = self.clock()

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is surely still ours; call it before each commit.

        Sure means: no renewal was refused, and the last one succeeded less than a lease ago minus a
        margin for clocks and the commit itself.
        """
        if self.lost_because is not None:
            raise LeaseLostError(
                f"the lease of {self.what} was lost: {self.lost_because}; nothing more is written",
                remedy="let the other runner finish; retry this run later (its work so far is kept)",
            )
        since = self.clock() - self.last_renewed
        if since >= self.lease_seconds * 0.8:
            raise LeaseLostError(
                f"the lease of {self.what} was not renewed for {since:.0f}s of its {self.lease_seconds:.0f}s "
                "(the offset store did not answer); another runner may take it, so nothing more is written",
                remedy="check the offset store (offsets.uri) and retry; raise offsets.lease_seconds if the "
                "store is often slow",
            )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.beat()
            if self.lost_because is not None:
                return


__all__ = ["Heartbeat", "LeaseLostError"]
