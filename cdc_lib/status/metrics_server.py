"""Follow mode's OpenMetrics endpoint: `GET /metrics` on `metrics.address` while `sync --follow` runs.

Three threads share one `MetricsServer`, and none waits on another's I/O:

    follow loop   ── after each batch: `batch_done` (a few numbers under a lock, then a wake-up) ──┐
    refresher     ── woken by a batch, at most every `metrics.refresh_seconds` (and every          │
                     `IDLE_REFRESH_SECONDS` while idle): `table_statuses` + `collect`, then swaps  ◄┘
                     the finished per-table families in (one reference assignment)
    HTTP threads  ── a scrape renders the latest per-table families and `BatchMetrics.families()`

A refresh that fails (the source away, the store slow) is logged and the last figures stay, with their
`binlake_metrics_collected_timestamp_seconds` telling their age. `stop` shuts the listener and the refresher
down: the endpoint is gone when follow mode ends.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cdc_lib.errors import ConfigError
from cdc_lib.state.context import PipelineContext
from cdc_lib.status.metrics import CONTENT_TYPE, BatchMetrics, Family, collect, render, table_families
from cdc_lib.status.table_status import table_statuses

log = logging.getLogger("binlake")

#: While no batch runs, the per-table figures (lag seconds, runway) are still read again this often.
IDLE_REFRESH_SECONDS = 60.0
#: `stop` waits this long for a refresh under way (it only reads; the process may exit under it).
REFRESH_JOIN_SECONDS = 10.0


class MetricsServer:
    """The endpoint and its refresher; `start` it, report each batch to `batch_done`, `stop` it."""

    def __init__(self, context: PipelineContext, *, host: str, port: int, refresh_seconds: float) -> None:
        self.context = context
        self.refresh_seconds = refresh_seconds
        self.batches = BatchMetrics(context.config.pipeline)
        self._tables: list[Family] = []
        self._wanted = threading.Event()
        self._stopping = threading.Event()
        self._http = _Listener((host, port), _handler(self))
        self._threads = [
            threading.Thread(target=self._http.serve_forever, name="binlake-metrics-http", daemon=True),
            threading.Thread(target=self._refresh_loop, name="binlake-metrics-refresh", daemon=True),
        ]

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._http.server_address[:2]
        return str(host), int(port)

    def start(self) -> MetricsServer:
        for thread in self._threads:
            thread.start()
        host, port = self.address
        log.info("metrics: OpenMetrics endpoint on http://%s:%d/metrics", host, port)
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wanted.set()
        self._http.shutdown()  # waits for serve_forever to return
        self._http.server_close()
        # A refresh under way ends at its next network wait at the latest; it only reads, so it is not waited
        # for longer than this.
        for thread in self._threads:
            thread.join(timeout=REFRESH_JOIN_SECONDS)
        log.info("metrics: endpoint stopped")

    def batch_done(self, *, seconds: float, tables: Sequence[tuple[str, Mapping[str, int], float]],
                   behind_bytes: int | None) -> None:
        """Count a batch (see `BatchMetrics.observe`) and ask for fresh per-table figures; returns at once."""
        self.batches.observe(seconds=seconds, tables=tables, behind_bytes=behind_bytes)
        self._wanted.set()

    def text(self) -> str:
        """The OpenMetrics text a scrape gets."""
        return render([*self._tables, *self.batches.families()])

    def refresh(self) -> None:
        """Read the per-table figures again (the I/O happens here, outside any lock)."""
        collected_at = time.time()
        figures = collect(self.context, table_statuses(self.context))
        self._tables = table_families(self.context.config.pipeline, figures, collected_at=collected_at)

    def _refresh_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.refresh()
            except Exception as error:  # noqa: BLE001 - the endpoint keeps the last figures; follow goes on
                log.warning("metrics: the per-table figures could not be read (%s: %s); the last ones stay",
                            type(error).__name__, error)
            # At most one refresh per `refresh_seconds`, however many batches end in between.
            self._stopping.wait(self.refresh_seconds)
            self._wanted.wait(IDLE_REFRESH_SECONDS)
            self._wanted.clear()


class _Listener(ThreadingHTTPServer):
    """A threaded HTTP server on IPv4 or IPv6, as the host names it."""

    daemon_threads = True  # a slow scraper never holds the process at exit

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)


def _handler(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "binlake serves /metrics only")
                return
            body = server.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
            log.debug("metrics: %s %s", self.address_string(), format % args)

    return Handler


def start_metrics_server(context: PipelineContext) -> MetricsServer | None:
    """The endpoint on `metrics.address`, started; None when the config names no address."""
    where = context.config.metrics.host_port
    if where is None:
        return None
    host, port = where
    try:
        server = MetricsServer(context, host=host, port=port, refresh_seconds=context.config.metrics.refresh_seconds)
    except OSError as error:
        raise ConfigError(
            "metrics.address", f"binlake cannot listen on {host}:{port} ({error.strerror or error})",
            remedy="choose a free port on an interface of this host, or stop what listens there",
        ) from error
    return server.start()


__all__ = ["IDLE_REFRESH_SECONDS", "MetricsServer", "start_metrics_server"]
