"""Keeping a lease alive while long work runs, and noticing in time when it was lost.

A snapshot of a big table or a long batch outlives any fixed lease. `Heartbeat` renews the lease
from a daemon thread; the work calls `check()` before each Delta commit, so a runner whose lease
ran out or was taken over stops before it writes anything more.

A runner that is alive but stuck (a network wait without a bound) must not hold the lease for ever:
with `stall_seconds`, the work reports progress (`progress()`: binlog events read, a statement
answered, a save) and the heartbeat renews only while the last report is younger than that. Work that
runs long on its own terms, each of its waits bounded elsewhere (a Spark job, a delta-rs write: their
JDBC and S3 timeouts), runs inside `working()`, which counts as progress throughout. A stuck runner's
lease then runs out `lease_seconds` after its last renewal, and another runner takes over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType

from cdc_lib.errors import BinlakeError, ConcurrentRunError

log = logging.getLogger("binlake")


class LeaseLostError(BinlakeError):
    """This runner no longer holds the lease it works under: another runner took it, or it could not be renewed."""

    retryable = True


def stall_bound(network_timeout_seconds: float) -> float:
    """How long work under a lease may go without progress before its heartbeat stops renewing: twice the bound
    on one network wait (`source.network_timeout_seconds`), as a step may hold a wait and the retry after it."""
    return 2 * network_timeout_seconds


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
        stall_seconds: float | None = None,
    ) -> None:
        self.renew = renew
        self.lease_seconds = lease_seconds
        self.what = what
        self.interval_seconds = interval_seconds if interval_seconds is not None else lease_seconds / 3
        self.clock = clock
        self.last_renewed = clock()
        self.lost_because: str | None = None
        self.renewals = 0
        #: No renewal once the work reported no progress for this long (None: renew while the process lives).
        self.stall_seconds = stall_seconds
        self.last_progress = clock()
        #: Beats that did not renew because the work had stalled (for tests and the log).
        self.withheld = 0
        self._working = 0
        self._working_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        self.last_renewed = self.last_progress = self.clock()
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

    def progress(self) -> None:
        """The work moved on (called from any thread the work runs on; cheap: one clock read)."""
        self.last_progress = self.clock()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Work that may run long but whose waits are bounded elsewhere (the JVM's, delta-rs's own timeouts):
        the lease is renewed throughout, and progress is counted from its end."""
        with self._working_lock:
            self._working += 1
        try:
            yield
        finally:
            with self._working_lock:
                self._working -= 1
            self.progress()

    def stalled_for(self) -> float | None:
        """How long the work has made no progress, when that is past `stall_seconds`; None while it moves."""
        if self.stall_seconds is None or self._working:
            return None
        idle = self.clock() - self.last_progress
        return idle if idle > self.stall_seconds else None

    def beat(self) -> None:
        """Renew once now (the thread's step; also for a caller that just saved and so renewed)."""
        if self.lost_because is not None:
            return
        stalled = self.stalled_for()
        if stalled is not None:
            # Renewing would keep a stuck runner's lock on the pipeline for ever; the lease runs out instead.
            if not self.withheld:
                log.error("%s made no progress for %.0fs (more than %.0fs): its lease is no longer renewed and "
                          "runs out in at most %.0fs, so another runner can take over", self.what, stalled,
                          self.stall_seconds, self.lease_seconds)
            self.withheld += 1
            return
        if self.withheld:
            log.warning("%s moves again after a stall; renewing its lease", self.what)
            self.withheld = 0
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
        """The work itself just extended the lease (its own save, which is progress too)."""
        self.last_renewed = self.clock()
        self.last_progress = self.last_renewed

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
        if since >= self.lease_seconds * 0.8 and self.withheld:
            raise LeaseLostError(
                f"{self.what} made no progress for more than {self.stall_seconds:.0f}s, so its lease was not renewed "
                f"for {since:.0f}s of its {self.lease_seconds:.0f}s; another runner may take it, so nothing more is "
                "written",
                remedy="rerun (nothing past the last committed batch was applied); if it recurs, look for what the "
                "run waited on (the source, the store, the network) in the log",
            )
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


__all__ = ["Heartbeat", "LeaseLostError", "stall_bound"]
