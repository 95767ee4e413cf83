"""A loopback TCP proxy that can make connections go silent: open, never closed, and nothing forwarded.

That is what a NAT or load balancer that forgot a flow, a paused VM or a half-open connection after a
failover looks like from binlake's side: no RST, no FIN, just no more bytes. New connections made after
`silence()` are forwarded as usual (the route itself works again), so a client that reconnects recovers.

The proxy knows which connections carry a binlog dump: the client's first packet after the handshake
phase that is a COM_BINLOG_DUMP (0x12) or COM_BINLOG_DUMP_GTID (0x1e) marks it, so a test can silence
the binlog stream alone, the other (control) connections alone, or all of them.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

#: MySQL commands that turn a connection into a binlog stream.
_BINLOG_DUMP_COMMANDS = frozenset({0x12, 0x1E})

Which = Literal["all", "binlog", "control"]


@dataclass(eq=False)
class Link:
    """One proxied connection: the client's socket and the upstream one."""

    client: socket.socket
    upstream: socket.socket
    binlog: bool = False
    silent: threading.Event = field(default_factory=threading.Event)
    closed: bool = False


class SilenceableProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`; `silence()` stalls the connections open now."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.links: list[Link] = []
        self.silenced_at: float | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]

    def start(self) -> SilenceableProxy:
        self._listener.listen(64)
        threading.Thread(target=self._accept, name="net-proxy-accept", daemon=True).start()
        return self

    def silence(self, which: Which = "all") -> int:
        """Stop forwarding on the open connections `which` names (without closing them); how many it stalled."""
        with self._lock:
            chosen = [link for link in self.links if not link.closed and not link.silent.is_set() and (
                which == "all" or (which == "binlog") == link.binlog)]
            for link in chosen:
                link.silent.set()
            self.silenced_at = time.monotonic()
        return len(chosen)

    def seen(self, which: Which = "all") -> list[Link]:
        """Every connection made through the proxy so far (closed ones too) of the kind `which` names."""
        with self._lock:
            return [link for link in self.links if which == "all" or (which == "binlog") == link.binlog]

    def close(self) -> None:
        self._closing.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for link in self.links:
                close_socket(link.client)
                close_socket(link.upstream)
            self.links.clear()

    def __enter__(self) -> SilenceableProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                close_socket(client)
                continue
            upstream.settimeout(None)
            link = Link(client, upstream)
            with self._lock:
                self.links.append(link)
            threading.Thread(target=self._pump, args=(link, client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, upstream, client, False), daemon=True).start()

    def _pump(self, link: Link, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        try:
            while True:
                chunk = source.recv(65536)
                if from_client and not link.binlog and len(chunk) > 4 and chunk[4] in _BINLOG_DUMP_COMMANDS \
                        and chunk[3] == 0:
                    link.binlog = True  # a command packet (sequence 0) that starts a dump
                if link.silent.is_set():
                    # A silent network: this byte (or this close) never arrives; the sockets stay open.
                    self._closing.wait()
                    return
                if not chunk:
                    break
                target.sendall(chunk)
        except OSError:
            pass
        if link.silent.is_set():
            self._closing.wait()
            return
        # An ordinary close on one side is passed on, as a working network would.
        with self._lock:
            link.closed = True
        close_socket(source)
        close_socket(target)


def close_socket(connection: socket.socket) -> None:
    """Shut a socket down both ways, then close it (a peer blocked in recv() wakes up)."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    connection.close()


__all__ = ["Link", "SilenceableProxy", "Which", "close_socket"]
