"""Loopback TCP proxies for network-fault tests: one that can be cut and restored, one that can go silent.

Both forward 127.0.0.1:`port` to 127.0.0.1:`target_port` with the same accept loop (`LoopbackProxy`); they
differ in what they do to the connections they hold.

`TcpProxy.cut()` stops listening and drops every open connection: the far side looks unreachable.

`SilenceableProxy.silence()` makes connections go silent: open, never closed, and nothing forwarded.
That is what a NAT or load balancer that forgot a flow, a paused VM or a half-open connection after a
failover looks like from binlake's side: no RST, no FIN, just no more bytes. New connections made after
`silence()` are forwarded as usual (the route itself works again), so a client that reconnects recovers.

The silenceable proxy knows which connections carry a binlog dump: the client's first packet after the handshake
phase that is a COM_BINLOG_DUMP (0x12) or COM_BINLOG_DUMP_GTID (0x1e) marks it, so a test can silence
the binlog stream alone, the other (control) connections alone, or all of them.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from cdc_lib.dev.local_mariadb import free_port

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


#: The two directions of one proxied connection, each pumped by its own thread.
Pumps = tuple[Callable[[], None], Callable[[], None]]


class LoopbackProxy:
    """Forwards each connection accepted on a listener to 127.0.0.1:`target_port`, one thread per direction.

    A subclass records each new pair and names its pumps (`_connected`); the accept loop is this one.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._lock = threading.Lock()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                close_socket(client)
                continue
            upstream.settimeout(None)
            pumps = self._connected(listener, client, upstream)
            if pumps is None:
                close_socket(client)
                close_socket(upstream)
                return
            for pump in pumps:
                threading.Thread(target=pump, daemon=True).start()

    def _connected(self, listener: socket.socket, client: socket.socket, upstream: socket.socket) -> Pumps | None:
        """Record a new pair; its pumps (client to upstream, then back), or None when the proxy no longer
        serves `listener` (the pair is closed and the accept loop ends)."""
        raise NotImplementedError


class TcpProxy(LoopbackProxy):
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`.

    `cut()` stops listening and drops every open connection (the far side looks unreachable);
    `restore()` listens again on the same port.
    """

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()

    def restore(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave it listening.
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            for connection in list(self._open):
                close_socket(connection)
            self._open.clear()

    def _connected(self, listener: socket.socket, client: socket.socket, upstream: socket.socket) -> Pumps | None:
        with self._lock:
            if self._listener is not listener:
                return None
            self._open.update((client, upstream))
        return partial(self._pump, client, upstream), partial(self._pump, upstream, client)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)
            close_socket(source)
            close_socket(target)


class SilenceableProxy(LoopbackProxy):
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`; `silence()` stalls the connections open now."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.links: list[Link] = []
        self.silenced_at: float | None = None
        self._closing = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]

    def start(self) -> SilenceableProxy:
        self._listener.listen(64)
        threading.Thread(target=self._accept, args=(self._listener,), name="net-proxy-accept", daemon=True).start()
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

    def _connected(self, listener: socket.socket, client: socket.socket, upstream: socket.socket) -> Pumps | None:
        if self._closing.is_set():
            return None
        link = Link(client, upstream)
        with self._lock:
            self.links.append(link)
        return partial(self._pump, link, client, upstream, True), partial(self._pump, link, upstream, client, False)

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


__all__ = ["Link", "LoopbackProxy", "SilenceableProxy", "TcpProxy", "Which", "close_socket"]
